#!/usr/bin/env python3
"""bench/fastpath_budget.py - the fast paths' instruction budget, as a test.

Counts with valgrind's callgrind the instructions of bench_slub's measured
loops through the drop-in (libqslab-malloc.so preloaded): `pair` (malloc(64),
write a byte, free) and `batch` (1,000 mallocs of 64 bytes, then their
frees), per pair, the loop's own instructions included, in the owner kind of
QSLAB_OWNER (default cpu: valgrind refuses rseq, and qslab emulates it there,
docs/design.md) and the front end of QSLAB_FRONT (default slqb).  It fails
when a count is over its ceiling below: a change that adds instructions to a
fast path must say so here, with the reason in its commit message.  A count
well under its ceiling is reported too, so that the ceiling comes down with
the code.  The loads and stores each path may make are stated in
src/front/fastpath.h.  Counts are exact for one binary; the ceilings are
those of the test build (make test's, RelWithDebInfo) with Debian 12's GCC,
with a margin of 2%.

    bench/fastpath_budget.py --bin-dir BUILD/bench --qslab-lib BUILD/src/malloc/libqslab-malloc.so
"""

import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner.execute import RunError  # noqa: E402
from runner.instructions import (INSTR_FUNCTIONS, INSTR_OBJS, INSTR_ROUNDS,  # noqa: E402
                                 callgrind_ir)

# (front end, owner kind, test): instructions per pair (64 bytes), measured in
# the test build (assertions on; the Release build's are lower, docs/benchmarks.md).
# SLOB has no owners: both rows are the same paths.
MEASURED = {
    ("slqb", "cpu", "pair"): 108.0, ("slqb", "cpu", "batch"): 126.8,
    ("slqb", "thread", "pair"): 92.0, ("slqb", "thread", "batch"): 108.1,
    ("slub", "cpu", "pair"): 117.0, ("slub", "cpu", "batch"): 241.4,
    ("slub", "thread", "pair"): 110.0, ("slub", "thread", "batch"): 232.7,
    ("slab", "cpu", "pair"): 108.0, ("slab", "cpu", "batch"): 237.0,
    ("slab", "thread", "pair"): 106.0, ("slab", "thread", "batch"): 220.0,
    ("slob", "cpu", "pair"): 1465.0, ("slob", "cpu", "batch"): 1326.0,
    ("slob", "thread", "pair"): 1438.0, ("slob", "thread", "batch"): 1299.0,
}
MARGIN = 1.02


def count(exe, lib, test, env):
    """(instructions per pair under callgrind, the owner kind qslab reports)."""
    cmd = [exe, "--test", test, "--size", "64", "--objs", str(INSTR_OBJS),
           "--rounds", str(INSTR_ROUNDS)]
    env = dict(env, LD_PRELOAD=lib)
    try:
        ir = callgrind_ir(cmd, env, INSTR_FUNCTIONS[test], timeout=600)
        # the owner kind, from a run with statistics (callgrind's own output
        # hides the program's)
        r = subprocess.run(["valgrind", "--tool=none", "-q"] + cmd, env=dict(env, QSLAB_STATS="1"),
                           capture_output=True, text=True, timeout=600)
    except (RunError, OSError, subprocess.SubprocessError) as e:
        sys.exit(f"fastpath_budget: {' '.join(cmd)}: {e}")
    if not ir:
        sys.exit(f"fastpath_budget: no instruction count in callgrind's output for {test}")
    owner = next((l for l in r.stderr.splitlines() if l.startswith("Owner:")), "no Owner: line")
    return ir / (INSTR_OBJS * (INSTR_ROUNDS + 1)), owner


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--qslab-lib", required=True)
    args = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("fastpath_budget: valgrind not found (scripts/install-deps installs it)")
    front = os.environ.get("QSLAB_FRONT") or "slqb"
    owner = os.environ.get("QSLAB_OWNER") or "cpu"
    exe = os.path.join(args.bin_dir, "bench_slub")
    # the mode's front end and owner kind, nothing else of qslab's settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("QSLAB_")}
    env.update(QSLAB_FRONT=front, QSLAB_OWNER=owner)
    failed = 0
    for test in ("pair", "batch"):
        ipp, line = count(exe, os.path.abspath(args.qslab_lib), test, env)
        want = "Owner: per-CPU queues" if owner == "cpu" else "Owner: per-thread queues"
        if front != "slob" and not line.startswith(want):
            print(f"FAIL {front} {owner}: the run under valgrind was not in the owner kind asked for: {line}")
            failed += 1
            continue
        measured = MEASURED[(front, owner, test)]
        ceiling = measured * MARGIN
        verdict = "ok" if ipp <= ceiling else "FAIL"
        print(f"{verdict} {test}, 64 bytes, {front} {owner}: {ipp:.1f} instructions per pair "
              f"(measured {measured:.1f}, ceiling {ceiling:.1f})")
        if ipp > ceiling:
            print(f"  a fast path got {ipp - measured:.1f} instructions longer: shorten it, or raise "
                  f"MEASURED[({front!r}, {owner!r}, {test!r})] in bench/fastpath_budget.py and say why")
            failed += 1
        elif ipp < measured / MARGIN:
            print(f"  {measured - ipp:.1f} under the measured count: lower MEASURED[({front!r}, "
                  f"{owner!r}, {test!r})] to {ipp:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
