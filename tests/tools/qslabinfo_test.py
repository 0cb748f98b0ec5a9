#!/usr/bin/env python3
"""qslabinfo against live processes (tests/tools/CMakeLists.txt).

  known counts   obs_target (static: .symtab; shared: .dynsym): --json exact per
                 cache against the target's own qslab_cache_stats; --proc
                 byte-identical to the target's own qslab_slabinfo (2.1 header,
                 column count); the default mode, -e, -S, -L; -T adds up (the
                 caches' slabs equal the page layer's, the rows sum to the total)
  at exit        qslabinfo --json -- obs_target exit
  drop-in        `sleep` under LD_PRELOAD=libqslab-malloc.so (normal builds)
  starting       the same `sleep` stopped under gdb inside qslab's
                 initialisation, its caches made but not SLOB's arena: the
                 root is not ready, so the tool waits, then exits 3 with one
                 line (normal builds)
  torn reads     150 reads (30 in sanitizer builds) of obs_churn (caches and
                 threads made and destroyed in a loop): every run a valid
                 snapshot or the retry message; then --record of 100
                 snapshots 10 ms apart in one process
  not qslab      `sleep`: one line, exit 1; a dead pid: ESRCH's line, exit 1
  hostile        obs_fake: another layout version (exit 4, both versions), a
                 cyclic cache list and a wild pointer (exit 3, one line); a
                 generation odd for ever (exit 3, "try again"; --record skips
                 each sample with a comment line and goes on); a
                 root not yet relocated (a process starting): waited for, then
                 read (exit 0), or, never ready, exit 3 with one line
  permission     as root: the tool run as nobody is refused with EPERM's line
                 naming the uids (skipped, with a message, when not root)
"""
import argparse
import json
import os
import re
import shutil
import signal
import select
import subprocess
import sys
import tempfile
import time

LAYOUT_VERSION = 14  # src/observe/observe.h QS_OBSERVE_VERSION

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from toolstest import check, start, stop  # shared by the tools' tests
import toolstest


def tool(args, **kw):
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=120, **kw)


def one_line(r):
    lines = r.stderr.strip("\n").split("\n")
    return len(lines) == 1 and lines[0].startswith("qslabinfo: ")


def parse_own(text):
    stats = toolstest.own_stats(text)
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
        check(j["layout_version"] == LAYOUT_VERSION and j["pid"] == p.pid, label + ": json header")
        pj = j.get("pressure", {})
        check(set(pj) == {"source", "limit", "events", "event_bytes", "high_trims", "high_bytes",
                          "trim_ms_max"} and re.match(r"(cgroup /|system \(|none \()", pj["source"]),
              label + ": --json pressure", str(pj))
        cj = j.get("cached", {})
        check(set(cj) == {"max", "cached", "walks", "cuts", "cut_bytes"} and cj["max"] == 0 and
              cj["cuts"] == 0, label + ": --json cached (no cap)", str(cj))
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
                 "slab_overhead", "slob_free", "warm_slots", "free_slots", "chunk_headers", "large",
                 "metadata"]
        check(t["unaccounted"] == 0, label + ": the caches' slabs are the page layer's", str(t))
        check(sum(t[k] for k in parts) + max(t["unaccounted"], 0) == t["total"],
              label + ": the totals add up", str(t))
        check(t["slabs"] == t["page_layer_slab_bytes"], label + ": slab bytes match", str(t))
        # what qslab holds from the OS: its slab chunks, large blocks and
        # metadata mappings, every byte in one row
        check(t["total"] == t["page_layer_chunk_bytes"] + t["large"] + t["metadata"] and
              t["page_layer_chunk_bytes"] >= 4 << 20 and t["page_layer_chunk_bytes"] % (4 << 20) == 0
              and t["metadata"] >= t["metadata_structures"] - 64 * 1024,
              label + ": the total is the chunks, large blocks and metadata mapped", str(t))
        check(0 < t["chunk_headers"] < t["page_layer_chunk_bytes"] // 8 and
              t["warm_slots"] + t["free_slots"] + t["slabs"] + t["chunk_headers"] ==
              t["page_layer_chunk_bytes"],
              label + ": chunks = slabs + warm and free slots + headers (headers a few pages a chunk)",
              str(t))
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
        # the purger's source of memory pressure and its counters (core/pressure.c)
        pl = [l for l in r.stdout.splitlines() if l.startswith("Pressure: ")]
        check(len(pl) == 1 and re.match(r"Pressure: (cgroup /|system \(|none \().*; \d+ events gave "
                                         r"back \d+ bytes; \d+ trims near the limit gave back \d+ "
                                         r"bytes; longest trim \d+ ms$", pl[0]),
              label + ": default mode's Pressure line", r.stdout)
        cl = [l for l in r.stdout.splitlines() if l.startswith("Cached: ")]
        check(len(cl) == 1 and re.match(r"Cached: cap none; \d+ bytes of empty slabs kept \(FIFOs, "
                                         r"stashes, warm slots\); the cap gave back 0 bytes in 0 of "
                                         r"\d+ walks$", cl[0]),
              label + ": default mode's Cached line", r.stdout)
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
        views(p, j, label)
        print("%s: ok through --json, --proc, default, -e, -S, -L, -A, -r, -T, -n, -l, -X" % label,
              flush=True)
        return p
    finally:
        if toolstest.failures:
            print(text, flush=True)
        stop(p)


