#!/usr/bin/env python3
"""qslabinfo against live processes (tests/tools/CMakeLists.txt).

  known counts   obs_target (static: .symtab; shared: .dynsym): --json exact per
                 cache against the target's own qslab_cache_stats; --proc
                 byte-identical to the target's own qslab_slabinfo (2.1 header,
                 column count); the default mode, -e, -S, -L; -T adds up (the
                 caches' slabs equal the page layer's, the rows sum to the total)
  at exit        qslabinfo --json -- obs_target exit
  drop-in        `sleep` under LD_PRELOAD=libqslab-malloc.so (normal builds)
  torn reads     300 reads of obs_churn (caches and threads made and destroyed
                 in a loop): every run a valid snapshot or the retry message
  not qslab      `sleep`: one line, exit 1; a dead pid: ESRCH's line, exit 1
  hostile        obs_fake: another layout version (exit 2, both versions), a
                 cyclic cache list and a wild pointer (exit 3, one line)
  permission     as root: the tool run as nobody is refused with EPERM's line
                 naming the uids (skipped, with a message, when not root)
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

failures = 0
passes = 0


def check(cond, what, detail=""):
    global failures, passes
    if cond:
        passes += 1
    else:
        failures += 1
        print("FAIL: %s%s" % (what, ("\n  " + detail.replace("\n", "\n  ")) if detail else ""),
              flush=True)


def env_for_target():
    env = dict(os.environ)
    env["QSLAB_PURGE"] = "0"  # nothing moves while the target waits
    return env


def start(argv, env=None):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=None, env=env or env_for_target(), text=True)
    out = []
    while True:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("%s ended before READY: %r" % (argv, out))
        if line == "READY\n":
            return p, "".join(out)
        out.append(line)


def stop(p):
    try:
        p.stdin.close()
    except BrokenPipeError:
        pass
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def tool(args, **kw):
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=120, **kw)


def one_line(r):
    lines = r.stderr.strip("\n").split("\n")
    return len(lines) == 1 and lines[0].startswith("qslabinfo: ")


def parse_own(text):
    stats = {}
    for line in text.splitlines():
        if line.startswith("STATS "):
            f = line.split()
            stats[f[1]] = dict(zip(["active_objs", "num_objs", "num_slabs", "empty_slabs",
                                    "queued_objs", "objs_per_slab"], map(int, f[2:])))
    m = re.search(r"SLABINFO-BEGIN\n(.*)SLABINFO-END\n", text, re.S)
    return stats, m.group(1) if m else ""


def check_proc_format(text, what):
    lines = text.splitlines()
    check(len(lines) >= 3 and lines[0] == "slabinfo - version: 2.1", what + ": first line",
          text[:200])
    check(len(lines) >= 2 and lines[1].startswith("# name") and ": slabdata" in lines[1],
          what + ": header line", lines[1] if len(lines) > 1 else "")
    pat = re.compile(r"^(\S+)\s+(\d+) +(\d+) +(\d+) +(\d+) +(\d+) : tunables +(\d+) +(\d+) +(\d+)"
                     r" : slabdata +(\d+) +(\d+) +(\d+) : front (\w+)( : debug [A-Z]+ \d+)?$")
    for l in lines[2:]:
        check(pat.match(l) is not None, what + ": a 2.1 line with 12 numeric columns", l)


def known_counts(target, label):
    p, text = start([target])
    try:
        own, own_proc = parse_own(text)
        check(own.get("obs_a", {}).get("active_objs") == 1000, label + ": target's own obs_a", text)
        r = tool(["-p", str(p.pid), "--json"])
        check(r.returncode == 0, label + ": --json exit 0", r.stderr)
        try:
            j = json.loads(r.stdout)
        except ValueError as e:
            check(False, label + ": --json parses", "%s\n%s" % (e, r.stdout[:2000]))
            return
        check(j["layout_version"] == 1 and j["pid"] == p.pid, label + ": json header")
        caches = {c["name"]: c for c in j["caches"]}
        for name, want in own.items():
            got = caches.get(name)
            check(got is not None, label + ": cache %s in --json" % name)
            if got:
                for k, v in want.items():
                    check(got[k] == v, label + ": %s %s" % (name, k),
                          "tool %s, target %s" % (got[k], v))
        exact = {"obs_a": 1000, "obs_b": 37, "obs_freed": 100, "obs_empty": 0, "kmalloc-64": 500}
        for name, n in exact.items():
            check(caches.get(name, {}).get("active_objs") == n, label + ": %s has %d objects" % (name, n),
                  str(caches.get(name)))
        b = caches.get("obs_b", {})
        check(b.get("ctor") is True and b.get("flags") == 0x2000 and b.get("object_size") == 4000,
              label + ": obs_b's constructor, flags, size", str(b))
        check(j["large"]["live"] == 1 and j["large"]["live_bytes"] >= 40 << 20,
              label + ": the large block", str(j["large"]))
        t = j["totals"]
        parts = ["objects_in_use", "free_in_partial_slabs", "held_in_queues", "empty_slabs",
                 "slab_overhead", "slob_free", "large", "metadata"]
        check(t["unaccounted"] == 0, label + ": the caches' slabs are the page layer's", str(t))
        check(sum(t[k] for k in parts) + max(t["unaccounted"], 0) == t["total"],
              label + ": the totals add up", str(t))
        check(t["slabs"] == t["page_layer_slab_bytes"], label + ": slab bytes match", str(t))
        check(t["objects_in_use"] >= 1000 * 100 + 37 * 4000 + 100 * 256 + 500 * 64,
              label + ": objects in use cover what the target holds", str(t))
        # --proc: the library's own text
        r = tool(["-p", str(p.pid), "--proc"])
        check(r.returncode == 0, label + ": --proc exit 0", r.stderr)
        check(r.stdout == own_proc, label + ": --proc is byte-identical to qslab_slabinfo()",
              "tool:\n%s\ntarget:\n%s" % (r.stdout, own_proc))
        check_proc_format(r.stdout, label + " --proc")
        # default mode, -e, sorts
        r = tool(["-p", str(p.pid)])
        check(r.returncode == 0 and r.stdout.startswith("Name "), label + ": default mode", r.stderr)
        rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:] if l.strip()}
        check(rows.get("obs_a", [None, None])[1] == "1000", label + ": default obs_a 1000 objects",
              r.stdout)
        check("obs_empty" not in rows, label + ": empty caches hidden without -e", r.stdout)
        r = tool(["-p", str(p.pid), "-e"])
        check("obs_empty " in r.stdout, label + ": -e shows empty caches", r.stdout)
        for opt in ("-S", "-L"):
            r = tool(["-p", str(p.pid), opt])
            check(r.returncode == 0 and "obs_a" in r.stdout, label + ": " + opt, r.stderr)
        r = tool(["-p", str(p.pid), "-A"])
        rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:] if l.strip()}
        check(r.returncode == 0 and rows.get("obs_freed", [0, 0, 0])[1:4] == ["100", "300", "200"],
              label + ": -A obs_freed: 100 objects, 300 allocs, 200 frees", r.stdout + r.stderr)
        r = tool(["-p", str(p.pid), "-r", "obs_b"])
        check(r.returncode == 0 and "Cache obs_b" in r.stdout and "37 in use" in r.stdout,
              label + ": -r obs_b", r.stdout + r.stderr)
        r = tool(["-p", str(p.pid), "-r", "no_such_cache"])
        check(r.returncode == 1 and one_line(r), label + ": -r of an unknown cache", r.stderr)
        r = tool(["-p", str(p.pid), "-T"])
        check(r.returncode == 0, label + ": -T exit 0", r.stderr)
        nums = {}
        for l in r.stdout.splitlines():
            m = re.match(r"^  (\S.*?\S)\s+\S+\s+(\d+)(  \(.*\))?$", l)
            if m:
                nums[m.group(1)] = int(m.group(2))
        total = nums.pop("total held from the OS", None)
        check(total is not None and total == sum(nums.values()),
              label + ": -T rows sum to the total", r.stdout)
        check("they match" in r.stdout and "anonymous RSS" in r.stdout,
              label + ": -T page layer and RSS lines", r.stdout)
        print("%s: ok through --json, --proc, default, -e, -S, -L, -A, -r, -T" % label, flush=True)
        return p
    finally:
        if failures:
            print(text, flush=True)
        stop(p)


def at_exit(target):
    r = tool(["--json", "--", target, "exit"])
    if r.returncode == 1 and "ptrace" in r.stderr.lower():
        print("at exit: skipped (%s)" % r.stderr.strip())
        return
    check(r.returncode == 0, "-- PROGRAM: exit 0", r.stderr)
    try:
        j = json.loads(r.stdout)
        caches = {c["name"]: c for c in j["caches"]}
        check(caches["obs_a"]["active_objs"] == 1000, "-- PROGRAM: read at its exit")
    except (ValueError, KeyError) as e:
        check(False, "-- PROGRAM: json", "%s %s" % (e, r.stdout[:500]))
    r = tool(["--delay", "300", "--json", "--", "sleep", "3"])
    check(r.returncode == 1 and one_line(r) and "does not use qslab" in r.stderr,
          "--delay on a program without qslab", r.stderr)


def dropin(lib):
    if not lib:
        print("drop-in: not built here (sanitizer build)")
        return
    env = dict(os.environ, LD_PRELOAD=lib)
    p = subprocess.Popen(["sleep", "30"], env=env)
    try:
        time.sleep(0.3)
        r = tool(["-p", str(p.pid), "--json"])
        check(r.returncode == 0, "drop-in: exit 0", r.stderr)
        j = json.loads(r.stdout) if r.returncode == 0 else {}
        check(j.get("library", "").endswith("libqslab-malloc.so.0.1.0") or
              "libqslab-malloc" in j.get("library", ""), "drop-in: found in libqslab-malloc.so",
              str(j.get("library")))
        check(any(c["name"].startswith("kmalloc-") for c in j.get("caches", [])),
              "drop-in: kmalloc caches")
    finally:
        p.kill()
        p.wait()


def churn(prog, reads):
    p, _ = start([prog], env=dict(os.environ))
    ok = torn = 0
    try:
        for i in range(reads):
            mode = ["--json", "--proc", "-T", ""][i % 4]
            r = tool(["-p", str(p.pid)] + ([mode] if mode else []))
            if r.returncode == 3:
                check(one_line(r) and "no consistent snapshot" in r.stderr,
                      "churn: the retry message", r.stderr)
                torn += 1
                continue
            check(r.returncode == 0, "churn: read %d exit 0 or 3" % i,
                  "rc %d\n%s" % (r.returncode, r.stderr))
            if r.returncode != 0:
                continue
            ok += 1
            if mode == "--json":
                try:
                    j = json.loads(r.stdout)
                    names = [c["name"] for c in j["caches"]]
                    check(len(names) == len(set(names)), "churn: no cache twice", str(names))
                    check(j["generation"] % 2 == 0, "churn: an even generation")
                    check(all(re.match(r"^[!-~]+$", n) for n in names), "churn: names printable")
                    check("kmalloc-8" in names, "churn: the kmalloc caches", str(names))
                except ValueError as e:
                    check(False, "churn: json parses", "%s\n%s" % (e, r.stdout[:1000]))
            elif mode == "--proc":
                check_proc_format(r.stdout, "churn --proc")
        check(p.poll() is None, "churn: the target still runs")
        check(ok > 0, "churn: some reads succeed", "%d torn" % torn)
        print("churn: %d reads, %d snapshots, %d retry messages" % (reads, ok, torn), flush=True)
    finally:
        stop(p)


def not_qslab():
    p = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        r = tool(["-p", str(p.pid)])
        check(r.returncode == 1 and one_line(r) and "does not use qslab" in r.stderr,
              "sleep: one line, exit 1", "rc %d: %s" % (r.returncode, r.stderr))
    finally:
        p.kill()
        p.wait()
    # a pid that is not running: a child reaped
    q = subprocess.Popen(["true"])
    q.wait()
    r = tool(["-p", str(q.pid)])
    check(r.returncode == 1 and one_line(r) and "ESRCH" in r.stderr, "dead pid: ESRCH's line",
          "rc %d: %s" % (r.returncode, r.stderr))
    r = tool([])
    check(r.returncode == 1 and "usage" in r.stderr, "no arguments: usage", r.stderr)


def hostile(fake):
    for how, rc, words in (("version", 2, ["version 999", "version 1"]),
                           ("cycle", 3, ["a cycle"]), ("wild", 3, ["not readable"])):
        p, _ = start([fake, how], env=dict(os.environ))
        try:
            t0 = time.time()
            r = tool(["-p", str(p.pid)])
            check(r.returncode == rc and one_line(r) and all(w in r.stderr for w in words),
                  "fake %s: exit %d, one line naming %s" % (how, rc, words),
                  "rc %d: %s" % (r.returncode, r.stderr))
            check(time.time() - t0 < 60, "fake %s: bounded time" % how)
        finally:
            stop(p)


def permission(target):
    if os.geteuid() != 0:
        print("permission: skipped (run as root to check the refusal of another user)")
        return
    p, _ = start([target])
    d = tempfile.mkdtemp()
    try:
        os.chmod(d, 0o755)
        t = os.path.join(d, "qslabinfo")
        shutil.copy(TOOL, t)
        os.chmod(t, 0o755)

        def drop():
            os.setgid(65534)
            os.setgroups([])
            os.setuid(65534)
        r = subprocess.run([t, "-p", str(p.pid)], capture_output=True, text=True, timeout=60,
                           preexec_fn=drop, cwd=d)
        check(r.returncode == 1 and one_line(r) and "EPERM" in r.stderr and "uid 0" in r.stderr
              and "uid 65534" in r.stderr, "nobody: EPERM's line names the uids",
              "rc %d: %s" % (r.returncode, r.stderr))
        print("permission: " + r.stderr.strip(), flush=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)
        stop(p)


def main():
    global TOOL
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--target-shared", required=True)
    ap.add_argument("--churn", required=True)
    ap.add_argument("--fake", required=True)
    ap.add_argument("--dropin", default="")
    ap.add_argument("--reads", type=int, default=300)
    a = ap.parse_args()
    TOOL = a.tool
    print("kernel.yama.ptrace_scope: %s" % (
        open("/proc/sys/kernel/yama/ptrace_scope").read().strip()
        if os.path.exists("/proc/sys/kernel/yama/ptrace_scope") else "(no Yama)"), flush=True)
    known_counts(a.target, "static")
    known_counts(a.target_shared, "shared")
    at_exit(a.target)
    dropin(a.dropin)
    not_qslab()
    hostile(a.fake)
    permission(a.target)
    churn(a.churn, a.reads)
    print("%d passed, %d failed" % (passes, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
