#!/usr/bin/env python3
"""Memory pressure: a program past its peak beside a memory hog, in a cgroup
with a memory limit (docs/benchmarks.md, "Memory pressure").

The holder (bench_pressure hold) takes BIG MiB in 2 KiB blocks through
malloc and frees them, then works on SMALL MiB; the hog (bench_pressure hog)
then touches HOG MiB at once.  What both need at the same time fits the
limit; what the holder's allocator keeps besides does not.  An allocator that
gives back under pressure lets the hog through; one that keeps what it was
freed makes the kernel reclaim, throttle (memory.high) or kill (a hard
limit, no swap).  Each allocator runs ROUNDS times, interleaved, and the
table gives medians: the hog's time and slowest MiB, the holder's slowest
pass, OOM kills, the cgroup's PSI stall, its peak usage, and for qslab the
trims of its purger (the Pressure: line of QSLAB_STATS=1).

The cgroup: a child of the cgroup2 mount's root with memory.high (and
memory.max at 1.5x), where cgroup v2 has the memory controller; else a child
of cgroup v1's memory controller with memory.limit_in_bytes, and beside it a
cgroup2 child (no controller) for PSI's stall time.  Needs root.

    python3 bench/pressure.py --bin build/release/bench/bench_pressure \\
        --qslab-lib build/release/src/malloc/libqslab-malloc.so [--rounds 5]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

PEERS = {"jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
         "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
         "mimalloc": "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"}


def mounts():
    v1 = v2 = None
    for line in open("/proc/self/mountinfo"):
        pre, _, post = line.partition(" - ")
        f, p = pre.split(), post.split()
        if p[0] == "cgroup2" and not v2:
            v2 = f[4]
        if p[0] == "cgroup" and "memory" in p[2].split(",") and not v1:
            v1 = f[4]
    return v1, v2


def read(path, default=""):
    try:
        return open(path).read()
    except OSError:
        return default


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Group:
    """The cgroup (v2 with memory.high, else v1 with a hard limit) and the
    cgroup2 directory whose memory.pressure counts the stall."""

    def __init__(self, limit_mib, name):
        v1, v2 = mounts()
        self.dirs, self.v1 = [], False
        if v2 and "memory" in read(v2 + "/cgroup.controllers").split():
            if "memory" not in read(v2 + "/cgroup.subtree_control").split():
                write(v2 + "/cgroup.subtree_control", "+memory")
            self.mem = self.psi = os.path.join(v2, name)
            os.mkdir(self.mem)
            self.dirs.append(self.mem)
            write(self.mem + "/memory.high", str(limit_mib << 20))
            write(self.mem + "/memory.max", str((limit_mib * 3 // 2) << 20))
        elif v1:
            self.v1 = True
            self.mem = os.path.join(v1, name)
            os.mkdir(self.mem)
            self.dirs.append(self.mem)
            write(self.mem + "/memory.limit_in_bytes", str(limit_mib << 20))
            self.psi = None
            if v2 and os.access(v2, os.W_OK):
                self.psi = os.path.join(v2, name)
                os.mkdir(self.psi)
                self.dirs.append(self.psi)
        else:
            raise RuntimeError("no cgroup v2 memory controller and no cgroup v1 memory mount")

    def enter(self):
        for d in self.dirs:
            write(d + "/cgroup.procs", str(os.getpid()))

    def figures(self):
        ev = read(self.mem + ("/memory.oom_control" if self.v1 else "/memory.events"))
        m = re.search(r"^oom_kill (\d+)", ev, re.M)
        peak = read(self.mem + ("/memory.max_usage_in_bytes" if self.v1 else "/memory.peak"), "0")
        stall = 0
        if self.psi:
            m2 = re.search(r"^some .*total=(\d+)", read(self.psi + "/memory.pressure"), re.M)
            stall = int(m2.group(1)) if m2 else 0
        return {"oom": int(m.group(1)) if m else 0, "peak": int(peak.split()[0] or 0) / 2**20,
                "stall": stall / 1e3}

    def remove(self):
        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.1)


def run_one(args, env_extra, name):
    g = Group(args.limit, name)
    try:
        env = dict(os.environ, **env_extra)
        hold = subprocess.Popen([args.bin, "hold", str(args.big), str(args.small), "3"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=g.enter)
        first = hold.stdout.readline()
        hog = subprocess.Popen([args.bin, "hog", str(args.hog)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=g.enter)
        hog_out, _ = hog.communicate(timeout=120)
        hold_out, hold_err = hold.communicate(timeout=120)
        r = g.figures()
        m = re.search(r"in ([\d.]+) s, slowest MiB ([\d.]+) ms", hog_out)
        r["hog_s"], r["hog_mib_ms"] = (float(m.group(1)), float(m.group(2))) if m else (None, None)
        m = re.search(r"slowest ([\d.]+) ms", hold_out)
        r["hold_ms"] = float(m.group(1)) if m else None
        r["killed"] = ("hog " if hog.returncode else "") + ("hold" if hold.returncode or
                                                            first.strip() != "freed" else "")
        m = re.search(r"(\d+) events gave back (\d+) bytes; (\d+) trims near the limit gave back "
                      r"(\d+) bytes", hold_err)
        r["trims"] = "%s+%s" % (m.group(1), m.group(3)) if m else "-"
        return r
    finally:
        g.remove()


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/release/bench/bench_pressure")
    ap.add_argument("--qslab-lib", default="build/release/src/malloc/libqslab-malloc.so")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--limit", type=int, default=512, help="MiB (memory.high or the v1 limit)")
    ap.add_argument("--big", type=int, default=320, help="MiB the holder takes and frees")
    ap.add_argument("--small", type=int, default=32, help="MiB the holder works on after")
    ap.add_argument("--hog", type=int, default=320, help="MiB the hog touches")
    ap.add_argument("--decay-ms", type=int, default=None,
                    help="qslab's empty_decay_ms for every cache (QSLAB_TUNE)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("pressure.py: needs root (it makes cgroups)")
    allocs = [("glibc", {})]
    allocs += [(n, {"LD_PRELOAD": p}) for n, p in PEERS.items() if os.path.exists(p)]
    q = {"LD_PRELOAD": args.qslab_lib, "QSLAB_STATS": "1"}
    if args.decay_ms is not None:
        q["QSLAB_TUNE"] = "*:empty_decay_ms=%d" % args.decay_ms
    allocs += [("qslab", q), ("qslab-nopressure", dict(q, QSLAB_PRESSURE="0"))]
    v2 = mounts()[1]
    kind = ("cgroup v2 memory.high" if v2 and "memory" in read(v2 + "/cgroup.controllers").split()
            else "cgroup v1 memory.limit_in_bytes")
    print("memory pressure: limit %d MiB (%s), holder %d MiB then %d MiB, hog %d MiB, %d rounds"
          % (args.limit, kind, args.big, args.small, args.hog, args.rounds))
    print("load average before: %s%s" % (read("/proc/loadavg").split()[0],
                                        "; qslab's empty_decay_ms %d" % args.decay_ms
                                        if args.decay_ms is not None else ""))
    res = {n: [] for n, _ in allocs}
    for r in range(args.rounds):
        for n, env in allocs:
            x = run_one(args, env, "qslab-bench-%d-%d" % (os.getpid(), r))
            res[n].append(x)
            print("  round %d %-17s hog %s s (slowest MiB %s ms), holder slowest pass %s ms, "
                  "oom kills %d%s, stall %.0f ms, peak %.0f MiB, qslab events+trims %s"
                  % (r + 1, n, x["hog_s"], x["hog_mib_ms"], x["hold_ms"], x["oom"],
                     " (killed: %s)" % x["killed"].strip() if x["killed"] else "", x["stall"],
                     x["peak"], x["trims"]), flush=True)
    print("\n%-17s %10s %14s %16s %9s %10s %9s" % ("allocator", "hog s", "slowest MiB ms",
                                                  "holder pass ms", "oom kills", "stall ms",
                                                  "peak MiB"))
    for n, _ in allocs:
        v = res[n]
        f = lambda k: med([x[k] for x in v])
        fmt = lambda x, p: ("%.*f" % (p, x)) if x is not None else "-"
        print("%-17s %10s %14s %16s %9d %10s %9s" % (n, fmt(f("hog_s"), 3), fmt(f("hog_mib_ms"), 1),
                                                     fmt(f("hold_ms"), 1), sum(x["oom"] for x in v),
                                                     fmt(f("stall"), 0), fmt(f("peak"), 0)))
    print("(medians of %d rounds; oom kills: the sum)" % args.rounds)


if __name__ == "__main__":
    main()