def views(p, j, label):
    """-n, -l, -X, the large buckets, and --json's nodes and owners, against
    the target's known counts and the --json read just before (nothing
    moves in the target: QSLAB_PURGE=0, it waits)."""
    caches = {c["name"]: c for c in j["caches"]}
    a = caches.get("obs_a", {})
    front = a.get("front")
    # -n: one line per node of each used cache; the lists and the owners'
    # slabs of obs_a add up to its slabs (SLOB: its objects are in shared
    # pages, no lists)
    r = tool(["-p", str(p.pid), "-n"])
    check(r.returncode == 0 and r.stdout.startswith("%d NUMA node" % j["nr_nodes"]),
          label + ": -n header", r.stdout[:300] + r.stderr)
    rows = [l.split() for l in r.stdout.splitlines()[2:] if l.strip()]
    mine = [x for x in rows if x[0] == "obs_a"]
    check(len(mine) == j["nr_nodes"], label + ": -n one obs_a line per node", r.stdout)
    if front != "slob" and mine:
        slabs = sum(int(x[2]) + int(x[3]) + int(x[4]) + int(x[5]) + int(x[7]) for x in mine)
        # SLUB, as the kernel's without debugging, lists no full slab
        check(slabs == a["num_slabs"] or (front == "slub" and slabs <= a["num_slabs"]),
              label + ": -n obs_a's lists and owners' slabs add up to its %d slabs" % a["num_slabs"],
              r.stdout)
        check(sum(int(x[8]) for x in mine) == a["queued_objs"],
              label + ": -n obs_a's queued objects", r.stdout)
    check([n["partial"] for n in a.get("nodes", [])] == [int(x[2]) for x in mine],
          label + ": --json nodes match -n", str(a.get("nodes")))
    # -l: one line per queue; obs_a was used by the main thread alone
    r = tool(["-p", str(p.pid), "-l"])
    check(r.returncode == 0 and r.stdout.startswith("owners: "), label + ": -l header",
          r.stdout[:300] + r.stderr)
    mine = [l for l in r.stdout.splitlines()[2:] if l.startswith("obs_a ")]
    owners = a.get("owners", [])
    check(len(mine) == len(owners) == a.get("queues"), label + ": -l one line per queue of obs_a",
          "%s\n%s" % (r.stdout, owners))
    if front != "slob":
        check(sum(o["alloc"] for o in owners) == 1000 and sum(o["free"] for o in owners) == 0,
              label + ": obs_a's owners allocated its 1000 objects", str(owners))
        if j["owner"] == "thread":
            check(any(o["tid"] == p.pid for o in owners) and
                  any(("thread %d " % p.pid) in l for l in mine),
                  label + ": -l names the main thread by its id", r.stdout)
        else:
            check(all(o["cpu"] >= 0 for o in owners) and all(" cpu " in l for l in mine),
                  label + ": -l names CPUs", r.stdout)
    # -X: numbers, the name last
    r = tool(["-p", str(p.pid), "-X"])
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and lines and lines[0].startswith("# active_objs "), label + ": -X header",
          r.stdout[:300] + r.stderr)
    row = [l.split() for l in lines[1:] if l.endswith(" obs_a")]
    check(len(row) == 1 and row[0][0] == "1000" and all(f.isdigit() for f in row[0][:-1]),
          label + ": -X obs_a: 1000 objects, numbers only", r.stdout)
    # the 40 MiB block in its size bucket, in --json and the default mode
    b = [k for k in j["large"].get("buckets", []) if k["from"] == 32 << 20]
    check(len(b) == 1 and b[0]["live"] == 1 and b[0]["to"] == 64 << 20,
          label + ": --json large bucket [32 MiB, 64 MiB) holds the block", str(j["large"]))
    r = tool(["-p", str(p.pid)])
    check(re.search(r"^  32M-64M +1 ", r.stdout, re.M) is not None,
          label + ": the default mode's large bucket line", r.stdout)


