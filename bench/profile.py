#!/usr/bin/env python3
"""bench/profile.py - explain a benchmark result: instructions per operation
(valgrind's callgrind, counting only inside the driver's measured loop) and
page faults (getrusage, from a normal run), for qslab and each peer.

perf's hardware counters do not work on the VMs this project runs on; an
instruction count is deterministic, so it shows a fast-path difference even
on a noisy machine, and the fault count shows what the OS charges.

    bench/profile.py --bin-dir BUILD/bench --qslab-lib BUILD/.../libqslab-malloc.so
                     TEST [--size BYTES] [--allocators a,b]

TEST is one of: slub.batch slub.pair slub.batch_all slub.pair_all slub.remote
slub.ring prodcons scale cache.pair cache.batch.  Needs valgrind
(apt-get install valgrind).
"""

import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner.allocators import find_allocators  # noqa: E402
from runner.execute import RunError, parse_result  # noqa: E402
from runner.instructions import callgrind_ir  # noqa: E402
from runner.suite import cache_contenders  # noqa: E402

OBJS, ROUNDS = 10000, 2  # small enough for callgrind, large enough to amortise


def slub(pattern, ncpus):
    """(driver args, {column: (functions, operations counted)})."""
    rounds = ROUNDS + 1  # the driver's warm-up round runs the same code
    args = ["--test", pattern, "--objs", str(OBJS), "--rounds", str(ROUNDS)]
    threads = 1 if pattern in ("batch", "pair") else ncpus
    if pattern.startswith("pair"):
        return args, {"instr/pair": (["alloc_free_pairs"], OBJS * rounds * threads)}
    allocators = threads - 1 if pattern == "remote" else threads
    return args, {"instr/malloc": (["alloc_objs"], OBJS * rounds * allocators),
                  "instr/free": (["free_objs"], OBJS * rounds * allocators)}


def profiles(test, ncpus):
    """Driver, its arguments, and the columns to measure."""
    if test.startswith("slub."):
        args, cols = slub(test[5:], ncpus)
        return "slub", args, cols, "faults/round"
    if test == "prodcons":
        msgs = 50000
        total = msgs + msgs // 10  # with the warm-up
        return ("prodcons", ["--pin", "split", "--msgs", str(msgs)],
                {"instr/send": (["new_msg"], total), "instr/receive": (["consume_msg"], total)},
                "faults/run")
    if test == "scale":
        ops = 300000
        return ("threads", ["--mode", "scale", "--threads", "1", "--ops", str(ops)],
                {"instr/op": (["scale_main"], ops)}, "faults/run")
    if test in ("cache.pair", "cache.batch"):
        pattern = test[6:]
        fn = "pairs" if pattern == "pair" else "batch"
        args = ["--pattern", pattern, "--objs", str(OBJS), "--rounds", str(ROUNDS)]
        return "cache", args, {"instr/request": ([fn], OBJS * (ROUNDS + 1))}, "faults/round"
    sys.exit(f"profile.py: unknown test {test}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--qslab-lib", required=True)
    ap.add_argument("--size", type=int, default=64, help="object size (slub tests)")
    ap.add_argument("--allocators", help="comma-separated (default: all found)")
    ap.add_argument("test")
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("profile.py: valgrind not found (apt-get install valgrind)")

    ncpus = len(os.sched_getaffinity(0))
    driver, dargs, cols, fault_label = profiles(args.test, ncpus)
    if driver == "slub":
        dargs += ["--size", str(args.size)]
    allocs, _ = find_allocators(os.path.abspath(args.qslab_lib))
    if args.allocators:
        keep = args.allocators.split(",")
        allocs = [a for a in allocs if a.name in keep or a.subject]
    if driver == "cache":
        allocs = cache_contenders(allocs)
        if args.allocators:
            allocs = [a for a in allocs if a.name in keep or a.subject]

    exe = os.path.join(args.bin_dir, "bench_" + driver)
    what = f"{args.test}" + (f", {args.size} bytes" if driver == "slub" else "")
    print(f"profile of {what}: callgrind instructions per operation "
          f"(inside the measured loop), minor page faults from a normal run")
    head = f"{'allocator':>16} | " + " | ".join(f"{c:>13}" for c in cols) + f" | {fault_label}"
    print(head)
    print("-" * len(head))
    for a in allocs:
        env = a.environ()  # LD_PRELOAD, and QSLAB_OWNER for the qslab columns
        cmd = [exe] + dargs + a.extra_args
        cells = []
        for col, (functions, ops) in cols.items():
            try:
                cells.append(f"{callgrind_ir(cmd, env, functions) / ops:13.1f}")
            except (RunError, OSError, subprocess.SubprocessError) as e:
                cells.append(f"{'error':>13}")
                print(f"{a.name}: {e}", file=sys.stderr)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        try:
            faults = f"{parse_result(r.stdout).get('minflt', float('nan')):.0f}"
        except RunError:
            faults = "-"
        print(f"{a.name:>16} | " + " | ".join(cells) + f" | {faults:>12}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
