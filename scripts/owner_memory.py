#!/usr/bin/env python3
"""owner_memory.py - memory held in qslab's per-owner and per-node structures.

On paper: for each front end (slqb, slub, slab, slob) and a set of
representative caches, the worst-case bytes each structure may hold, from the
tunables the library itself gives those caches (read by a small C probe,
scripts/owner_memory_probe.c and owner_memory_workloads.c, linked against a
build's libqslab.a), totalled for this VM, a 2-socket 128-thread machine (2
nodes x 64 CPUs) and an 8-node 1,024-CPU machine (8 x 128): the seeds' worry
about SLAB's alien-cache "crossbar" of CPUs x nodes x caches.

--check: the same model for one 256-byte cache on this VM under
QSLAB_FAKE_NUMA=2, 4 and 8, beside what the probe measures after driving every
per-owner and per-node structure of that cache to its bound.

Usage:
  scripts/owner_memory.py [--build DIR] [--caches SPEC,...]
  scripts/owner_memory.py --check [--build DIR]
A SPEC is name:size[:align][:hw] (hw: QSLAB_HWCACHE_ALIGN).  DIR (default
build/test) must hold libqslab.a at its top level; it is built with cmake
when missing.  Python 3 standard library only.

Owners are CPUs throughout (the default where the kernel has rseq: one queue
per CPU and cache); with QSLAB_OWNER=thread every thread that uses a cache is
an owner instead, and "per owner" multiplies by threads.

SLQB's owner budget (src/front/slqb/budget.c) is per owner, not per cache: the queued
objects and the stashes of all an owner's SLQB queues together hold at most
owner_budget bytes (256 KiB by default), so an owner's SLQB figure for a set
of caches is min(budget, sum of the caches' queue + stash bounds) +
min(transit budget, their remote frees in transit) + structures: each
pending or open batch reserves its room of the owner's transit budget, a
quarter of the owner budget (at least 16 KiB).

The script's parts: owner_memory_model.py (the library's constants and the
model), owner_memory_probe.py (the probe, owner_memory_probe.c and
owner_memory_workloads.c, built and run; this machine's CPUs and nodes),
owner_memory_report.py (the default mode's tables) and owner_memory_check.py
(--check).
"""

import argparse
import os
import shutil
import sys
import tempfile

from owner_memory_check import check_mode
from owner_memory_model import DEFAULT_CACHES
from owner_memory_probe import ROOT, build_probe
from owner_memory_report import model_mode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "test"),
                    help="build directory with libqslab.a (default build/test)")
    ap.add_argument("--caches", default=DEFAULT_CACHES,
                    help="comma-separated name:size[:align][:hw] (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="check the model against QSLAB_FAKE_NUMA=2,4,8 runs")
    args = ap.parse_args()
    if not shutil.which(os.environ.get("CC", "cc")):
        sys.exit("owner_memory.py: no C compiler (cc) for the probe")
    with tempfile.TemporaryDirectory(prefix="owner_memory.") as tmp:
        exe = build_probe(os.path.abspath(args.build), tmp)
        (check_mode if args.check else model_mode)(args, exe)


if __name__ == "__main__":
    main()