def samples(rec):
    """How many samples (distinct times) a record file holds so far."""
    try:
        return len({l.split("\t")[0] for l in open(rec) if not l.startswith("#")})
    except OSError:
        return 0


def plot_scales(plot, tmp):
    """qslab-plot's scales on a record made up for them: a busy cache (a
    million allocations a second) and a quiet one (a hundred): rates on a
    log scale, the busiest named first in the key and drawn last, on top;
    the x axis ending at the last sample; memory tics a power of two of
    bytes apart."""
    rec = os.path.join(tmp, "scales.rec")
    with open(rec, "w") as f:
        f.write("# qslab-record 1\n# pid 1 interval_ms 1000\n# started -\n# columns -\n")
        for s in range(5):
            for cache, rate, space in (("busy", 1000000, 48 << 20), ("quiet", 100, 4096)):
                n = rate * s
                f.write("\t".join(map(str, [s * 1000, cache, 10, 10, space, n, n, n, n, 0, 0]))
                        + "\n")
    out = os.path.join(tmp, "scales")
    pr = subprocess.run([sys.executable, plot, rec, "-o", out], capture_output=True, text=True,
                        timeout=120)
    check(pr.returncode == 0, "qslab-plot on a made-up record", pr.stderr)
    rate = open(os.path.join(out, "alloc-rate.gp")).read()
    plot_line = rate[rate.index("plot "):]
    check("set logscale y" in rate, "qslab-plot: rates spanning decades on a log scale", rate)
    check(plot_line.index("keyentry") < plot_line.index('"quiet"') < plot_line.index("notitle")
          and '"busy"' in plot_line.split("keyentry", 1)[1].split(",")[0],
          "qslab-plot: the busiest cache named first in the key and drawn last", plot_line)
    mem = open(os.path.join(out, "memory.gp")).read()
    check("set autoscale xfix" in mem, "qslab-plot: the x axis ends at the last sample", mem)
    check("set ytics 8388608\n" in mem, "qslab-plot: memory tics 8 MiB apart for 48 MiB", mem)


