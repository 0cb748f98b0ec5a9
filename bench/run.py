#!/usr/bin/env python3
"""bench/run.py - qslab's benchmark suite: qslab against the allocators people
use today, on the workloads of the SLAB/SLUB/SLQB discussion.

Every (test, case, allocator) runs in its own process: the drivers
(bench/<name>.c) call malloc and free, and LD_PRELOAD picks the allocator
(libqslab-malloc.so for qslab, the peer's shared library for a peer, nothing
for glibc).  The rounds are interleaved: round r runs every case of every test
once for every allocator, the allocators taking turns at going first.  The
tables give the median over the rounds, the ratio qslab/peer, and the spread
(half the range over the rounds, relative to the median, widest of the row).
qslab has a column per owner mode (QSLAB_OWNER=cpu, =thread: qslab-cpu,
qslab-thread); the first is the one the ratios to the peers, the summary and
the targets are about, the others get a summary and a ratio to the first.
The lastwrite test runs every allocator in one process per round
(bench_inproc, allocators dlopen'ed side by side; qslab once per owner mode).
The last section (fronts.*) compares qslab's front ends with each other: one
bench_fronts process per round runs every front end through the object-cache
API (the slub_test patterns, a hackbench-like test, memory), and
bench_prodcons runs under the drop-in once per front end (QSLAB_FRONT), and
for SLUB once more with the page-allocator pass-through.  After it, the
debugging costs (debug.*): one bench_debug process per round runs the
slub_test pair and batch patterns on a plain cache and on caches with SLUB's
debug flags (F, Z, P, U, FZPU), and gives each one's ratio to plain.
Then cooperative defragmentation (defrag.kv): bench_defrag (examples/kvcache.c)
deletes 90% of a key-value cache's entries at random and shrinks, with and
without mobility callbacks; RSS against live bytes, the shrink's time.
Last, the real programs (programs.*): Python, sqlite3 and
redis-server (bench/programs/programs.py) under every allocator and under
qslab with each front end, for their peak RSS, wall time and output, which
must be glibc's; 3 rounds in full mode, 1 in quick mode; and calloc's page
faults (bench_calloc).

    bench/run.py --bin-dir BUILD/bench --qslab-lib BUILD/.../libqslab-malloc.so
                 [--quick | --smoke] [--rounds N] [--only TEST,...] [--out DIR]
                 [--owners MODE,...]

While it runs, stderr gets a line per step (a test's round) with the time
elapsed and an estimate of the time left.  At the end the terminal gets the
summary table alone (about 40 lines: each benchmark's figure for qslab and
the best peer, their ratio, the target met or missed) and a last line naming
the files.  Writes to --out (default bench/results): report.txt (the summary,
then the whole report: every table), log.txt (every command run, its time and
result lines), results.csv (medians and ratios), samples.csv (every number of
every run), programs-rss.csv (the programs' RSS over time), timings.json
(seconds per run of each step, for the next run's estimates), and, when
gnuplot is installed, plots/: one PNG per table (the programs: RSS over time
per program, peak RSS against glibc's).  --smoke runs every test
at a tiny size under glibc, qslab and the installed peers and fails (exit 1)
if a run fails or prints a result line that does not parse; no timing is
judged.  See docs/benchmarks.md.

The code is the package bench/runner/, a module per part of the work (its
__init__.py names them); this file is its command.
"""

import sys

from runner.main import main

if __name__ == "__main__":
    sys.exit(main(__doc__.split("\n\n")[0]))