def record(target, plot):
    """--record: samples while the target runs, ending when it exits; then
    qslab-plot's tables (and charts when gnuplot is there)."""
    p, _ = start([target])
    tmp = tempfile.mkdtemp(prefix="qslab-record-")
    try:
        rec = os.path.join(tmp, "rec.tsv")
        r = tool(["-p", str(p.pid), "--record", rec, "--interval", "50", "--count", "3"])
        check(r.returncode == 0 and "3 samples" in r.stderr, "--record --count 3", r.stderr)
        lines = open(rec).read().splitlines()
        check(lines[:1] == ["# qslab-record 1"], "--record: first line", "\n".join(lines[:5]))
        data = [l.split("\t") for l in lines if not l.startswith("#")]
        check(all(len(f) == 11 for f in data), "--record: 11 fields a line", "\n".join(lines[:8]))
        a = [f for f in data if f[1] == "obs_a"]
        check(len(a) == 3 and all(f[2] == "1000" for f in a) and
              len({f[0] for f in data}) == 3, "--record: obs_a 1000 objects in each of 3 samples",
              "\n".join(lines))
        check(len([f for f in data if f[1] == "[large]" and f[2] == "1"]) == 3,
              "--record: the large block in each sample", "\n".join(lines))
        r = tool(["-p", str(p.pid), "--record", rec, "--interval", "5"])
        check(r.returncode == 2 and one_line(r) and "--interval" in r.stderr,
              "--record: an interval under 10 ms refused", r.stderr)
        # a recorder stopped for several intervals goes on an interval after
        # its late sample, not with the ticks it missed taken at once (which
        # left samples a read's time apart, or with the same t_ms)
        os.unlink(rec)
        bg = subprocess.Popen([TOOL, "-p", str(p.pid), "--record", rec, "--interval", "200",
                               "--count", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and samples(rec) < 2:
            time.sleep(0.02)
        os.kill(bg.pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(bg.pid, signal.SIGCONT)
        out, err = bg.communicate(timeout=60)
        times = sorted({int(l.split("\t")[0]) for l in open(rec).read().splitlines()
                        if not l.startswith("#")})
        gaps = [b - a for a, b in zip(times, times[1:])]
        check(bg.returncode == 0 and len(times) == 4 and min(gaps) >= 20,
              "--record stopped for 5 intervals: 4 samples, none within 20 ms of another", str(times))
        # until the process exits (into the same file, written afresh)
        os.unlink(rec)
        bg = subprocess.Popen([TOOL, "-p", str(p.pid), "--record", rec, "--interval", "20"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # two samples at least before the target goes (polled: a fixed wait
        # fell short on a loaded machine)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and samples(rec) < 2:
            time.sleep(0.05)
        stop(p)
        out, err = bg.communicate(timeout=30)
        check(bg.returncode == 0 and "the process exited" in err, "--record ends with the process",
              err)
        n = samples(rec)
        check(n >= 2, "--record: samples while the process ran (%d)" % n)
        # qslab-plot
        pr = subprocess.run([sys.executable, plot, rec, "-o", os.path.join(tmp, "p"), "--data"],
                            capture_output=True, text=True, timeout=60)
        check(pr.returncode == 0, "qslab-plot --data", pr.stderr)
        mem = open(os.path.join(tmp, "p", "memory.dat")).read().splitlines()
        check(mem and mem[0].startswith("# seconds\t") and "obs_a" in mem[0].split("\t"),
              "qslab-plot: memory table names obs_a", "\n".join(mem[:3]))
        fast = open(os.path.join(tmp, "p", "fast-path.dat")).read().splitlines()
        check(len(fast) == n, "qslab-plot: one fast-path row per interval", "\n".join(fast))
        if shutil.which("gnuplot"):
            pr = subprocess.run([sys.executable, plot, rec, "-o", os.path.join(tmp, "p")],
                                capture_output=True, text=True, timeout=120)
            pngs = ["memory.png", "alloc-rate.png", "fast-path.png"]
            ok = pr.returncode == 0 and all(
                open(os.path.join(tmp, "p", f), "rb").read(8) == b"\x89PNG\r\n\x1a\n" for f in pngs)
            check(ok, "qslab-plot draws three PNG charts", pr.stderr)
            plot_scales(plot, tmp)
        else:
            print("qslab-plot charts: skipped (no gnuplot; scripts/install-deps installs it)")
        bad = os.path.join(tmp, "bad")
        open(bad, "w").write("not a record\n")
        pr = subprocess.run([sys.executable, plot, bad, "--data"], capture_output=True, text=True)
        check(pr.returncode == 1 and "not a qslab record" in pr.stderr, "qslab-plot refuses junk",
              pr.stderr)
        print("record: ok", flush=True)
    finally:
        if p.poll() is None:
            stop(p)
        shutil.rmtree(tmp, ignore_errors=True)


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
    # A program without qslab read while it runs: cat, which ends when the
    # test closes its stdin (after qslabinfo has spoken, or 60 s); it holds
    # qslabinfo's output pipes until then (a fixed `sleep 3` cost 3 s a run).
    p = subprocess.Popen([TOOL, "--delay", "300", "--json", "--", "cat"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = ""
        if select.select([p.stderr], [], [], 60)[0]:
            first = p.stderr.readline()
    finally:
        p.stdin.close()
    out, rest = p.stdout.read(), p.stderr.read()
    r = subprocess.CompletedProcess(p.args, p.wait(timeout=120), out, first + rest)
    check(r.returncode == 1 and one_line(r) and "does not use qslab" in r.stderr and "qslab-run" in r.stderr,
          "--delay on a program without qslab: says so, and names qslab-run",
          "rc %d: %s" % (r.returncode, r.stderr))


def dropin(lib):
    if not lib:
        print("drop-in: not built here (sanitizer build)")
        return
    env = dict(os.environ, LD_PRELOAD=lib)
    p = subprocess.Popen(["sleep", "30"], env=env)
    try:
        # until the library is mapped (a fixed 0.3 s can be too short under load)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if "libqslab-malloc" in open("/proc/%d/maps" % p.pid).read():
                    break
            except OSError:
                pass
            time.sleep(0.05)
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


def starting(lib):
    """A drop-in stopped inside its initialisation, at qs_slob_setup (its
    kmalloc caches made, SLOB's arena, in no cache list, not yet): `ready`
    is set last, so the tool waits for it and gives up with the "not
    initialised" line (exit 3), where a root ready before the arena was made let it
    read a zeroed arena and report data that does not hold together (exit
    1)."""
    if not lib:
        print("starting: not built here (sanitizer build)")
        return
    gdb = shutil.which("gdb")
    check(gdb is not None, "starting: gdb installed (scripts/install-deps)")
    if not gdb:
        return
    probe = ("python import gdb, subprocess; "
             "r = subprocess.run([%r, '-p', str(gdb.selected_inferior().pid), '--json'], "
             "capture_output=True, text=True, timeout=60); "
             "print('QSI-RC %%d' %% r.returncode); print('QSI-ERR ' + r.stderr.strip())" % TOOL)
    r = subprocess.run([gdb, "-q", "-nx", "-batch", "-ex", "set startup-with-shell off",
                        "-ex", "set breakpoint pending on", "-ex", "set confirm off",
                        "-ex", "set environment LD_PRELOAD=" + lib, "-ex", "break qs_slob_setup",
                        "-ex", "run", "-ex", probe, "-ex", "kill", "--args", "sleep", "30"],
                       capture_output=True, text=True, timeout=120)
    rc = re.search(r"^QSI-RC (\d+)$", r.stdout, re.M)
    err = re.search(r"^QSI-ERR (.*)$", r.stdout, re.M)
    check(rc is not None, "starting: the tool ran at the breakpoint", r.stdout + r.stderr)
    if not rc:
        return
    check(rc.group(1) == "3" and err is not None and "not initialised" in err.group(1),
          "starting: not ready, waited for, exit 3 (\"not initialised\")",
          "exit %s: %s" % (rc.group(1), err.group(1) if err else ""))


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
        # many snapshots in one process: --record every 10 ms (a process's
        # start is most of a read's cost, 200 ms of it under ASan)
        rec_n = 100
        r = tool(["-p", str(p.pid), "--record", "-", "--interval", "10", "--count", str(rec_n)])
        data = [l.split("\t") for l in r.stdout.splitlines() if not l.startswith("#")]
        got = len([f for f in data if len(f) > 1 and f[1] == "[large]"])  # one a sample
        # a sample whose every read was torn is skipped with a comment line
        skipped = len([l for l in r.stdout.splitlines() if re.match(r"^# \d+ skipped: ", l)])
        check(r.returncode == 0 and r.stderr == "", "churn: --record - exit 0, quiet",
              "rc %d\n%s" % (r.returncode, r.stderr))
        check(got + skipped == rec_n and got > 0 and all(len(f) == 11 for f in data),
              "churn: --record's samples, 11 fields a line",
              "%d samples, %d skipped\n%s" % (got, skipped, r.stdout[:1000]))
        check(any(f[1].startswith("churn-") for f in data), "churn: the churning caches recorded")
        check(p.poll() is None, "churn: the target still runs")
        check(ok > 0, "churn: some reads succeed", "%d torn" % torn)
        print("churn: %d reads, %d snapshots, %d retry messages; --record: %d samples, "
              "%d skipped" % (reads, ok, torn, got, skipped), flush=True)
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
    check(r.returncode == 2 and "usage" in r.stderr, "no arguments: usage, exit 2", r.stderr)
    r = tool(["--bogus"])
    check(r.returncode == 2 and "usage" in r.stderr, "an unknown option: usage, exit 2", r.stderr)
    r = tool(["-p", "12x"])
    check(r.returncode == 2 and one_line(r) and "bad process id '12x'" in r.stderr, "-p 12x: exit 2",
          r.stderr)
    r = tool(["--help"])
    check(r.returncode == 0 and r.stdout.startswith("usage: "), "--help: usage on stdout, exit 0",
          r.stdout + r.stderr)


def hostile(fake):
    for how, rc, words in (("version", 4, ["version 999", "version %d" % LAYOUT_VERSION]),
                           ("cycle", 3, ["a cycle"]), ("wild", 3, ["not readable"]),
                           ("unrelocated", 3, ["not initialised", "try again"])):
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


    # every read torn (a change in progress for ever): a read gives up with
    # "try again"; a --record skips each sample with a comment and goes on
    p, _ = start([fake, "torn"], env=dict(os.environ))
    try:
        r = tool(["-p", str(p.pid), "--retries", "5"])
        check(r.returncode == 3 and one_line(r) and "no consistent snapshot in 5 reads" in r.stderr
              and "generation odd" in r.stderr and "try again" in r.stderr,
              "fake torn: exit 3, one line", "rc %d: %s" % (r.returncode, r.stderr))
        r = tool(["-p", str(p.pid), "--retries", "5", "--record", "-", "--interval", "10",
                  "--count", "3"])
        lines = r.stdout.splitlines()
        skipped = [l for l in lines if re.match(r"^# \d+ skipped: no consistent snapshot in 5 reads "
                                                r"\(a change was in progress \(generation odd\)\)$", l)]
        check(r.returncode == 0 and r.stderr == "" and len(skipped) == 3 and
              not [l for l in lines if not l.startswith("#")],
              "fake torn: --record - skips 3 samples, each with its comment line",
              "rc %d: %s\n%s" % (r.returncode, r.stderr, r.stdout))
        with tempfile.TemporaryDirectory() as tmp:
            r = tool(["-p", str(p.pid), "--retries", "5", "--record", tmp + "/torn.rec",
                      "--interval", "10", "--count", "2"])
            check(r.returncode == 0 and one_line(r) and
                  "0 samples of PID %d" % p.pid in r.stderr and
                  "(the count was reached; 2 skipped: no consistent snapshot)" in r.stderr,
                  "fake torn: --record FILE says how many it skipped", r.stderr)
    finally:
        stop(p)

    # the root read while the process is starting: waited for, not torn
    # (found in CI: the drop-in read between ld.so's mapping and relocation)
    p, _ = start([fake, "starting"], env=dict(os.environ))
    try:
        r = tool(["-p", str(p.pid), "--json"])
        check(r.returncode == 0 and json.loads(r.stdout).get("caches") == [],
              "fake starting: waited for, then read", "rc %d: %s" % (r.returncode, r.stderr))
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
    ap.add_argument("--reads", type=int, default=150)
    # Two parts (tests/tools/CMakeLists.txt): "counts" reads qslab's own
    # processes, whose caches and counts the mode (QSLAB_OWNER, QSLAB_FRONT)
    # shapes; "refusals" are the processes the tool must refuse (not qslab,
    # obs_fake, another user), which no mode changes: make test runs that
    # part in each build's first run only (label "once").
    ap.add_argument("--part", choices=("counts", "refusals", "all"), default="all")
    a = ap.parse_args()
    TOOL = a.tool
    print("kernel.yama.ptrace_scope: %s" % (
        open("/proc/sys/kernel/yama/ptrace_scope").read().strip()
        if os.path.exists("/proc/sys/kernel/yama/ptrace_scope") else "(no Yama)"), flush=True)
    if a.part in ("counts", "all"):
        known_counts(a.target, "static")
        known_counts(a.target_shared, "shared")
        record(a.target, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                      "scripts", "qslab-plot"))
        at_exit(a.target)
        dropin(a.dropin)
        churn(a.churn, a.reads)
    if a.part in ("refusals", "all"):
        not_qslab()
        starting(a.dropin)
        hostile(a.fake)
        permission(a.target)
    print("%d passed, %d failed" % (toolstest.passes, toolstest.failures))
    return 1 if toolstest.failures else 0


if __name__ == "__main__":
    sys.exit(main())
