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
"""

import argparse
import csv
import json
import datetime
import functools
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench", "programs"))
import programs as progs  # noqa: E402  bench/programs/programs.py: the real programs

# --------------------------------------------------------------------------
# Allocators

LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64",
            "/usr/local/lib", "/usr/lib"]

# name: (library file names, Debian package)
PEERS = {
    "jemalloc": (["libjemalloc.so.2"], "libjemalloc2"),
    "tcmalloc": (["libtcmalloc_minimal.so.4"], "libtcmalloc-minimal4"),
    "mimalloc": (["libmimalloc.so.2", "libmimalloc.so.2.0"], "libmimalloc2.0"),
}


def run_env(overrides, preload=None):
    """This process's environment without LD_PRELOAD, then `preload` as
    LD_PRELOAD (if any) and the overrides (name -> value; None: unset)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


class Contender:
    """One column of a table: an allocator, the driver arguments it gets, and
    the environment it runs in (env: name -> value, None to unset).

    The subjects (qslab, one column per owner mode: qslab-cpu, qslab-thread)
    come first; the first of them is the primary one, whose ratio to every
    other column the tables show; each further subject gets a ratio to the
    primary.  An `info` column (qslab through malloc in the object-cache test)
    is shown but is not a peer: summaries and targets ignore it.
    """

    def __init__(self, name, preload, version, extra_args=(), info=False, env=None,
                 subject=False, short=None, rounds=None):
        self.name = name
        self.rounds = rounds  # runs only in the first `rounds` rounds (None: in every one)
        self.preload = preload
        self.version = version
        self.extra_args = list(extra_args)
        self.info = info
        self.env = dict(env or {})
        self.subject = subject
        self.short = short or name  # in ratio headers between owner modes: thread/cpu

    def environ(self):
        """The environment of this contender's runs."""
        return run_env(self.env, self.preload)

    def describe(self):
        env = " ".join(f"{k}={v}" for k, v in self.env.items() if v is not None)
        return f"{self.name} {self.version}".strip() + (f" ({env})" if env else "")


def package_version(pkg):
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


# qslab's owner modes (QSLAB_OWNER): who owns the object queues.  One qslab
# column per mode; "default" leaves QSLAB_OWNER unset (the library's choice).
OWNER_VAR = "QSLAB_OWNER"
DEFAULT_OWNERS = ["cpu", "thread"]


def qslab_contenders(qslab_lib, owners=None):
    """One qslab column per owner mode, the first the primary subject."""
    version = qslab_version()
    cols = []
    for mode in owners or DEFAULT_OWNERS:
        if mode == "default":
            cols.append(Contender("qslab", qslab_lib, version, env={OWNER_VAR: None},
                                  subject=True, short="q"))
        else:
            cols.append(Contender(f"qslab-{mode}", qslab_lib, version,
                                  env={OWNER_VAR: mode}, subject=True, short=mode))
    return cols


def find_allocators(qslab_lib, owners=None):
    """qslab (a column per owner mode), glibc, then the peers that are
    installed; and the missing ones."""
    glibc = os.confstr("CS_GNU_LIBC_VERSION") or "glibc"
    allocs = qslab_contenders(qslab_lib, owners) + [
        Contender("glibc", None, glibc.replace("glibc ", ""))]
    missing = []
    for name, (files, pkg) in PEERS.items():
        path = next((os.path.join(d, f) for f in files for d in LIB_DIRS
                     if os.path.exists(os.path.join(d, f))), None)
        if path:
            allocs.append(Contender(name, path, package_version(pkg)))
        else:
            missing.append((name, pkg))
    return allocs, missing


def qslab_version():
    try:
        text = open(os.path.join(REPO, "include", "qslab.h")).read()
        major = re.search(r"QSLAB_VERSION_MAJOR (\d+)", text).group(1)
        minor = re.search(r"QSLAB_VERSION_MINOR (\d+)", text).group(1)
        version = f"{major}.{minor}"
    except (OSError, AttributeError):
        version = "?"
    commit = git("rev-parse", "--short", "HEAD")
    if commit:  # local changes to the allocator itself, not to bench/ or docs
        dirty = git("status", "--porcelain", "--", "src", "include")
        version += f" at {commit}" + (" + local changes to src/" if dirty else "")
    return version


def git(*args):
    try:
        out = subprocess.run(["git", "-C", REPO] + list(args), capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


# --------------------------------------------------------------------------
# Tests

class Metric:
    """A number a driver prints, and how a table shows it."""

    def __init__(self, key, title, unit, lower_is_better, scale=1.0, split=None, sep="+",
                 split_desc="median alloc + median free", short=None):
        self.key = key                  # key in the result line
        self.short = short              # in the summary table: what, and its unit
        self.title = title              # what the number is
        self.unit = unit                # unit after scaling, for the table title
        self.lower_is_better = lower_is_better
        self.scale = scale              # table value = driver value * scale
        self.split = split              # (key, key): cells show "a+b" (slub alloc+free)
        self.sep = sep                  # between the two numbers of a split cell
        self.split_desc = split_desc    # what a split cell shows

    def better(self):
        return "lower is better" if self.lower_is_better else "higher is better"

    def describe(self):
        """ "title (unit), lower is better", without repeating the unit."""
        unit = "" if self.unit in self.title else f" ({self.unit})"
        return f"{self.title}{unit}, {self.better()}"


class Case:
    def __init__(self, label, args, x=None, control=False):
        self.label = label      # row label
        self.args = args        # driver arguments
        self.x = x              # numeric x for plots (size, threads), or None
        self.control = control  # a reference row, not counted in summary and targets


class Test:
    def __init__(self, key, title, seed, driver, cases, metrics, models,
                 parallel=False, contenders=None, inproc=None, section=None, shared=None,
                 row_title=None, program=None):
        self.key = key            # short name, used in file names and --only
        self.title = title
        self.seed = seed          # the seed table or story it reproduces
        self.driver = driver      # bench_<driver>
        self.cases = cases
        self.metrics = metrics
        self.models = models      # one line: what the workload stands for
        self.parallel = parallel  # run a case's allocators at once (sleeping memory tests)
        self.contenders = contenders  # function(allocs) -> columns, default: allocs
        # bench_inproc arguments: every case and contender in one process per
        # round (allocators dlopen'ed side by side), instead of one per run
        self.inproc = inproc
        # "fronts": qslab's front ends against each other (no peers; not in
        # the summary and the targets); None: the suite against the peers
        self.section = section
        self.shared = shared  # SharedRun: one process per round feeds this test and others
        self.row_title = row_title or ("size" if key.startswith("slub.") else "case")
        # ProgramRun: a real program (bench/programs/programs.py) instead of
        # a driver; its output per contender and round, and its RSS series
        self.program = program
        self.checks = {}   # contender name -> [(round, output text)]
        self.series = {}   # contender name -> [(round, peak KiB, [(seconds, RSS KiB)])]


# The front-end comparison: bench_fronts's object sizes; hackbench's groups,
# senders and receivers per group, messages per sender and receiver, runs;
# messages of the producer/consumer runs (SLUB's pass-through column pays
# the page layer for every buffer: about 0.1 million a second).
FRONTS_FULL = dict(front_sizes=[64, 256, 1024, 4096], hb_groups=2, hb_senders=4,
                   hb_receivers=4, hb_loops=10000, hb_rounds=3, front_msgs=100000)
FRONTS_QUICK = dict(front_sizes=[64, 256, 1024, 4096], hb_groups=2, hb_senders=4,
                    hb_receivers=4, hb_loops=4000, hb_rounds=3, front_msgs=50000)
FRONTS_SMOKE = dict(front_sizes=[64], hb_groups=1, hb_senders=2, hb_receivers=2, hb_loops=50,
                    hb_rounds=1, front_msgs=2000)
# The debugging costs: bench_debug's object sizes and its rounds inside a
# process (every configuration twice per round, a warm-up and a measured
# run; the whole process takes about 1.5 s in full mode on the 2-core VM).
DEBUG_FULL = dict(debug_sizes=[64, 1024], debug_rounds=9)
DEBUG_QUICK = dict(debug_sizes=[64, 1024], debug_rounds=5)
DEBUG_SMOKE = dict(debug_sizes=[64, 1024], debug_rounds=1)

# Cooperative defragmentation: the key-value cache's entries (bench_defrag,
# examples/kvcache.c), of which 90% are deleted before the shrink.
DEFRAG_FULL = dict(defrag_entries=2000000)
DEFRAG_QUICK = dict(defrag_entries=500000)
DEFRAG_SMOKE = dict(defrag_entries=20000)
# The target: the resident set's growth once the shrink's slabs have gone
# back, at most this many times the live bytes (with mobility).
DEFRAG_TARGET = 1.3

# Sizes and lengths per mode.  Full: the seed tables' sizes and lengths.
MODES = {
    "full": dict(rounds=7, sizes=[8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
                 objs=10000, inner=5, msgs=300000, ops=3000000, idle_threads=1000,
                 mib=256, wait_ms=2000, cache_objs=10000, inproc_rounds=21,
                 churn_ops=16000000, program_rounds=3, calloc_blocks=100000,
                 **FRONTS_FULL, **DEBUG_FULL, **DEFRAG_FULL),
    "quick": dict(rounds=3, sizes=[8, 64, 256, 1024, 4096, 16384],
                  objs=10000, inner=3, msgs=100000, ops=1000000, idle_threads=1000,
                  mib=64, wait_ms=2000, cache_objs=10000, inproc_rounds=21,
                  churn_ops=6000000, program_rounds=1, calloc_blocks=100000,
                  **FRONTS_QUICK, **DEBUG_QUICK, **DEFRAG_QUICK),
    "smoke": dict(rounds=1, sizes=[64, 4096], objs=200, inner=1, msgs=2000, ops=20000,
                  idle_threads=20, mib=2, wait_ms=500, cache_objs=200, inproc_rounds=3,
                  churn_ops=32000, program_rounds=1, calloc_blocks=1000,
                  **FRONTS_SMOKE, **DEBUG_SMOKE, **DEFRAG_SMOKE),
}


def build_tests(m, ncpus):
    """The suite, for the mode parameters m."""
    tests = []

    n = m["objs"]
    alloc_free = Metric("total", "cycles per object, alloc+free", "cycles", True,
                        split=("alloc", "free"), short="cycles/object")
    pair = Metric("total", "cycles per malloc+free pair", "cycles", True, short="cycles/pair")
    peak = Metric("peak_rss_kib", "peak RSS", "MiB", True, scale=1 / 1024,
                  short="peak RSS, MiB")
    # exact, when every object is allocated: the allocator's own (anonymous)
    # memory, without the code pages that peak RSS also counts
    anon = Metric("peak_anon_kib", "anonymous memory at the peak (exact, every object allocated)",
                  "MiB", True, scale=1 / 1024, short="anon. at peak, MiB")

    def slub(key, title, seed, models, metrics):
        cases = [Case(str(s), ["--test", key, "--size", str(s), "--objs", str(n),
                               "--rounds", str(m["inner"])], s) for s in m["sizes"]]
        tests.append(Test("slub." + key, title, seed, "slub", cases, metrics, models))

    slub("batch", f"{n:,} mallocs, then {n:,} frees, one CPU",
         'single thread test 1, "Repeatedly allocate 10000 objs then free them"',
         "a burst of allocations released together (a request's buffers, a batch job)",
         [alloc_free])
    slub("pair", f"{n:,} malloc+free pairs, one CPU",
         'single thread test 2, "alloc/free test (repeatedly allocate and free)"',
         "short-lived temporaries: the fast path alone", [pair])
    slub("batch_all", f"batch on all {ncpus} CPUs at once",
         'concurrent allocs test 1 (batch "running on all CPUs")',
         "every CPU bursting at once: contention on shared state", [alloc_free])
    slub("pair_all", f"pair on all {ncpus} CPUs at once",
         "concurrent allocs test 2 (pairs on all CPUs)",
         "the fast path under concurrency", [pair])
    allocating = (f"CPU 1 allocates {n:,} objects" if ncpus == 2
                  else f"CPUs 1..{ncpus - 1} allocate {n:,} objects each")
    slub("remote", f"{allocating}, CPU 0 frees them all",
         'remote free test 1 ("Allocate N objects on CPUs 1-7, then free them all from CPU 0")',
         "objects freed by another thread than the one that allocated them", [alloc_free, peak, anon])
    slub("ring", f"every CPU allocates {n:,}; CPU i frees what CPU i-1 allocated",
         'remote free test 2 ("CPU1 frees objects allocated by CPU0")',
         "a pipeline of threads handing objects on", [alloc_free, peak, anon])

    pc_cases = prodcons_cases(m, ncpus)
    tests.append(Test(
        "prodcons", "producer/consumer: 4,696-byte buffers + 256-byte heads through queues",
        "netperf UDP_STREAM (UDP-U-4k), the kmalloc-4696/kmalloc-8192 story",
        "prodcons", pc_cases,
        [Metric("msgs_per_s", "messages per second", "million msg/s", False, scale=1e-6,
                short="M msgs/s"), peak],
        "a network stack: the sender allocates skbs, the receiver frees them"))

    counts = sorted({1, 2, ncpus, 2 * ncpus, 4 * ncpus})
    tests.append(Test(
        "scale", f"threads doing random malloc/free of 16 B..4 KiB, {m['ops']:,} ops each",
        "tbench/hackbench style scaling (seed: tbench 1..16 threads)", "threads",
        [Case(f"{t} thread{'s' if t > 1 else ''}",
              ["--mode", "scale", "--threads", str(t), "--ops", str(m["ops"])], t)
         for t in counts],
        [Metric("ops_per_s", "operations per second (all threads)", "Mop/s", False,
                scale=1e-6, short="Mops/s")],
        "a thread pool doing independent work, from 1 to 4x the CPUs"))

    nt, wait = m["idle_threads"], m["wait_ms"]
    idle_args = ["--mode", "idle", "--threads", str(nt), "--wait-ms", str(wait)]
    tests.append(Test(
        "idle", f"{nt:,} threads each malloc and free 64 blocks, then idle",
        "per-CPU/per-thread caches' memory cost (the SLAB crossbar-of-queues concern)",
        "threads",
        [Case(f"{nt:,} threads", idle_args),
         Case(f"{nt:,} threads, no malloc", idle_args + ["--objs", "0"], control=True)],
        [Metric("rss_idle_kib", "RSS added, threads alive and idle", "MiB", True,
                scale=1 / 1024, short="MiB added, idle"),
         Metric("rss_exit_kib", "RSS added, right after the threads exited", "MiB", True,
                scale=1 / 1024, short="MiB, at exit"),
         Metric("rss_later_kib", f"RSS added, {wait / 1000:g} s after the threads exited",
                "MiB", True, scale=1 / 1024, short=f"MiB, {wait / 1000:g} s later")],
        "a server with many mostly idle threads (the no-malloc row is the stacks' share)",
        parallel=True))

    gb_cases = [Case(f"{m['mib']} MiB, {t} thread{'s' if t > 1 else ''}",
                     ["--mib", str(m["mib"]), "--threads", str(t), "--wait-ms", str(wait)])
                for t in (1, ncpus)]
    tests.append(Test(
        "giveback", f"allocate {m['mib']} MiB (16 B..32 KiB blocks), free it all, stay idle",
        "SLUB's batch frees releasing slabs vs SLQB keeping them; empty_decay_ms",
        "giveback", gb_cases,
        [Metric("kept_0_pct", "resident right after the frees", "% of the working set", True,
                short="% kept, at free"),
         Metric(f"kept_{wait}_pct", f"resident after {wait / 1000:g} s idle",
                "% of the working set", True, short=f"% kept, {wait / 1000:g} s on"),
         Metric("ws_kib", "the working set, resident before the frees", "MiB", True,
                scale=1 / 1024, short="working set, MiB")],
        "a program that finishes a phase and goes quiet", parallel=True))

    co = m["cache_objs"]
    cache_args = ["--objs", str(co), "--rounds", str(m["inner"])]
    tests.append(Test(
        "cache", "512-byte objects with a constructed state (mutex, lists, buffer)",
        "kmem_cache constructors (the skb initialisation thread)", "cache",
        [Case("request pairs", ["--pattern", "pair"] + cache_args),
         Case(f"batch of {co:,}", ["--pattern", "batch"] + cache_args)],
        [Metric("cycles", "cycles per request (get, use, put)", "cycles", True,
                short="cycles/request")],
        "qslab_cache_alloc with a constructor against malloc + initialisation each time "
        "(qslab-malloc: qslab's malloc, first owner mode, for reference)",
        contenders=cache_contenders))

    # Last in the list, so that the numbers of the tables above stay as the
    # docs give them.
    tests.append(Test(
        "lastwrite", "malloc(64), a store to the block's first bytes, free; repeated",
        "(not from the 2009 thread) a free that reads the word the program has just written: "
        "a narrower store does not forward to the load (store-forwarding stall)", "inproc",
        [Case("no write", [], 0), Case("1-byte write", [], 1), Case("2-byte write", [], 2),
         Case("8-byte write", [], 8)],
        [Metric("cycles", "cycles per malloc+write+free", "cycles", True,
                short="cycles/op")],
        "the last write to an object before its free (a flag, a refcount, a list link); "
        "allocators dlopen'ed side by side in one process (bench_inproc), "
        f"{m['inproc_rounds']} interleaved rounds per process",
        inproc=["--test", "lastwrite", "--size", "64", "--write", "all",
                "--rounds", str(m["inproc_rounds"])]))

    # Appended after lastwrite, so the numbers above stay.  Every case does
    # about churn_ops operations in all: generations of T threads, per_thread each.
    per_thread = 4000
    churn_counts = sorted({ncpus, 4 * ncpus})
    tests.append(Test(
        "churn", "short-lived threads freeing each other's objects (larson-like), "
                 f"16..512 B, {per_thread:,} ops per thread",
        "Larson & Krishnan's server benchmark (simplified): each generation of threads frees "
        "what the previous, exited one allocated", "threads",
        [Case(f"{t} thread{'s' if t > 1 else ''}",
              ["--mode", "churn", "--threads", str(t), "--ops", str(per_thread),
               "--gens", str(max(1, m["churn_ops"] // (t * per_thread)))], t)
         for t in churn_counts],
        [Metric("ops_per_s", "operations per second (all generations)", "Mop/s", False,
                scale=1e-6, short="Mops/s")],
        "a server starting short-lived threads that take over and free their "
        "predecessors' objects"))
    return tests


def prodcons_cases(m, ncpus):
    """bench_prodcons's cases: Nick's table (client and server on two CPUs,
    on one), Yanmin's unbound pairs, and his batch."""
    msgs = m["msgs"]
    batch = min(10000, msgs // 10 or 1)
    cases = [
        Case("1 pair, 2 CPUs", ["--pin", "split"]),
        Case("1 pair, 1 CPU", ["--pin", "same"]),
        Case(f"{ncpus} pairs, unpinned", ["--pin", "none", "--pairs", str(ncpus)]),
        Case(f"batch of {batch:,}", ["--mode", "batch", "--pin", "split", "--batch", str(batch)]),
    ]
    for c in cases:
        c.args += ["--msgs", str(msgs)]
    return cases


def cache_contenders(allocs):
    """qslab's object-cache API (no preload) against every allocator's malloc +
    init, in each owner mode; qslab's own malloc + init (the primary mode's) is
    shown for reference (qslab-malloc)."""
    subjects = [a for a in allocs if a.subject]
    cols = [Contender(a.name, None, a.version, ["--api", "cache"], env=a.env, subject=True,
                      short=a.short) for a in subjects]
    if subjects:
        a = subjects[0]
        cols.append(Contender("qslab-malloc", a.preload, a.version, ["--api", "malloc"],
                              info=True, env=a.env))
    cols += [Contender(a.name, a.preload, a.version, ["--api", "malloc"])
             for a in allocs if not a.subject]
    return cols



# --------------------------------------------------------------------------
# Front ends: qslab's front ends (SLQB, SLUB, SLAB, SLOB) against
# each other, the seeds' argument rerun.  bench_fronts runs every front end in
# one process through the object-cache API (the slub_test patterns, a
# hackbench-like test, memory); bench_prodcons runs under the drop-in once per
# front end (QSLAB_FRONT), and for SLUB once more with the page-allocator
# pass-through.

FRONT_VAR = "QSLAB_FRONT"
FRONT_ORDER = ["slqb", "slub", "slab", "slob"]  # bench_fronts --list's order
FRONT_PATTERNS = ["batch", "pair", "batch_all", "pair_all", "remote", "ring"]
FRONT_MEMORY_TESTS = ["batch", "batch_all", "remote", "ring", "hackbench"]
PASS_THROUGH = "slub+pt"  # the prodcons column: SLUB with pass_through=1 above 4 KiB


def kmalloc_class_sizes():
    """The kmalloc-<bytes> classes, as src/api/kmalloc.c's class_size(): 8, then
    16 bytes apart up to 128, then eight per power of two up to 32 MiB,
    thirty-two from 1 to 2 KiB and sixteen from 2 to 8 KiB."""
    sizes = [8, 16, 32, 48, 64, 80, 96, 112, 128]
    p = 128
    while p < 32 << 20:
        n = 32 if 1024 <= p < 2048 else 16 if 2048 <= p < 8192 else 8
        sizes += [p + e * (p // n) for e in range(1, n + 1)]
        p *= 2
    return sizes


def pass_through_tune():
    """QSLAB_TUNE entries setting pass_through=1 on the kmalloc caches above
    4 KiB (the tunable's name and scope: SLUB's, docs/fronts.md)."""
    return ";".join(f"kmalloc-{b}:pass_through=1" for b in kmalloc_class_sizes() if b > 4096)


def tune_refusals(stderr):
    """qslab's lines refusing or ignoring a tunable (tune.c's messages)."""
    return [l for l in stderr.splitlines()
            if "QSLAB_TUNE" in l or "refused" in l or "unknown attribute" in l]


def discover_fronts(bin_dir):
    """(front ends bench_fronts finds in this build, or None; why not)."""
    exe = os.path.join(bin_dir, "bench_fronts")
    try:
        r = subprocess.run([exe, "--list"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{exe}: {e}"
    names = [l.strip() for l in r.stdout.splitlines() if l.strip()]
    if r.returncode != 0 or not names:
        return None, f"{exe} --list: exit {r.returncode}, {(r.stderr.strip().splitlines() or [''])[-1]}"
    return names, ""


def probe_pass_through(bin_dir, qslab_lib, env):
    """Is the pass-through tune accepted?  A tiny bench_prodcons run under
    the drop-in with `env`; (True, "") or (False, qslab's first complaint)."""
    full = dict(os.environ)
    full.pop("LD_PRELOAD", None)
    full.update({k: v for k, v in env.items() if v is not None})
    full["LD_PRELOAD"] = qslab_lib
    cmd = [os.path.join(bin_dir, "bench_prodcons"), "--msgs", "1000", "--pin", "none"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return False, str(e)
    bad = tune_refusals(r.stderr)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        return False, bad[0].strip() + more
    if r.returncode != 0:
        return False, f"exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}"
    return True, ""


class SharedRun:
    """One process per round whose result lines feed several tests:
    bench_fronts prints a line per (test, front end, size), for every
    pattern's table, hackbench's and the memory table.  The first of its
    tests to run in a round starts the process; the others find their
    samples there.  The front ends take turns at going first, round by round
    (the first one pays for what the lower layers keep at their high-water
    mark, spare chunk headers mostly)."""

    names_option = "--fronts"  # the driver's option listing the columns, in order

    def __init__(self, key, driver, args, fronts, env):
        self.key = key          # for the header's time per section
        self.driver = driver
        self.args = args        # driver arguments, --tests and --fronts added per round
        self.fronts = fronts
        self.env = env          # name -> value (None: unset)
        self.members = []       # the tests it feeds (after --only)
        self.round = None       # the round it last ran in
        self.mem_labels = {}    # (test, size) -> row of the memory table

    def environ(self):
        return run_env(self.env)

    def wanted(self):
        """bench_fronts's tests for the member tests."""
        names = set()
        for t in self.members:
            name = t.key.split(".", 1)[1]
            names.update(FRONT_MEMORY_TESTS if name == "memory" else [name])
        return [n for n in FRONT_PATTERNS + ["hackbench"] if n in names]

    def run(self, bin_dir, r, timeout, samples, errors):
        self.round = r
        k = r % len(self.fronts)
        order = self.fronts[k:] + self.fronts[:k]
        cmd = ([os.path.join(bin_dir, "bench_" + self.driver)] + self.args
               + ["--tests", ",".join(self.wanted()), self.names_option, ",".join(order)])
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=self.environ(),
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            errors.append(f"{self.key}: timed out after {timeout} s: {' '.join(cmd)}")
            return
        except OSError as e:
            errors.append(f"{self.key}: {e}")
            return
        LOG.run(cmd, self.environ(), time.time() - t0, p.stdout, p.stderr, p.returncode)
        if p.returncode != 0:
            errors.append(f"{self.key}: " + exit_error(p.returncode, p.stderr, cmd))
            return
        got = {}
        try:
            for line in p.stdout.splitlines():
                if line.startswith("result "):
                    self.parse(line, got)
        except (RunError, KeyError, ValueError) as e:
            errors.append(f"{self.key}: bad result line ({e}): {' '.join(cmd)}")
            return
        for t in self.members:
            for case in t.cases:
                for front in self.fronts:
                    res = got.get((t.key, case.label, front))
                    missing = [k for m in t.metrics for k in (m.key,) + tuple(m.split or ())
                               if res is not None and k not in res]
                    if res is None or missing:
                        errors.append(f"{t.key} [{case.label}] {front}: "
                                      + (f"no {missing[0]}= in the result line" if res
                                         else "no result line") + f": {' '.join(cmd)}")
                        continue
                    samples.setdefault((t.key, case.label, front), []).append(res)

    def parse(self, line, got):
        """One "result test=T front=F [size=S] key=value ..." line into got."""
        test, front, nums = result_words(line, "test", "front")
        if test == "front":  # the front end's whole run
            nums["anon_after_kib"] = nums["anon_kept_kib"]
            got[("fronts.memory", "whole run", front)] = nums
            return
        size = int(nums["size"])
        got[(f"fronts.{test}", str(size), front)] = nums
        label = self.mem_labels.get((test, size))
        if label:
            got[("fronts.memory", label, front)] = nums


def front_contenders(fronts, version, env):
    """bench_fronts's columns: one per front end (the process runs them all);
    the first is the one the others are compared with."""
    return [Contender(f, None, version, env=env, subject=True, short=f) for f in fronts]


def build_front_tests(m, ncpus, fronts, version, qslab_lib, owner_env, pt_env):
    """The front-end comparison's tables.  fronts: the front ends found;
    pt_env: the environment of the pass-through column, or None."""
    n = m["objs"]
    sizes = m["front_sizes"]
    patterns = [p for p in FRONT_PATTERNS if ncpus >= 2 or p not in ("remote", "ring")]
    args = ["--sizes", ",".join(map(str, sizes)), "--objs", str(n), "--rounds", str(m["inner"]),
            "--groups", str(m["hb_groups"]), "--senders", str(m["hb_senders"]),
            "--receivers", str(m["hb_receivers"]), "--loops", str(m["hb_loops"]),
            "--hb-rounds", str(m["hb_rounds"])]
    shared = SharedRun("fronts", "fronts", args, fronts, owner_env)
    cols = lambda allocs: front_contenders(fronts, version, owner_env)
    tests = []

    alloc_free = Metric("total", "cycles per object, alloc+free", "cycles", True,
                        split=("alloc", "free"))
    pair = Metric("total", "cycles per alloc+free pair", "cycles", True)
    seeds = {
        "batch": (f"{n:,} allocs, then {n:,} frees, one CPU",
                  'single thread test 1, "Repeatedly allocate 10000 objs then free them"',
                  "a burst of allocations released together", alloc_free),
        "pair": (f"{n:,} alloc+free pairs, one CPU",
                 'single thread test 2, "alloc/free test" (SLQB: a flat 90 cycles)',
                 "short-lived temporaries: the fast path alone", pair),
        "batch_all": (f"batch on all {ncpus} CPUs at once",
                      'concurrent allocs test 1 (batch "running on all CPUs")',
                      "every CPU bursting at once: contention on shared state", alloc_free),
        "pair_all": (f"pair on all {ncpus} CPUs at once", "concurrent allocs test 2",
                     "the fast path under concurrency", pair),
        "remote": ((f"CPU 1 allocates {n:,} objects" if ncpus == 2
                    else f"CPUs 1..{ncpus - 1} allocate {n:,} objects each")
                   + ", CPU 0 frees them all",
                   'remote free test 1 ("Allocate N objects on CPUs 1-7, then free them all '
                   'from CPU 0")', "objects freed by another CPU than the one that allocated "
                   "them", alloc_free),
        "ring": (f"every CPU allocates {n:,}; CPU i frees what CPU i-1 allocated",
                 'remote free test 2 ("CPU1 frees objects allocated by CPU0")',
                 "a pipeline of CPUs handing objects on", alloc_free),
    }
    for p in patterns:
        title, seed, models, metric = seeds[p]
        tests.append(Test(
            "fronts." + p, f"front ends, {title} (object cache API)", "slub_test " + seed,
            "fronts", [Case(str(s), [], s) for s in sizes], [metric],
            models + "; every front end in one process (bench_fronts), its own cache per size",
            contenders=cols, section="fronts", shared=shared, row_title="size"))

    g, snd, rcv, loops = m["hb_groups"], m["hb_senders"], m["hb_receivers"], m["hb_loops"]
    msgs = g * snd * rcv * loops
    tests.append(Test(
        "fronts.hackbench",
        f"front ends, hackbench-like: {g} group{'s' if g > 1 else ''} of {snd} senders and "
        f"{rcv} receivers "
        f"(threads) over pipes, {msgs:,} messages",
        "hackbench (seeds: hackbench and tbench runs of the SLAB/SLUB/SLQB thread)", "fronts",
        [Case(str(s), [], s) for s in sizes],
        [Metric("msgs_per_s", "messages per second", "million msg/s", False, scale=1e-6),
         Metric("secs", "wall time per run", "ms", True, scale=1000)],
        "a sender allocates each message (a 256-byte head and a data buffer of the row's "
        "size) and writes the pointers to a receiver's pipe; the receiver checks and frees "
        "both, as skbs", contenders=cols, section="fronts", shared=shared, row_title="data size"))

    live = {"batch": 1, "batch_all": ncpus, "remote": ncpus - 1, "ring": ncpus}
    mem_cases = []
    for t in FRONT_MEMORY_TESTS:
        if t in ("remote", "ring") and ncpus < 2:
            continue
        for sz in sizes:
            label = (f"{t} {sz}: {live[t] * n * sz / 1024:,.0f} KiB live" if t in live
                     else f"{t} {sz}")
            shared.mem_labels[(t, sz)] = label
            mem_cases.append(Case(label, []))
    mem_cases.append(Case("whole run", []))
    tests.append(Test(
        "fronts.memory", "front ends, anonymous memory: at the peak / after the frees and "
                         "qslab_cache_shrink",
        "memory at the peak and after (SLOB's footprint; SLQB's and SLAB's queues; SLUB's "
        "partial slabs)", "fronts", mem_cases,
        [Metric("anon_peak_kib", "anonymous memory added", "KiB", True,
                split=("anon_peak_kib", "anon_after_kib"), sep="/",
                split_desc="peak / after, KiB over the test's start (ratios: of the peaks)")],
        "peak sampled when every object of a round is allocated (hackbench: statm every 5 ms "
        "while it runs); 'live' is objects x size at that moment; 'whole run': each front "
        "end's peak over all its tests / what it kept once its caches were destroyed, over "
        "the process before it started",
        contenders=cols, section="fronts", shared=shared))

    fcols = [Contender(f, qslab_lib, version, env={**owner_env, FRONT_VAR: f}, subject=True,
                       short=f) for f in fronts]
    if pt_env is not None:
        fcols.append(Contender(PASS_THROUGH, qslab_lib, version, env={**owner_env, **pt_env},
                               subject=True, short=PASS_THROUGH))
    tests.append(Test(
        "fronts.prodcons",
        "front ends, producer/consumer: 4,696-byte buffers + 256-byte heads through queues "
        "(malloc, the drop-in)",
        "netperf UDP_STREAM (UDP-U-4k): SLUB passing 4,696-byte kmallocs to the page "
        "allocator vs SLQB", "prodcons", prodcons_cases(dict(m, msgs=m["front_msgs"]), ncpus),
        [Metric("msgs_per_s", "messages per second", "million msg/s", False, scale=1e-6),
         Metric("peak_rss_kib", "peak RSS", "MiB", True, scale=1 / 1024)],
        f"a network stack, malloc'ed skbs: {FRONT_VAR}=<front> for every kmalloc cache"
        + (f"; {PASS_THROUGH}: SLUB with pass_through=1 on the kmalloc caches above 4 KiB "
           "(QSLAB_TUNE)" if pt_env is not None else ""),
        contenders=lambda allocs: fcols, section="fronts"))
    return tests


# --------------------------------------------------------------------------
# Running

class RunError(Exception):
    pass


def parse_result(text):
    """The numbers of the driver's "result key=value ..." line."""
    for line in text.splitlines():
        if line.startswith("result "):
            out = {}
            for tok in line.split()[1:]:
                key, sep, value = tok.partition("=")
                if not sep:
                    raise RunError(f"bad token {tok!r} in {line!r}")
                try:
                    out[key] = float(value)
                except ValueError:
                    raise RunError(f"bad number in {tok!r}")
                if not math.isfinite(out[key]):
                    raise RunError(f"not a finite number: {tok!r}")
            return out
    raise RunError("no result line")


def result_words(line, *names):
    """A "result name=word ... key=number ..." line of a driver that prints
    several: the words of `names` (KeyError if one is missing), then a dict
    of the other keys' numbers."""
    fields = dict(tok.partition("=")[::2] for tok in line.split()[1:])
    words = [fields.pop(n) for n in names]
    nums = {}
    for key, value in fields.items():
        nums[key] = float(value)
        if not math.isfinite(nums[key]):
            raise RunError(f"not a finite number: {key}={value}")
    return words + [nums]


def exit_error(returncode, stderr, cmd):
    """What a driver's failed run says: its exit status, its last line on
    stderr, its command."""
    msg = (stderr.strip().splitlines() or [""])[-1]
    return f"exit {returncode} ({msg}): {' '.join(cmd)}"


def start(bin_dir, test, case, cont):
    exe = os.path.join(bin_dir, "bench_" + test.driver)
    cmd = [exe] + case.args + cont.extra_args
    env = cont.environ()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    proc.qslab_t0, proc.qslab_env = time.time(), env  # for the log
    return cmd, proc


def finish(cmd, proc, test, timeout):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        LOG.write(f"timed out after {timeout} s: {' '.join(cmd)}")
        raise RunError(f"timed out after {timeout} s: {' '.join(cmd)}")
    LOG.run(cmd, proc.qslab_env, time.time() - proc.qslab_t0, out, err, proc.returncode)
    if proc.returncode != 0:
        raise RunError(exit_error(proc.returncode, err, cmd))
    result = parse_result(out)
    for m in test.metrics:
        keys = m.split or ()
        for key in (m.key,) + tuple(keys):
            if key not in result:
                raise RunError(f"no {key}= in the result line: {' '.join(cmd)}")
    return result


def fmt_secs(s):
    """Seconds as m:ss (or h:mm:ss)."""
    s = int(round(max(s, 0)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Log:
    """The run's log file (log.txt in --out): every command run, its time and
    its result lines, the progress lines, the errors.  Off until opened."""

    def __init__(self):
        self.f, self.t0 = None, time.time()

    def open(self, path):
        self.f, self.t0 = open(path, "w"), time.time()

    def write(self, text):
        if self.f:
            self.f.write(f"[{time.time() - self.t0:7.1f} s] {text}\n")
            self.f.flush()

    def run(self, cmd, env, secs, stdout, stderr, status):
        """A process the runner ran: its command and the variables it set,
        its time, exit status, result lines and the end of its stderr."""
        if not self.f:
            return
        sets = " ".join(f"{k}={v}" for k, v in sorted(env.items())
                        if (k == "LD_PRELOAD" or k.startswith("QSLAB_")) and os.environ.get(k) != v)
        self.write(f"run {sets + ' ' if sets else ''}{' '.join(cmd)}: exit {status}, {secs:.2f} s")
        for line in (stdout or "").splitlines():
            if line.startswith("result "):
                self.f.write(f"    {line}\n")
        err = (stderr or "").strip().splitlines()
        for line in err[-5:]:
            self.f.write(f"    stderr: {line}\n")


LOG = Log()


class Progress:
    """A line per step (one test's round: each case under each allocator, or
    one shared process) on stderr and in the log, with the time elapsed and an
    estimate of the time left; on a terminal, the run in progress on a line of
    its own, rewritten.  The estimate of a step: this run's mean seconds per
    run of the same step in the rounds done, else the last run's in the same
    mode (timings.json in --out), else this run's mean over every run so far."""

    def __init__(self, plan, rounds, prior):
        self.plan = plan                  # [(round, key, tests, runs)]
        self.rounds = rounds
        self.prior = prior                # key -> seconds per run, from the last run
        self.per_run = {}                 # key -> [seconds, runs] measured in this run
        self.done_runs, self.done_secs = 0, 0.0
        self.t0 = time.time()
        self.i, self.step_t0, self.step_runs = -1, self.t0, 0
        self.tty = sys.stderr.isatty()

    def guess(self, key, runs):
        if key in self.per_run:
            s, n = self.per_run[key]
            return s / n * runs
        if key in self.prior:
            return self.prior[key] * runs
        if self.done_runs:
            return self.done_secs / self.done_runs * runs
        return None

    def left(self):
        """Seconds left, or None when nothing is known yet."""
        total = 0.0
        for r, key, _, runs in self.plan[self.i + 1:]:
            g = self.guess(key, runs)
            if g is None:
                return None
            total += g
        if self.step_t0 is not None and 0 <= self.i < len(self.plan):
            g = self.guess(self.plan[self.i][1], self.plan[self.i][3])
            if g is None:
                return None
            total += max(g - (time.time() - self.step_t0), 0)
        return total

    def status(self):
        left = self.left()
        return (f"[{self.i + 1:>{len(str(len(self.plan)))}}/{len(self.plan)}] "
                f"{fmt_secs(time.time() - self.t0)} elapsed, "
                + (f"about {fmt_secs(left)} left" if left is not None else "time left unknown"))

    def begin(self, i):
        self.i, self.step_t0, self.step_runs = i, time.time(), 0

    def step(self, what, n=1):
        """`what` starts; n runs of the step's count are done with it."""
        self.step_runs += n
        if self.tty:
            r, key = self.plan[self.i][:2]
            sys.stderr.write(f"\r\033[K{self.status()} | round {r + 1}/{self.rounds} {what}"[:150])
            sys.stderr.flush()

    def end(self):
        """The step is done: its line."""
        r, key, _, runs = self.plan[self.i]
        secs = time.time() - self.step_t0
        s, n = self.per_run.get(key, (0.0, 0))
        self.per_run[key] = (s + secs, n + runs)
        self.done_secs += secs
        self.done_runs += runs
        self.step_t0 = None  # no step in progress: the estimate counts from the next one
        self.line(f"{self.status()} | round {r + 1}/{self.rounds} {key}: {runs} run{'s' if runs > 1 else ''}"
                  f" in {secs:.0f} s")

    def line(self, text):
        if self.tty:
            sys.stderr.write("\r\033[K")
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        LOG.write(text)

    def finish(self):
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def inproc_cmd(bin_dir, test, order):
    """bench_inproc with every contender of `order`, and its environment:
    the variables any contender sets are unset, then set per contender by
    bench_inproc (--env) while it loads that allocator."""
    cmd = [os.path.join(bin_dir, "bench_inproc")] + test.inproc + ["--result"]
    env = run_env({k: None for c in order for k in c.env})
    for c in order:
        cmd += ["--name", c.name]
        for k, v in c.env.items():
            if v is not None:
                cmd += ["--env", f"{k}={v}"]
        cmd.append(c.preload or "glibc")
    return cmd, env


def run_inproc(bin_dir, test, order, timeout):
    """{(case label, contender name): result} from one bench_inproc process;
    and the contenders it skipped, with its reason."""
    cmd, env = inproc_cmd(bin_dir, test, order)
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(f"timed out after {timeout} s: {' '.join(cmd)}")
    LOG.run(cmd, env, time.time() - t0, r.stdout, r.stderr, r.returncode)
    if r.returncode != 0:
        raise RunError(exit_error(r.returncode, r.stderr, cmd))
    by_x = {c.x: c for c in test.cases}
    got = {}
    for line in r.stdout.splitlines():
        if not line.startswith("result "):
            continue
        fields = dict(tok.partition("=")[::2] for tok in line.split()[1:])
        try:
            case = by_x[int(fields.pop("write"))]
            name = fields.pop("name")
            got[(case.label, name)] = {k: float(v) for k, v in fields.items()}
        except (KeyError, ValueError):
            raise RunError(f"bad result line {line!r}: {' '.join(cmd)}")
        if "median" not in got[(case.label, name)]:
            raise RunError(f"no median= in {line!r}")
    skipped = [f"{c.name}: {next((l for l in r.stderr.splitlines() if c.name in l), 'no result')}"
               for c in order if not any(n == c.name for _, n in got)]
    return got, skipped


def step_key(test):
    """The progress step a test's round belongs to: the tests one process
    feeds (bench_fronts, bench_debug) make one step."""
    return test.shared.key if test.shared else test.key


def run_plan(tests, columns, rounds):
    """[(round, step key, tests, runs)] in the order they run; a step of no
    runs (a program past its rounds) is left out."""
    plan = []
    for r in range(rounds):
        for test in tests:
            n = len(test.cases) * sum(1 for c in columns[test.key]
                                      if c.rounds is None or r < c.rounds)
            if not n:
                continue
            key = step_key(test)
            if plan and plan[-1][0] == r and plan[-1][1] == key:
                plan[-1][2].append(test)
                plan[-1][3] += n
            else:
                plan.append([r, key, [test], n])
    return plan


def run_suite(tests, allocs, rounds, bin_dir, timeout, prior):
    """samples[(test, case label, contender)] = [result dict per round];
    seconds[test] = the time its runs took; per_run[step key] = seconds per
    run (for the next run's estimates)."""
    columns = {t.key: (t.contenders(allocs) if t.contenders else allocs) for t in tests}
    plan = run_plan(tests, columns, rounds)
    progress = Progress(plan, rounds, prior)
    samples, errors, seconds = {}, [], {}
    for i, (r, _, step_tests, _) in enumerate(plan):
        progress.begin(i)
        for test in step_tests:
            t0 = time.time()
            run_test_round(test, columns[test.key], r, bin_dir, timeout, samples, errors,
                           progress)
            key = (test.shared.key if test.shared else
                   test.section if test.section == "programs" else test.key)
            seconds[key] = seconds.get(key, 0) + time.time() - t0
        progress.end()
    progress.finish()
    per_run = {k: s / n for k, (s, n) in progress.per_run.items() if n}
    return columns, samples, errors, seconds, per_run


def run_test_round(test, cols, r, bin_dir, timeout, samples, errors, progress):
    """Round r of one test: every case under every contender."""
    if test.shared:  # one process for this test and the others it feeds
        if test.shared.round != r:
            progress.step(f"{test.shared.key} (in one process)", 0)
            test.shared.run(bin_dir, r, timeout, samples, errors)
        progress.step(test.key, len(test.cases) * len(cols))
        return
    if test.inproc:  # one process: every case, every contender
        k = r % len(cols)
        progress.step(f"{test.key} (in one process)", len(test.cases) * len(cols))
        try:
            got, skipped = run_inproc(bin_dir, test, cols[k:] + cols[:k], timeout)
            for (label, name), res in got.items():
                samples.setdefault((test.key, label, name), []).append(
                    {test.metrics[0].key: res["median"], **res})
            errors.extend(f"{test.key}: skipped {s}" for s in skipped)
        except (RunError, OSError) as e:
            errors.append(f"{test.key}: {e}")
        return
    for ci, case in enumerate(test.cases):
        k = (r + ci) % len(cols)
        order = [c for c in cols[k:] + cols[:k] if c.rounds is None or r < c.rounds]
        if test.program:
            run_program_round(test, case, order, r, timeout, samples, errors, progress)
            continue
        # Memory tests that mostly sleep run their allocators at once.
        procs = [start(bin_dir, test, case, c) for c in order] if test.parallel else None
        for i, c in enumerate(order):
            progress.step(f"{test.key} {case.label} {c.name}")
            try:
                cmd, proc = procs[i] if procs else start(bin_dir, test, case, c)
                res = finish(cmd, proc, test, timeout)
                samples.setdefault((test.key, case.label, c.name), []).append(res)
            except (RunError, OSError) as e:
                errors.append(f"{test.key} [{case.label}] {c.name}: {e}")


# --------------------------------------------------------------------------
# Numbers

class Cell:
    """Median and spread of one metric for one (case, contender)."""

    def __init__(self, values, split=None, sep="+"):
        self.values = values
        self.median = statistics.median(values)
        lo, hi = min(values), max(values)
        self.spread = abs((hi - lo) / 2 / self.median) if self.median else 0.0
        self.split = split  # (median a, median b) for a+b cells
        self.sep = sep


def cell(samples, test, case, cont, metric):
    runs = samples.get((test.key, case.label, cont.name))
    if not runs:
        return None
    vals = [r[metric.key] * metric.scale for r in runs]
    split = None
    if metric.split:
        split = tuple(statistics.median(r[k] * metric.scale for r in runs) for k in metric.split)
    return Cell(vals, split, metric.sep)


def ratio(a, b):
    if a is None or b is None or not b.median:
        return None
    return a.median / b.median


def fmt_num(v):
    a = abs(v)
    if a >= 1e7:
        return f"{v / 1e6:.1f}M"
    if a >= 1e5:
        return f"{v / 1e6:.2f}M"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_cell(c):
    if c is None:
        return "-"
    if c.split:
        return f"{c.split[0]:.0f}{c.sep}{c.split[1]:.0f}"
    return fmt_num(c.median)


def is_peer(c):
    return not c.subject and not c.info


def best_peer(cells, cols, metric):
    """(contender, cell) of the best peer in a row, or (None, None)."""
    peers = [(c, x) for c, x in zip(cols, cells) if x is not None and is_peer(c)]
    if not peers:
        return None, None
    pick = min if metric.lower_is_better else max
    return pick(peers, key=lambda p: p[1].median)


def against_best(samples, test, cols, metric, case_filter=lambda c: True, subject=0):
    """(case, qslab/best ratio, best peer) for every measured case of a test;
    qslab is column `subject` (default: the primary one)."""
    for case in test.cases:
        if case.control or not case_filter(case):
            continue
        row = [cell(samples, test, case, c, metric) for c in cols]
        peer, best = best_peer(row, cols, metric)
        if row[subject] is None or best is None:
            continue
        yield case, ratio(row[subject], best), peer


def table(test, metric, cols, samples, number):
    """Lines of one table."""
    name_w = max([len(c.label) for c in test.cases] + [len(test_col_title(test))])
    cells_by_case = [[cell(samples, test, case, c, metric) for c in cols] for case in test.cases]
    texts = [[fmt_cell(x) for x in row] for row in cells_by_case]
    ws = [max([len(c.name), 6] + [len(row[i]) for row in texts]) for i, c in enumerate(cols)]
    # ratio columns: q (the first column, the primary owner mode) to every
    # other non-qslab column, then every further owner mode to the primary
    q = cols[0]
    rcols = [i for i, c in enumerate(cols[1:], 1) if not c.subject]
    rcols += [i for i, c in enumerate(cols[1:], 1) if c.subject]
    rnames = [f"{cols[i].short}/{q.short}" if cols[i].subject else f"q/{cols[i].name}"
              for i in rcols]
    rws = [max(5, len(n)) for n in rnames]  # ratio column widths

    lines = [f"{number} {test.title}",
             f"   {metric.describe()}"
             + (f"; cells: {metric.split_desc}" if metric.split else ""),
             f"   models: {test.models}",
             f"   reproduces: {test.seed}"]
    head = f"{test_col_title(test):>{name_w}} | " + " ".join(
        f"{c.name:>{w}}" for c, w in zip(cols, ws))
    if len(cols) > 1:
        head += " | " + " ".join(f"{n:>{rw}}" for n, rw in zip(rnames, rws))
    head += " | spread"
    lines += [head, "-" * len(head)]
    for case, row, txt in zip(test.cases, cells_by_case, texts):
        line = f"{case.label:>{name_w}} | " + " ".join(f"{t:>{w}}" for t, w in zip(txt, ws))
        if len(cols) > 1:
            rs = [ratio(row[i], row[0]) if cols[i].subject else ratio(row[0], row[i])
                  for i in rcols]
            line += " | " + " ".join(f"{r:>{rw}.2f}" if r is not None else f"{'-':>{rw}}"
                                     for r, rw in zip(rs, rws))
        spreads = [x.spread for x in row if x is not None]
        line += f" | ±{max(spreads) * 100:.0f}%" if spreads else " |"
        lines.append(line)
    return lines


def test_col_title(test):
    return test.row_title


TIE = 0.05  # within 5% of the best peer counts as a tie in the summary


def summary(tests, columns, samples, subject=0):
    """Per table: where qslab (the column `subject` of each table: the primary
    one, or another owner mode) is best, tied, behind, from the medians."""
    names = sorted({columns[t.key][subject].name for t in tests
                    if len(columns[t.key]) > subject and columns[t.key][subject].subject})
    if not names:
        return []
    lines = [f"Summary: {' / '.join(names)} against the best peer of each row "
             f"(ratio qslab/best; within ±{TIE * 100:.0f}% is a tie)"]
    for test in tests:
        cols = columns[test.key]
        if len(cols) <= subject or not cols[subject].subject:
            continue
        for metric in test.metrics:
            wins, ties, losses, logs = [], [], [], []
            for case, r, peer in against_best(samples, test, cols, metric, subject=subject):
                gain = (1 / r) if metric.lower_is_better else r  # > 1: qslab better
                logs.append(math.log(r))
                item = f"{case.label} ({r:.2f} vs {peer.name})"
                if gain > 1 + TIE:
                    wins.append(item)
                elif gain < 1 - TIE:
                    losses.append(item)
                else:
                    ties.append(item)
            if not logs:
                continue
            g = math.exp(sum(logs) / len(logs))  # geometric mean of qslab/best
            lines.append(f"  {test.key:<14} {metric.title}: qslab best in "
                         f"{len(wins)}/{len(logs)}, tied {len(ties)}, behind {len(losses)}; "
                         f"geomean qslab/best {g:.2f} ({metric.better()})")
            if losses:
                lines += wrap("behind at: " + ", ".join(losses), 18)
    return lines


def wrap(text, indent, width=110):
    return textwrap.wrap(text, width=width, initial_indent=" " * indent,
                         subsequent_indent=" " * (indent + 2))


# Memory readings move by a few pages from run to run: a memory target counts
# as met within this share of the best peer.  Speed targets have no tolerance.
MEMORY_TOLERANCE = 0.01


class Target:
    """A target's verdict, for the summary table: the row it belongs to
    (tag: "test key/metric key", or a name of the programs section), how many
    of `what` met it, and the missed case farthest from it (worst)."""

    def __init__(self, tag, desc, ok, miss, what, worst=None):
        self.tag, self.desc, self.ok, self.miss, self.what = tag, desc, ok, miss, what
        self.worst = worst

    def short(self):
        """met, or MISSED with how many met it and the worst miss."""
        if not self.miss:
            return "met"
        if not self.what:  # one figure, no cases
            return f"MISSED: {self.worst}"
        n = len(self.ok) + len(self.miss)
        return f"MISSED at {len(self.miss)}/{n}" + (f", worst {self.worst}" if self.worst else "")


def combined(targets):
    """One verdict for a row several targets judge."""
    missed = [t.short() for t in targets if t.miss]
    if not missed:
        return "met"
    return "; ".join(m if i == 0 else m.replace("MISSED: ", "").replace("MISSED ", "")
                     for i, m in enumerate(missed))


def target_lines(lines, desc, ok, miss, what, found=None, tag=None, worst=None):
    """A target's lines of the report: met or MISSED, how many of `what`
    met it, and where it was missed; its Target into `found`."""
    status = "met   " if not miss else "MISSED"
    lines.append(f"  {status} {desc}: {len(ok)}/{len(ok) + len(miss)} {what}")
    if miss:
        lines.extend(wrap("missed at: " + ", ".join(miss), 9))
    if found is not None:
        found.append(Target(tag, desc, ok, miss, what, worst))


def targets(tests, columns, samples, found=None):
    """The suite's targets, measured and reported, never asserted."""
    by_key = {t.key: t for t in tests}
    primary = sorted({columns[t.key][0].name for t in tests})
    lines = [f"Targets for {' / '.join(primary)} (from the benchmark issue; medians, strict for "
             f"speed, within {MEMORY_TOLERANCE * 100:.0f}% for memory)"]

    def check(desc, key, metric_key, limit, what, case_filter=lambda c: True):
        """limit: the highest qslab/best ratio that meets the target (for a
        higher-is-better metric, the lowest)."""
        test = by_key.get(key)
        metric = next((m for m in test.metrics if m.key == metric_key), None) if test else None
        if metric is None:
            return
        cols = columns[key]
        ok, miss, far = [], [], []
        for case, r, peer in against_best(samples, test, cols, metric, case_filter):
            met = r <= limit if metric.lower_is_better else r >= limit
            (ok if met else miss).append(f"{case.label} ({r:.2f} vs {peer.name})")
            if not met:
                far.append((r if metric.lower_is_better else -r,
                            f"{case.label}{' B' if test.row_title == 'size' else ''} "
                            f"{r:.2f}x {peer.name}"))
        if not ok and not miss:
            return
        target_lines(lines, desc, ok, miss, what, found, f"{key}/{metric_key}",
                     max(far)[1] if far else None)

    mem = 1 + MEMORY_TOLERANCE
    from_256 = lambda c: c.x is not None and c.x >= 256
    check("alloc/free pairs within 10% of the fastest peer", "slub.pair", "total", 1.10, "sizes")
    check("10,000-object batches faster than every peer from 256 B up", "slub.batch", "total",
          1.0, "sizes", from_256)
    check("remote free at least as fast as the fastest peer", "slub.remote", "total", 1.0,
          "sizes")
    check("remote free peak RSS no larger than the smallest peer's", "slub.remote",
          "peak_rss_kib", mem, "sizes")
    check("ring at least as fast as the fastest peer", "slub.ring", "total", 1.0, "sizes")
    check("ring peak RSS no larger than the smallest peer's", "slub.ring", "peak_rss_kib", mem,
          "sizes")
    check("producer/consumer at least as fast as the fastest peer", "prodcons", "msgs_per_s",
          1.0, "cases")
    check("producer/consumer peak RSS no larger than the smallest peer's", "prodcons",
          "peak_rss_kib", mem, "cases")
    gb = by_key.get("giveback")
    for m in (gb.metrics[:2] if gb else []):
        check("memory given back at least as completely as the best peer "
              f"({m.title.replace('resident ', '')})", "giveback", m.key, mem, "cases")
    return lines


# --------------------------------------------------------------------------
# The summary table: what the terminal shows at the end, at most about 40
# lines (the whole report goes to report.txt).

SUMMARY_WIDTH = 130


def gmean_or_mean(values):
    """Geometric mean of positive values; the arithmetic mean when one is 0
    or less (a share of memory kept can be 0)."""
    if not values:
        return None
    if all(v > 0 for v in values):
        return geomean(values)
    return sum(values) / len(values)


def row_figures(samples, test, cols, metric, subject, other):
    """(qslab's figure, other's figure, ratio) over the cases both have:
    the geometric means of the medians, and their ratio."""
    a, b = [], []
    for case in test.cases:
        if case.control:
            continue
        x = cell(samples, test, case, subject, metric)
        y = cell(samples, test, case, other, metric)
        if x is not None and y is not None:
            a.append(x.median)
            b.append(y.median)
    fa, fb = gmean_or_mean(a), gmean_or_mean(b)
    if fa is None or fb is None:
        return None
    return fa, fb, (fa / fb if fb else None)


def verdict(ratio, lower_is_better):
    """Against the best peer, for a row without a target."""
    if ratio is None:
        return "-"
    gain = 1 / ratio if lower_is_better and ratio else ratio
    return "ahead" if gain > 1 + TIE else "behind" if gain < 1 - TIE else "tie"


def summary_rows(tests, columns, samples, found):
    """Rows (benchmark, measure, qslab, best peer, ratio, thread/cpu, target)
    of the tests against the peers."""
    by_tag = {}
    for t in found:
        by_tag.setdefault(t.tag, []).append(t)
    rows = []
    for test in tests:
        cols = columns[test.key]
        q = cols[0]
        peers = [c for c in cols if is_peer(c)]
        other = next((c for c in cols[1:] if c.subject), None)
        for metric in test.metrics:
            best = None
            for p in peers:
                f = row_figures(samples, test, cols, metric, q, p)
                if f is None or f[2] is None:
                    continue
                worse = f[2] if metric.lower_is_better else -f[2]
                if best is None or worse > best[0]:
                    best = (worse, p, f)
            arrow = "↓" if metric.lower_is_better else "↑"
            measure = f"{metric.short or metric.title} {arrow}"
            if best is None:
                continue
            _, p, (fq, fp, r) = best
            tr = row_figures(samples, test, cols, metric, other, q) if other else None
            tgt = by_tag.get(f"{test.key}/{metric.key}")
            rows.append((test.key, measure, fmt_num(fq), f"{fmt_num(fp)} {p.name}",
                         f"{r:.2f}", f"{tr[2]:.2f}" if tr and tr[2] else "-",
                         combined(tgt) if tgt else verdict(r, metric.lower_is_better)))
    return rows


def program_summary_rows(tests, columns, samples, found):
    """Rows of the programs section: peak RSS and wall time against the
    best peer, the front ends' peak RSS against their references, calloc."""
    by_tag = {t.tag: t for t in found}
    ptests = [t for t in tests if t.program]
    rows = []
    if ptests:
        cols = columns[ptests[0].key]
        q = cols[0]
        peers = [c for c in cols if is_peer(c)]

        def figure(metric, c):
            cells = program_cells(ptests, cols, samples, metric)
            return gmean_or_mean([cells[(t.key, c.name)].median for t in ptests
                                  if (t.key, c.name) in cells])

        n = len(ptests)
        for metric, tags, short in ((PROGRAM_PEAK, ["programs/peak", "programs/geomean"],
                                     "peak RSS, MiB"), (PROGRAM_WALL, [], "wall time, s")):
            fq = figure(metric, q)
            figs = [(figure(metric, p), p) for p in peers]
            figs = [(f, p) for f, p in figs if f]
            if fq is None or not figs:
                continue
            fp, p = min(figs, key=lambda x: x[0])
            tg = [by_tag[t] for t in tags if t in by_tag]
            rows.append((f"programs ({n})", short + " ↓", fmt_num(fq), f"{fmt_num(fp)} {p.name}",
                         f"{fq / fp:.2f}", "-",
                         combined(tg) if tg else verdict(fq / fp, True)))
        by = {c.name: c for c in cols}
        for name, ref in (("qslab-slob", "glibc"), ("qslab-slub", q.name),
                          ("qslab-slab", q.name)):
            if name not in by or ref not in by:
                continue
            fx, fr = figure(PROGRAM_PEAK, by[name]), figure(PROGRAM_PEAK, by[ref])
            if not fx or not fr:
                continue
            t = by_tag.get(f"programs/{name}")
            rows.append((f"programs {name.split('-')[1]}", "peak RSS, MiB ↓", fmt_num(fx),
                         f"{fmt_num(fr)} {ref}", f"{fx / fr:.2f}", "-",
                         t.short() if t else "-"))
        if "qslab-hard" in by:
            for metric, short in ((PROGRAM_PEAK, "peak RSS, MiB"), (PROGRAM_WALL, "wall time, s")):
                fx, fr = figure(metric, by["qslab-hard"]), figure(metric, q)
                if not fx or not fr:
                    continue
                t = by_tag.get(f"programs/qslab-hard/{metric.key}")
                rows.append(("programs hardened", short + " ↓", fmt_num(fx), f"{fmt_num(fr)} {q.name}",
                             f"{fx / fr:.2f}", "-", t.short() if t else "-"))
    ct = next((t for t in tests if t.key == "programs.calloc"), None)
    if ct:
        cols = columns[ct.key]
        q = cols[0]
        for case, metric, name in ((ct.cases[0], ct.metrics[0], "calloc 9 MiB"),
                                   (ct.cases[1], ct.metrics[1], "calloc small")):
            x = cell(samples, ct, case, q, metric)
            peers = [(cell(samples, ct, case, c, metric), c) for c in cols if is_peer(c)]
            peers = [(y, c) for y, c in peers if y is not None]
            if x is None or not peers:
                continue
            y, c = min(peers, key=lambda p: p[0].median)
            t = by_tag.get(f"programs.calloc/{metric.key}")
            short = "page faults" if metric.key == "faults" else "KiB written"
            rows.append((name, short + " ↓", fmt_num(x.median), f"{fmt_num(y.median)} {c.name}",
                         f"{x.median / y.median:.2f}" if y.median else "-", "-",
                         t.short() if t else "-"))
    return rows


def front_summary(tests, columns, samples):
    """Lines: each front end over the first (slqb), geometric means over the
    cases of the front-end comparison's tables."""
    ftests = {t.key: t for t in tests if t.section == "fronts"}
    if not ftests:
        return []
    groups = [
        ("cycles", [k for k in ftests if k.split(".")[1] in FRONT_PATTERNS],
         "total"),
        ("hackbench msgs/s", ["fronts.hackbench"], "msgs_per_s"),
        ("memory at the peak", ["fronts.memory"], "anon_peak_kib"),
        ("prodcons msgs/s", ["fronts.prodcons"], "msgs_per_s"),
    ]
    lines = []
    for title, keys, mkey in groups:
        keys = [k for k in keys if k in ftests]
        if not keys:
            continue
        cols = columns[keys[0]]
        base = cols[0]
        lower = True
        ratios = {c.name: [] for c in cols[1:]}
        for k in keys:
            t = ftests[k]
            metric = next((m for m in t.metrics if m.key == mkey), None)
            if metric is None:
                continue
            lower = metric.lower_is_better
            for case in t.cases:
                b = cell(samples, t, case, base, metric)
                for c in cols[1:]:
                    x = cell(samples, t, case, c, metric)
                    if b is not None and x is not None and b.median > 0 and x.median > 0:
                        ratios[c.name].append(x.median / b.median)
        parts = [f"{n} {geomean(v):.2f}" for n, v in ratios.items() if v]
        if parts:
            lines.append(f"{title} {'↓' if lower else '↑'} {' '.join(parts)}")
    if not lines:
        return []
    return wrap(f"Front ends / {columns[next(iter(ftests))][0].name} (geometric means): "
                + "; ".join(lines), 0, SUMMARY_WIDTH)


def debug_summary(tests, columns, samples):
    """A line: each debug configuration's cost over plain (the geometric mean
    of the in-process ratios' medians over the patterns and sizes)."""
    dtests = [t for t in tests if t.section == "debug"]
    if not dtests:
        return []
    parts = []
    for c in columns[dtests[0].key]:
        rs = []
        for t in dtests:
            for case in t.cases:
                runs = samples.get((t.key, case.label, c.name)) or []
                rat = [x["ratio"] for x in runs if "ratio" in x]
                if rat:
                    rs.append(statistics.median(rat))
        if rs and c.name != "plain":
            parts.append(f"{c.name} {fmt_ratio(geomean(rs))}")
    if not parts:
        return []
    return wrap("Debug flags, cycles / plain's (geometric mean): " + ", ".join(parts), 0,
                SUMMARY_WIDTH)


def summary_table(head, rows, width=SUMMARY_WIDTH):
    """The rows as aligned columns; the last (target) cut to the width."""
    heads = ["benchmark", "measure", head, "best peer", "ratio", "thr/cpu", "target"]
    ws = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads[:-1])]
    right = {2, 3, 4, 5}
    fmt = lambda r: "  ".join((f"{x:>{w}}" if i in right else f"{x:<{w}}")
                              for i, (x, w) in enumerate(zip(r, ws))) + "  " + r[-1]
    lines = [fmt(heads), "-" * min(width, len(fmt(heads)) + 24)]
    for r in rows:
        line = fmt(r)
        lines.append(line if len(line) <= width else line[:width - 3] + "...")
    return lines


# --------------------------------------------------------------------------
# Output files

def write_csvs(out, tests, columns, samples):
    with open(os.path.join(out, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "case", "allocator", "round", "key", "value"])
        for test in tests:
            for case in test.cases:
                for c in columns[test.key]:
                    for i, res in enumerate(samples.get((test.key, case.label, c.name), [])):
                        for k, v in res.items():
                            w.writerow([test.key, case.label, c.name, i + 1, k, v])
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "metric", "unit", "case", "x", "allocator", "median", "min", "max",
                    "rounds", "qslab_ratio"])
        for test in tests:
            cols = columns[test.key]
            for m in test.metrics:
                for case in test.cases:
                    row = [cell(samples, test, case, c, m) for c in cols]
                    for c, x in zip(cols, row):
                        if x is None:
                            continue
                        r = ratio(row[0], x)
                        w.writerow([test.key, m.key, m.unit, case.label,
                                    "" if case.x is None else case.x, c.name,
                                    f"{x.median:.6g}", f"{min(x.values):.6g}",
                                    f"{max(x.values):.6g}", len(x.values),
                                    "" if r is None else f"{r:.4f}"])


def draw(gnuplot, script, png, made):
    """Run gnuplot on the script's lines; png's name into made if it drew."""
    r = subprocess.run([gnuplot], input="\n".join(script) + "\n", text=True,
                       capture_output=True, timeout=60)
    if r.returncode == 0:
        made.append(os.path.basename(png))
    else:
        LOG.write(f"gnuplot failed on {png}: {r.stderr.strip()[-300:]}")


# Plot styles: a colour and a point type per column name, the same in every
# plot; names not listed take the spare ones in turn.  qslab's primary column
# is red with filled circles and a thicker line, drawn last (on top) and
# named first in the key.
STYLES = {
    "qslab-cpu": ("#d62728", 7), "qslab": ("#d62728", 7), "slqb": ("#d62728", 7),
    "plain": ("#d62728", 7),
    "qslab-thread": ("#ff7f0e", 5), "qslab-malloc": ("#8c564b", 9),
    "glibc": ("#1f77b4", 4), "jemalloc": ("#2ca02c", 6), "tcmalloc": ("#9467bd", 8),
    "mimalloc": ("#e377c2", 12),
    "slub": ("#1f77b4", 5), "slab": ("#2ca02c", 9), "slob": ("#9467bd", 11),
    "slub+pt": ("#8c564b", 13),
    "qslab-slub": ("#ff7f0e", 5), "qslab-slab": ("#bcbd22", 9), "qslab-slob": ("#8c564b", 11),
    "qslab-hard": ("#7f7f7f", 3),
}
SPARE_STYLES = [("#17becf", 1), ("#7f7f7f", 2), ("#bcbd22", 3), ("#8c564b", 10),
                ("#e377c2", 14), ("#2ca02c", 13), ("#1f77b4", 15), ("#9467bd", 1)]


def styles(cols):
    """{column name: (colour, point type)}, distinct within the plot."""
    out, used, spare = {}, set(), iter(SPARE_STYLES * 3)
    for c in cols:
        st = STYLES.get(c.name)
        while st is None or st in used:
            st = next(spare)
        out[c.name] = st
        used.add(st)
    return out


def line_plots(cols, source):
    """`plot` terms for lines: every column in its style, the first one
    (qslab's primary) drawn last, over the others, and named first in the
    key through a keyentry.  source(i, c): the data part of column i."""
    st = styles(cols)
    look = lambda c, lw: f"lc rgb '{st[c.name][0]}' pt {st[c.name][1]} ps 1.2 lw {lw}"
    q = cols[0]
    terms = [f"keyentry with linespoints {look(q, 3)} title '{q.name}'"]
    terms += [f"{source(i, c)} with linespoints {look(c, 2)} title '{c.name}'"
              for i, c in enumerate(cols) if i]
    terms.append(f"{source(0, q)} with linespoints {look(q, 3)} notitle")
    return terms


def spans_decades(values):
    """True when the positive values span more than a factor of 20: a log
    scale then shows the small ones."""
    pos = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return len(pos) > 1 and max(pos) / min(pos) > 20


def bar_script(cols, ncases, source, values):
    """Clustered bars, the clusters filling the width (half a gap at each
    end), a log scale when the values span decades."""
    st = styles(cols)
    script = ["set style data histogram", "set style histogram clustered gap 1",
              "set style fill solid 0.85 border -1", "set boxwidth 0.95 relative",
              f"set xrange [-0.5:{ncases - 0.5}]", "set xtics nomirror"]
    if spans_decades(values):
        lo = min(v for v in values if v is not None and v > 0 and math.isfinite(v))
        script += ["set logscale y", f"set yrange [{lo / 2:g}:*]"]
    else:
        script += ["set yrange [0:*]"]
    plots = [f"{source(i, c)} title '{c.name}' lc rgb '{st[c.name][0]}'"
             for i, c in enumerate(cols)]
    return script, plots


def plot(out, tests, columns, samples):
    """One PNG per table with gnuplot, in `out` (emptied of the last run's
    plots first): lines over size/threads, else bars.  Returns the files
    made and a note for the report."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return [], "plots: gnuplot not installed (scripts/install-peers installs it), none drawn"
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith((".png", ".dat")):
            os.remove(os.path.join(out, f))
    term = ("set terminal pngcairo size 900,500 font ',10' noenhanced"
            if has_pngcairo(gnuplot) else "set terminal png size 900,500 noenhanced")
    made = []
    for test in tests:
        if test.section == "programs":  # plot_programs draws the section's own
            continue
        cols = columns[test.key]
        for m in test.metrics:
            name = f"{test.key}.{m.key}".replace("_", "-")
            dat = os.path.join(out, name + ".dat")
            values = []
            with open(dat, "w") as f:
                f.write("# case\tx\t" + "\t".join(c.name for c in cols) + "\n")
                for case in test.cases:
                    vals = []
                    for c in cols:
                        x = cell(samples, test, case, c, m)
                        vals.append("NaN" if x is None else f"{x.median:.6g}")
                        values.append(None if x is None else x.median)
                    f.write(f"{case.label}\t{case.x if case.x is not None else 0}\t"
                            + "\t".join(vals) + "\n")
            numeric = all(c.x is not None for c in test.cases)
            png = os.path.join(out, name + ".png")
            script = [
                term,
                f"set output '{png}'",
                f"set title \"{test.title}\\n{m.describe()}\"",
                "set key outside right top", "set grid ytics",
                f"set ylabel '{m.unit}'", "set datafile separator tab",
            ]
            if numeric:
                sized = test.row_title in ("size", "data size")
                xlabel = "object size (bytes)" if sized else "threads"
                xs = [c.x for c in test.cases]
                script += [f"set xlabel '{xlabel}'"]
                if min(xs) > 0 and max(xs) / min(xs) >= 4:
                    script += ["set logscale x 2"]
                script += ["set offsets graph 0.03, graph 0.03, 0, 0"]  # end points visible
                if spans_decades(values):
                    script += ["set logscale y", "set grid mytics"]
                plots = line_plots(cols, lambda i, c: f"'{dat}' using 2:{i + 3}")
            else:
                more, plots = bar_script(cols, len(test.cases),
                                         lambda i, c: f"'{dat}' using {i + 3}:xtic(1)", values)
                script += more + ["set xtics font ',9'"]
                if len(test.cases) > 6:  # long row labels (the front ends' memory table)
                    script += ["set xtics rotate by -40 font ',8'", "set bmargin 9"]
            script.append("plot " + ", ".join(plots))
            draw(gnuplot, script, png, made)
    made += plot_programs(out, tests, columns, samples, gnuplot, term)
    return made, f"plots: {len(made)} PNG files in {out}"


@functools.lru_cache(maxsize=None)
def has_pngcairo(gnuplot):
    r = subprocess.run([gnuplot, "-e", "set terminal"], capture_output=True, text=True)
    return "pngcairo" in r.stdout + r.stderr


# --------------------------------------------------------------------------
# Machine

def machine():
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} CPUs{mem}, Linux {platform.release()}"


def cpu_times():
    """(busy, steal, total) jiffies from /proc/stat."""
    try:
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    steal = f[7] if len(f) > 7 else 0
    total = sum(f[:8])
    return total - idle, steal, total


# --------------------------------------------------------------------------

FRONTS_HEADER = textwrap.wrap(
    "Front ends (docs/fronts.md): qslab's front ends against each other, the seeds' "
    "SLAB/SLUB/SLQB argument (with SLOB) rerun.  bench_fronts runs every front end in one "
    "process, through the object-cache API, with a cache per front end and size, the front "
    "ends taking turns at going first from round to round; memory is measured per test, as "
    "differences, each front end's caches destroyed before the next one starts.  prodcons "
    "runs under the drop-in with QSLAB_FRONT.  Ratios: each front end / the first column.",
    width=100)


def front_section(m, ncpus, bin_dir, qslab_lib, owner):
    """The front-end comparison's tests, and the notes for its header: the
    front ends found, the owner mode, the pass-through column's fate."""
    fronts, why = discover_fronts(bin_dir)
    if fronts is None:
        return [], [f"not compared: {why}"]
    owner_env = {OWNER_VAR: None if owner == "default" else owner}
    absent = [f for f in FRONT_ORDER if f not in fronts]
    notes = [f"front ends: {', '.join(fronts)}"
             + (f" ({', '.join(absent)}: not in this build)" if absent else "")
             + f"; {OWNER_VAR}={owner if owner != 'default' else '(unset)'}"]
    pt_env = None
    if "slub" in fronts:
        tune = pass_through_tune()
        old = os.environ.get("QSLAB_TUNE")
        env = {FRONT_VAR: "slub", "QSLAB_TUNE": f"{old};{tune}" if old else tune}
        ok, why = probe_pass_through(bin_dir, qslab_lib, {**owner_env, **env})
        if ok:
            pt_env = env
            notes.append(f"{PASS_THROUGH}: {FRONT_VAR}=slub, QSLAB_TUNE=kmalloc-5120:"
                         "pass_through=1;... (every kmalloc cache above 4 KiB)")
        else:
            notes.append(f"{PASS_THROUGH}: skipped, the pass-through tune was refused: {why}")
    else:
        notes.append(f"{PASS_THROUGH}: skipped, no slub front end in this build")
    version = qslab_version()
    return build_front_tests(m, ncpus, fronts, version, qslab_lib, owner_env, pt_env), notes


# --------------------------------------------------------------------------
# Debugging costs: what SLUB's debug flags (docs/debugging.md)
# cost a cache on the slub_test pair and batch patterns, one CPU, against
# the plain cache in the same process.  bench_debug runs every configuration
# (its configs[] list: plain, F, Z, P, U, FZPU, ...) in one process per
# round, interleaved, and prints each one's cycles and its ratio to plain
# measured in the same inner round.

DEBUG_VAR = "QSLAB_DEBUG"  # unset for this section: it would make plain a debug cache


class DebugRun(SharedRun):
    """bench_debug: one process per round feeds debug.pair and debug.batch;
    its columns are the configurations (--configs)."""

    names_option = "--configs"

    def wanted(self):
        return [t.key.split(".", 1)[1] for t in self.members]

    def parse(self, line, got):
        """One "result test=T config=C size=S key=value ..." line into got."""
        test, config, nums = result_words(line, "test", "config")
        got[(f"debug.{test}", str(int(nums["size"])), config)] = nums


def discover_debug_configs(bin_dir, env):
    """([(configuration, front end, flags)] from bench_debug --list, or None;
    why not)."""
    exe = os.path.join(bin_dir, "bench_debug")
    full = dict(os.environ)
    full.pop("LD_PRELOAD", None)
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    try:
        r = subprocess.run([exe, "--list"], capture_output=True, text=True, env=full, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{exe}: {e}"
    rows = [tuple(l.split()) for l in r.stdout.splitlines() if l.strip()]
    if r.returncode != 0 or not rows or any(len(x) != 3 for x in rows):
        return None, (f"{exe} --list: exit {r.returncode}, "
                      f"{(r.stderr.strip().splitlines() or [''])[-1]}")
    return rows, ""


def debug_section(m, bin_dir, owner):
    """The debugging costs' tests, and the notes for its header."""
    env = {OWNER_VAR: None if owner == "default" else owner, DEBUG_VAR: None}
    rows, why = discover_debug_configs(bin_dir, env)
    if rows is None:
        return [], [f"not measured: {why}"]
    configs = [name for name, _, _ in rows]
    fronts = ", ".join(f"{name}: {front}" for name, front, _ in rows)
    notes = [f"configurations (front end serving each): {fronts}; "
             f"{OWNER_VAR}={owner if owner != 'default' else '(unset)'}, {DEBUG_VAR} unset"]
    n, sizes = m["objs"], m["debug_sizes"]
    args = ["--sizes", ",".join(map(str, sizes)), "--objs", str(n),
            "--rounds", str(m["debug_rounds"])]
    shared = DebugRun("debug", "debug", args, configs, env)
    version = qslab_version()
    cols = [Contender(c, None, version, env=env, subject=True, short=c) for c in configs]
    cases = [Case(str(s), [], s) for s in sizes]
    tests = [
        Test("debug.pair", f"debug flags, {n:,} alloc+free pairs, one CPU (object cache API)",
             'slub_test single thread test 2, "alloc/free test"', "debug", cases,
             [Metric("total", "cycles per alloc+free pair", "cycles", True)],
             "short-lived objects in a debug cache: every alloc and free through the debug "
             "front end", contenders=lambda allocs: cols, section="debug", shared=shared,
             row_title="size"),
        Test("debug.batch", f"debug flags, {n:,} allocs then {n:,} frees, one CPU "
                            "(object cache API)",
             'slub_test single thread test 1, "Repeatedly allocate 10000 objs then free them"',
             "debug", cases,
             [Metric("total", "cycles per object, alloc+free", "cycles", True,
                     split=("alloc", "free"))],
             "a burst of allocations released together, in a debug cache",
             contenders=lambda allocs: cols, section="debug", shared=shared, row_title="size"),
    ]
    return tests, notes


DEFRAG_HEADER = textwrap.wrap(
    "Cooperative defragmentation (docs/design.md, qslab_cache_set_mobility): "
    "bench_defrag (examples/kvcache.c) loads a hash table of 64-byte entries from a qslab "
    "cache, deletes 90% at random and calls qslab_cache_shrink, with the table's mobility "
    "callbacks and without; every key is checked after.  Memory: the growth of the resident "
    "set over the program's start, as a multiple of the live bytes (entries, buckets, the "
    "bitmap of kept keys), right after the shrink and 1.5 s later (the retention rule's "
    "second: slabs that emptied during the shrink go back by then).  The two columns run "
    "in turn, one process each.", 110)


def defrag_section(m, owner):
    """The defragmentation test: one case, a column with mobility and one without."""
    env = {OWNER_VAR: None if owner == "default" else owner}
    version = qslab_version()
    cols = [Contender("mobility", None, version, env=env, subject=True, short="mobility"),
            Contender("no-mobility", None, version, extra_args=["--no-mobility"], env=env,
                      subject=True, short="no-mobility")]
    n = m["defrag_entries"]
    return [Test(
        "defrag.kv", f"defragmentation: {n:,} key-value entries, 90% deleted at random, "
                     "then qslab_cache_shrink",
        'the "slab defrag" series (kmem_cache_setup_defrag), issue 38', "defrag",
        [Case(f"{n:,} entries", [str(n)])],
        [Metric("settled_ratio", "RSS growth / live bytes, 1.5 s after the shrink", "x", True),
         Metric("after_ratio", "RSS growth / live bytes, right after the shrink", "x", True),
         Metric("shrink_ms", "time of qslab_cache_shrink", "ms", True)],
        "a cache whose population was mostly freed at random: every slab keeps survivors",
        contenders=lambda allocs: cols, section="defrag")]


def defrag_target(test, columns, samples):
    """The target line of the defragmentation test."""
    metric, case = test.metrics[0], test.cases[0]
    c = cell(samples, test, case, columns[test.key][0], metric)
    if c is None:
        return ["   target: not measured"]
    ok = c.median <= DEFRAG_TARGET
    return [f"   target: RSS growth 1.5 s after the shrink at most {DEFRAG_TARGET}x the live "
            f"bytes with mobility: {c.median:.2f}x, {'met' if ok else 'MISSED'}"]


def debug_table(tests, columns, samples, number):
    """The debugging costs as one table: a row per configuration, a column
    per (pattern, size): median cycles and the median of the in-process
    ratios to plain; spread: of those ratios over the rounds, widest of the
    row."""
    groups = [(t, c) for t in tests for c in t.cases]
    configs = columns[tests[0].key] if tests else []
    heads = [f"{t.key.split('.', 1)[1]} {fmt_size(c.x)}" for t, c in groups]
    rows = []
    for cont in configs:
        texts, spreads = [], []
        for t, case in groups:
            runs = samples.get((t.key, case.label, cont.name)) or []
            cyc = [r["total"] for r in runs]
            rat = [r["ratio"] for r in runs if "ratio" in r]
            text = fmt_num(statistics.median(cyc)) if cyc else "-"
            if rat:
                text += f" {fmt_ratio(statistics.median(rat)):>5}"
                spreads.append(Cell(rat).spread)
            texts.append(text)
        rows.append((cont.name, texts, spreads))
    name_w = max([len("config")] + [len(c.name) for c in configs])
    ws = [max([len(h)] + [len(r[1][i]) for r in rows]) for i, h in enumerate(heads)]
    lines = [f"{number} debug flags, one CPU, object cache API: cycles per operation, and "
             "the ratio to plain"]
    lines += [f"   {t.key.split('.', 1)[1]}: {t.title.replace('debug flags, ', '')}; "
              f"{t.metrics[0].title}" for t in tests]
    lines += ["   cells: median cycles, and the median over the rounds of config/plain "
              "measured in the same round; lower is better",
              "   reproduces: slub_test single thread tests 1 and 2, with SLUB's debug flags "
              "(slub_debug) on the cache"]
    head = f"{'config':>{name_w}} | " + " | ".join(f"{h:>{w}}" for h, w in zip(heads, ws))
    head += " | spread"
    lines += [head, "-" * len(head)]
    for name, texts, spreads in rows:
        line = f"{name:>{name_w}} | " + " | ".join(f"{x:>{w}}" for x, w in zip(texts, ws))
        line += f" | ±{max(spreads) * 100:.0f}%" if spreads else " |"
        lines.append(line)
    return lines


def fmt_ratio(r):
    """A ratio to plain: three significant digits or so, and an x."""
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x" if r < 100 else f"{r:.0f}x"


def fmt_size(x):
    if x is None:
        return "?"
    return f"{x // 1024} KiB" if x >= 1024 and x % 1024 == 0 else f"{x} B"


DEBUG_HEADER = textwrap.wrap(
    "Debugging costs (docs/debugging.md): SLUB's debug flags, set per cache with "
    "qslab_cache_create's flags (F QSLAB_CONSISTENCY_CHECKS, Z QSLAB_RED_ZONE, P QSLAB_POISON, "
    "U QSLAB_STORE_USER; T is left out: it writes a line per operation to stderr), against the "
    "plain cache.  bench_debug runs every configuration in one process, with a cache of its own "
    "per test and size, round by round (each measured run right after a warm-up run on the same "
    "cache), the configurations taking turns at going first; a ratio is a configuration's "
    "cycles over plain's in the same round.", width=100)


# --------------------------------------------------------------------------
# Programs: real programs under every allocator, their peak RSS,
# wall time and output (bench/programs/programs.py runs them), and calloc's
# page faults (bench_calloc).  The columns: qslab's first owner mode with
# its default front end (SLQB), then QSLAB_FRONT=slub, slab, slob (the front
# ends this build has), the hardened profile (QSLAB_HARDEN=1: qslab-hard),
# glibc and the peers, every column in every round.

PROGRAM_FRONTS = ["slub", "slab", "slob"]  # columns beside qslab's default (slqb)
HARDEN_VAR = "QSLAB_HARDEN"
HARDEN_PEAK = 1.25         # qslab-hard's peak RSS <= 1.25x qslab's (issue: hardening)
HARDEN_TIME = 1.5          # ... and its wall time <= 1.5x qslab's, and below glibc's
CALLOC_HANDFUL = 5         # 9 MiB calloc: faults allowed over glibc's
CALLOC_WRITTEN_SHARE = 0.05  # small callocs "write nothing": anon added <= 5% of the blocks
PROGRAM_LIMIT = 1.05       # each program's peak RSS <= 1.05x the smallest peer's
PROGRAM_PEAK = Metric("peak_rss_kib", "peak RSS", "MiB", True, scale=1 / 1024)
PROGRAM_WALL = Metric("wall_s", "wall time", "s", True)
PROGRAM_USED = Metric("used_memory_kib", "used_memory (INFO memory)", "MiB", True, scale=1 / 1024)


class ProgramRun:
    """One program of bench/programs/programs.py at the mode's scale, its
    scratch files under `work`."""

    def __init__(self, prog, scale, work):
        self.prog, self.scale, self.work = prog, scale, work

    def run(self, env, timeout):
        return self.prog.run(self.scale, env, self.work, timeout)


def program_contenders(allocs, fronts, rounds, hard=True):
    """qslab (the first owner mode, QSLAB_FRONT unset: SLQB), a column per
    other front end, the hardened profile (unless not `hard`), then glibc
    and the peers; each runs in the first `rounds` rounds of the suite."""
    first = next(a for a in allocs if a.subject)
    env = {**first.env, FRONT_VAR: None}
    cols = [Contender(first.name, first.preload, first.version, env=env, subject=True,
                      short=first.short, rounds=rounds)]
    for f in PROGRAM_FRONTS:
        if f in fronts:
            cols.append(Contender(f"qslab-{f}", first.preload, first.version,
                                  env={**env, FRONT_VAR: f}, subject=True, short=f,
                                  rounds=rounds))
    if hard:
        cols.append(Contender("qslab-hard", first.preload, first.version,
                              env={**env, HARDEN_VAR: "1"}, subject=True, short="hard",
                              rounds=rounds))
    return cols + [Contender(a.name, a.preload, a.version, env=a.env, rounds=rounds)
                   for a in allocs if not a.subject]


def programs_section(mode, m, bin_dir, work, wanted):
    """The programs' tests (those `wanted` selects), the notes for the
    section's header, and the keys of the programs that cannot run here."""
    progs.set_bin_dir(bin_dir)
    fronts, why = discover_fronts(bin_dir)
    notes = []
    if fronts is None:
        fronts = []
        notes.append(f"qslab's other front ends: not found ({why}); qslab's default only")
    rounds = m["program_rounds"]
    cols = lambda allocs: program_contenders(allocs, fronts, rounds)
    scale = progs.SCALES[mode]
    tests, skipped, runs_by = [], [], {}
    for p in progs.PROGRAMS:
        key = "programs." + p.key
        if not wanted(key):
            continue
        ok, what = p.available()
        if not ok:
            skipped.append(key)
            notes.append(f"{key}: SKIPPED: {what}")
            continue
        runs_by.setdefault(what, []).append(p.key)
        metrics = [PROGRAM_PEAK, PROGRAM_WALL] + ([PROGRAM_USED] if p.metrics else [])
        tests.append(Test(key, p.title, p.seed, None, [Case("run", [])], metrics, p.models,
                          contenders=cols, section="programs", row_title="program",
                          program=ProgramRun(p, scale, work)))
    for what, keys in runs_by.items():
        notes.append(f"{', '.join(keys)}: {what}")
    if tests:
        notes.append("sizes: " + ", ".join(f"{k} {v:,}" for k, v in scale.items()))
    if tests:
        notes.append(f"rounds: {rounds}, the allocators interleaved, medians")
    n = m["calloc_blocks"]
    if wanted("programs.calloc"):
        tests.append(Test(
            "programs.calloc", "calloc: page faults and pages written, in a fresh process",
            "calloc clears only memory that may hold old data: a 9 MiB calloc faults no "
            "more pages than glibc's plus a handful; callocs of small blocks from fresh slabs "
            "write nothing", "calloc",
            [Case("9 MiB, one block (9,216 KiB)", ["--count", "1", "--size", str(9 << 20)]),
             Case(f"{n:,} x 64 B ({n * 64 / 1024:,.0f} KiB)",
                  ["--count", str(n), "--size", "64"])],
            [Metric("faults", "minor page faults during the callocs", "faults", True),
             Metric("anon_kib", "anonymous memory the callocs add (pages written)", "KiB",
                    True)],
            "bench_calloc: nothing touches the blocks; pages only read would map the zero "
            "page and add nothing, so what is added was written by calloc or the allocator",
            contenders=lambda allocs: program_contenders(allocs, fronts, rounds, hard=False),
            section="programs", row_title="case"))
    return tests, notes, skipped


def run_program_round(test, case, order, r, timeout, samples, errors, progress):
    """Round r of a program: one run under each contender of `order`."""
    for c in order:
        progress.step(f"{test.key} {c.name}")
        t0 = time.time()
        try:
            nums, check, series = test.program.run(c.environ(), timeout)
        except (progs.RunError, OSError) as e:
            errors.append(f"{test.key} {c.name}: {e}")
            LOG.write(f"{test.key} {c.name}: {e}")
            continue
        LOG.write(f"{test.key} under {c.name} ({c.describe()}), round {r + 1}: "
                  f"{time.time() - t0:.2f} s, "
                  + " ".join(f"{k}={v:g}" for k, v in nums.items()))
        samples.setdefault((test.key, case.label, c.name), []).append(nums)
        test.checks.setdefault(c.name, []).append((r, check))
        test.series.setdefault(c.name, []).append((r, nums["peak_rss_kib"], series))


def program_mismatches(tests):
    """Lines for every run whose output differs from glibc's (or, without
    glibc, from the first contender's), and the number of runs compared."""
    lines, compared = [], 0
    for t in tests:
        if not t.program or not t.checks:
            continue
        ref_name = "glibc" if "glibc" in t.checks else next(iter(t.checks))
        ref = t.checks[ref_name][0][1]
        for name, runs in t.checks.items():
            for r, text in runs:
                compared += 1
                if text == ref:
                    continue
                a, b = ref.splitlines(), text.splitlines()
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                got = b[i] if i < len(b) else "(end of output)"
                want = a[i] if i < len(a) else "(end of output)"
                lines.append(f"OUTPUT MISMATCH {t.key} under {name}, round {r + 1}: line {i + 1} "
                             f"is {got!r}, {ref_name}'s {want!r}")
    return lines, compared


def program_cells(tests, cols, samples, metric):
    """{(test key, contender name): Cell} of the tests that have metric."""
    out = {}
    for t in tests:
        if metric not in t.metrics:
            continue
        for c in cols:
            x = cell(samples, t, t.cases[0], c, metric)
            if x is not None:
                out[(t.key, c.name)] = x
    return out


def smallest_peer(cells, key, cols):
    """(contender, cell) of the peer with the smallest median, or (None, None)."""
    peers = [(c, cells[(key, c.name)]) for c in cols if is_peer(c) and (key, c.name) in cells]
    return min(peers, key=lambda p: p[1].median) if peers else (None, None)


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def grid(number, title, notes, row_title, rows, heads, groups=None):
    """A table: rows of (label, [text per column], spread or None); groups:
    indexes of the columns after which a '|' goes."""
    name_w = max([len(row_title)] + [len(r[0]) for r in rows])
    ws = [max([len(h), 5] + [len(r[1][i]) for r in rows]) for i, h in enumerate(heads)]

    def join(texts):
        out = ""
        for i, (x, w) in enumerate(zip(texts, ws)):
            out += f" {x:>{w}}"
            if groups and i in groups:
                out += " |"
        return out

    lines = [f"{number} {title}"] + [f"   {n}" for n in notes]
    head = f"{row_title:>{name_w}} |" + join(heads)
    spreads = any(r[2] is not None for r in rows)
    head += " | spread" if spreads else ""
    lines += [head, "-" * len(head)]
    for label, texts, spread in rows:
        line = f"{label:>{name_w}} |" + join(texts)
        if spreads:
            line += f" | ±{spread * 100:.0f}%" if spread is not None else " |"
        lines.append(line)
    return lines


def median_row(name, cells, fmt):
    """A grid row: each cell's median (in format fmt, "-" for none) and the
    widest spread."""
    return (name, [format(x.median, fmt) if x else "-" for x in cells],
            max((x.spread for x in cells if x), default=None))


def programs_report(tests, columns, samples, number, notes, mismatches, compared, found=None):
    """The section: header, tables, calloc's tables, its targets."""
    lines = [""] + PROGRAMS_HEADER + [f"   {n}" for n in notes]
    ptests = [t for t in tests if t.program and any(
        (t.key, t.cases[0].label, c.name) in samples for c in columns[t.key])]
    if mismatches:
        lines += ["", f"!!! {len(mismatches)} run(s) printed other output than glibc's:"]
        lines += [f"!!! {x}" for x in mismatches]
    elif compared:
        lines.append(f"   output: every run's ({compared}) identical to glibc's run of the "
                     "same program")
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    label = lambda t: t.key.split(".", 1)[1]
    if ptests:
        cols = columns[ptests[0].key]
        last_subject = max(i for i, c in enumerate(cols) if c.subject)
        groups = {last_subject}
        heads = [c.name for c in cols]
        peak = program_cells(ptests, cols, samples, PROGRAM_PEAK)
        glibc = next((c for c in cols if c.name == "glibc"), None)

        rows = [median_row(label(t), [peak.get((t.key, c.name)) for c in cols], ".1f")
                for t in ptests]
        lines += [""] + grid(f"{number}{next(letters)}.", "programs: peak RSS (MiB), lower is "
                             "better", ["the program's process (redis: the server's VmHWM before "
                                        "its shutdown); median over the rounds"],
                             "program", rows, heads, groups)

        def ratio_rows(over, base):
            """Rows of peak / base(t) for the columns `over`, and a geomean row;
            base(t) gives (the name of the base's column or None, its cell)."""
            rows, logs = [], {c.name: [] for c in over}
            for t in ptests:
                name, b = base(t)
                texts = []
                for c in over:
                    x = peak.get((t.key, c.name))
                    if x and b:
                        logs[c.name].append(x.median / b.median)
                        texts.append(f"{x.median / b.median:.2f}")
                    else:
                        texts.append("-")
                if name is not None:
                    texts.append(f"{name} {b.median:.1f}" if b else "-")
                rows.append((label(t), texts, None))
            rows.append(("geomean", [f"{geomean(logs[c.name]):.2f}" if logs[c.name] else "-"
                                     for c in over], None))
            return rows

        if glibc:
            rows = ratio_rows(cols, lambda t: (None, peak.get((t.key, "glibc"))))
            lines += [""] + grid(f"{number}{next(letters)}.", "programs: peak RSS / glibc's, "
                                 "lower is better", [], "program", rows, heads, groups)

        def smallest(t):
            peer, best = smallest_peer(peak, t.key, cols)
            return (peer.name if peer else "", best)

        subj = [c for c in cols if c.subject]
        rows = ratio_rows(subj, smallest)
        rows[-1] = (rows[-1][0], rows[-1][1] + [""], None)
        lines += [""] + grid(f"{number}{next(letters)}.", "programs: peak RSS / the smallest "
                             "peer's, lower is better", [], "program", rows,
                             [c.name for c in subj] + ["smallest peer (MiB)"],
                             {len(subj) - 1})

        wall = program_cells(ptests, cols, samples, PROGRAM_WALL)
        rows = [median_row(label(t), [wall.get((t.key, c.name)) for c in cols], ".2f")
                for t in ptests]
        lines += [""] + grid(f"{number}{next(letters)}.", "programs: wall time (s), lower is "
                             "better", ["from the fork to the exit (redis: the server's whole "
                                        "life, start-up and fill included); on a shared VM, "
                                        "read with the spread"],
                             "program", rows, heads, groups)

        used = program_cells(ptests, cols, samples, PROGRAM_USED)
        for t in ptests:
            if PROGRAM_USED not in t.metrics:
                continue
            row = [used.get((t.key, c.name)) for c in cols]
            g = used.get((t.key, "glibc"))
            rows = [median_row("MiB", row, ".1f")]
            if g:
                rows.append(("/ glibc", [f"{x.median / g.median:.2f}" if x else "-"
                                         for x in row], None))
            lines += [""] + grid(f"{number}{next(letters)}.", f"{label(t)}: used_memory (INFO "
                                 "memory), lower is better",
                                 ["redis's own count: malloc_usable_size of every block it "
                                  "holds, so each allocator's size classes"],
                                 label(t), rows, heads, groups)

    ct = next((t for t in tests if t.key == "programs.calloc"), None)
    if ct:
        for i, metric in enumerate(ct.metrics):
            lines.append("")
            lines += table(ct, metric, columns[ct.key], samples, f"{number}{next(letters)}.")
    lines += [""] + programs_targets(ptests, ct, columns, samples, found)
    return lines


def programs_targets(ptests, ct, columns, samples, found=None):
    """The section's targets, measured, never asserted."""
    tol = 1 + MEMORY_TOLERANCE
    lines = [f"Targets for the programs (medians of peak RSS; 'at most' strict, "
             f"'no larger than' within {MEMORY_TOLERANCE * 100:.0f}%)"]

    label = lambda t: t.key.split(".", 1)[1]
    if ptests:
        cols = columns[ptests[0].key]
        q = cols[0]
        by = {c.name: c for c in cols}
        peak = program_cells(ptests, cols, samples, PROGRAM_PEAK)
        ok, miss, far = [], [], []
        for t in ptests:
            peer, best = smallest_peer(peak, t.key, cols)
            x = peak.get((t.key, q.name))
            if x and best:
                r = x.median / best.median
                (ok if r <= PROGRAM_LIMIT else miss).append(f"{label(t)} ({r:.2f} vs {peer.name})")
                if r > PROGRAM_LIMIT:
                    far.append((r, f"{label(t)} {r:.2f}x {peer.name}"))
        if ok or miss:
            target_lines(lines, f"{q.name}: each program's peak RSS at most {PROGRAM_LIMIT:.2f}x "
                         "the smallest peer's", ok, miss, "programs", found, "programs/peak",
                         max(far)[1] if far else None)
        rs = [peak[(t.key, q.name)].median / peak[(t.key, "glibc")].median for t in ptests
              if (t.key, q.name) in peak and (t.key, "glibc") in peak]
        if rs:
            g = geomean(rs)
            desc = f"{q.name}: geomean of peak RSS / glibc's at most 1.0"
            lines.append(f"  {'met   ' if g <= tol else 'MISSED'} {desc}: {g:.2f} over "
                         f"{len(rs)} programs")
            if found is not None:
                found.append(Target("programs/geomean", desc, [g] if g <= tol else [],
                                    [] if g <= tol else [g], "", f"geomean {g:.2f}x"))

        def against(name, ref, desc):
            if name not in by or ref not in by:
                return
            ok, miss, far = [], [], []
            for t in ptests:
                x, y = peak.get((t.key, name)), peak.get((t.key, ref))
                if x and y:
                    r = x.median / y.median
                    (ok if r <= tol else miss).append(f"{label(t)} ({r:.2f})")
                    if r > tol:
                        far.append((r, f"{label(t)} {r:.2f}x"))
            if ok or miss:
                target_lines(lines, desc, ok, miss, "programs", found, f"programs/{name}",
                             max(far)[1] if far else None)

        against("qslab-slob", "glibc", "qslab-slob: peak RSS no larger than glibc's")
        against("qslab-slub", q.name, f"qslab-slub: peak RSS no larger than SLQB's ({q.name})")
        against("qslab-slab", q.name, f"qslab-slab: peak RSS no larger than SLQB's ({q.name})")
        if "qslab-hard" in by:
            wall = program_cells(ptests, cols, samples, PROGRAM_WALL)
            for metric, cells, limit, what in ((PROGRAM_PEAK, peak, HARDEN_PEAK, "peak RSS"),
                                                (PROGRAM_WALL, wall, HARDEN_TIME, "wall time")):
                ok, miss, far = [], [], []
                for t in ptests:
                    x, y = cells.get((t.key, "qslab-hard")), cells.get((t.key, q.name))
                    g = cells.get((t.key, "glibc"))
                    if not x or not y:
                        continue
                    r = x.median / y.median
                    met = r <= limit and (metric is not PROGRAM_WALL or not g
                                          or x.median < g.median)
                    note = f" vs glibc {x.median / g.median:.2f}" if metric is PROGRAM_WALL and g else ""
                    (ok if met else miss).append(f"{label(t)} ({r:.2f}{note})")
                    if not met:
                        far.append((r, f"{label(t)} {r:.2f}x"))
                extra = ", and below glibc's" if metric is PROGRAM_WALL else ""
                if ok or miss:
                    target_lines(lines, f"qslab-hard (QSLAB_HARDEN=1): {what} at most {limit:.2f}x "
                                 f"{q.name}'s{extra}", ok, miss, "programs", found,
                                 f"programs/qslab-hard/{metric.key}",
                                 max(far)[1] if far else None)

    if ct:
        cols = columns[ct.key]
        big, small = ct.cases[0], ct.cases[1]
        faults = ct.metrics[0]
        anon = ct.metrics[1]
        g = cell(samples, ct, big, next((c for c in cols if c.name == "glibc"), cols[-1]), faults)
        subj = [c for c in cols if c.subject]
        if g:
            limit = g.median + CALLOC_HANDFUL
            ok, miss = [], []
            for c in subj:
                x = cell(samples, ct, big, c, faults)
                if x:
                    (ok if x.median <= limit else miss).append(f"{c.name} ({x.median:.0f})")
            target_lines(lines, f"a 9 MiB calloc faults no more pages than glibc's + "
                         f"{CALLOC_HANDFUL} ({g.median:.0f} + {CALLOC_HANDFUL})", ok, miss,
                         "qslab columns", found, "programs.calloc/faults",
                         f"{miss[0].replace(' (', ' ').rstrip(')')} > {limit:.0f}" if miss
                         else None)
        ok, miss = [], []
        blocks_kib = float(small.args[1]) * 64 / 1024
        for c in subj:
            x = cell(samples, ct, small, c, anon)
            if x:
                (ok if x.median <= CALLOC_WRITTEN_SHARE * blocks_kib else miss).append(
                    f"{c.name} ({x.median:.0f} KiB)")
        if ok or miss:
            target_lines(lines, f"callocs of {small.label.split(' (')[0]} from fresh slabs write "
                         f"nothing (pages written at most {CALLOC_WRITTEN_SHARE * 100:.0f}% of the "
                         f"blocks' {blocks_kib:,.0f} KiB)", ok, miss, "qslab columns", found,
                         "programs.calloc/anon_kib",
                         f"{miss[0].replace(' (', ' ').rstrip(')')} > "
                         f"{CALLOC_WRITTEN_SHARE * blocks_kib:.0f}" if miss else None)
    return lines


def write_program_series(out, tests):
    """programs-rss.csv: every RSS sample of every program run."""
    with open(os.path.join(out, "programs-rss.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["test", "allocator", "round", "seconds", "rss_kib"])
        for t in tests:
            for name, runs in t.series.items():
                for r, _, series in runs:
                    for sec, kib in series:
                        w.writerow([t.key, name, r + 1, f"{sec:.3f}", kib])


def median_run(runs):
    """The (round, peak, series) whose peak is the median (the lower middle)."""
    ordered = sorted(runs, key=lambda x: x[1])
    return ordered[(len(ordered) - 1) // 2]


def plot_programs(out, tests, columns, samples, gnuplot, term):
    """PNGs: each program's RSS over time (qslab's default column and the
    peers, the run with the median peak of each), and peak RSS / glibc's
    per program for every column.  Returns the files made."""
    made = []
    ptests = [t for t in tests if t.program and t.series]
    for t in ptests:
        cols = [c for c in columns[t.key] if (c is columns[t.key][0] or not c.subject)
                and t.series.get(c.name)]
        name = f"{t.key}.rss-over-time".replace("_", "-")
        dat = os.path.join(out, name + ".dat")
        with open(dat, "w") as f:
            for c in cols:
                r, peak, series = median_run(t.series[c.name])
                f.write(f"# {c.name}, round {r + 1}, peak {peak / 1024:.1f} MiB\n")
                f.writelines(f"{sec:.3f}\t{kib / 1024:.2f}\n" for sec, kib in series)
                f.write("\n\n")
        png = os.path.join(out, name + ".png")
        plots = [p.replace(" with linespoints ", " with lines ")
                 for p in line_plots(cols, lambda i, c: f"'{dat}' index {i} using 1:2")]
        script = [term, f"set output '{png}'",
                  f"set title \"{t.title}\\nresident memory over time, sampled every "
                  f"{progs.SAMPLE_S * 1000:.0f} ms (the run with the median peak)\"",
                  "set key outside right top", "set grid", "set xlabel 'seconds'",
                  "set ylabel 'RSS (MiB)'", "set yrange [0:*]", "plot " + ", ".join(plots)]
        draw(gnuplot, script, png, made)
    if ptests:
        cols = columns[ptests[0].key]
        peak = program_cells(ptests, cols, samples, PROGRAM_PEAK)
        rows = [t for t in ptests if (t.key, "glibc") in peak]
        if rows:
            dat = os.path.join(out, "programs.peak-rss-vs-glibc.dat")
            with open(dat, "w") as f:
                f.write("# program\t" + "\t".join(c.name for c in cols) + "\n")
                for t in rows:
                    g = peak[(t.key, "glibc")].median
                    vals = [f"{peak[(t.key, c.name)].median / g:.4f}" if (t.key, c.name) in peak
                            else "NaN" for c in cols]
                    f.write(t.key.split(".", 1)[1] + "\t" + "\t".join(vals) + "\n")
            png = os.path.join(out, "programs.peak-rss-vs-glibc.png")
            script = [term, f"set output '{png}'",
                      "set title \"real programs: peak RSS / glibc's (lower is better)\"",
                      "set key outside right top", "set grid ytics", "set datafile separator tab",
                      "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2"]
            more, plots = bar_script(cols, len(rows),
                                     lambda i, c: f"'{dat}' using {i + 2}:xtic(1)", [])
            script += more + ["plot " + ", ".join(plots)]
            draw(gnuplot, script, png, made)
    return made


PROGRAMS_HEADER = textwrap.wrap(
    "Programs: real programs under every allocator, each run in a process of its "
    "own (bench/programs/programs.py; the allocator preloaded into the program only), its "
    "peak RSS (the kernel's high-water mark), wall time and output, which must be glibc's; "
    "qslab with its default front end (SLQB) and with QSLAB_FRONT=slub, slab and slob. Then "
    "calloc's page faults (bench_calloc).", width=100)


def callgrind_ir(cmd, env, functions, timeout=1800):
    """Instructions executed inside `functions` (and what they call) by cmd
    under valgrind's callgrind (bench/profile.py, bench/fastpath_budget.py,
    the instruction counts below); RunError if the run fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        vg += [f"--toggle-collect={f}*" for f in functions]
        r = subprocess.run(vg + cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RunError(f"valgrind failed: {r.stderr.strip().splitlines()[-1:]}")
        text = open(out).read()
    m = re.search(r"^(?:totals|summary):\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


# Instructions per 64-byte malloc + free through the drop-in, counted by
# callgrind inside bench_slub's measured loops (the loop's own instructions
# included): `pair`, and `batch` of 1,000 objects.  Valgrind refuses rseq;
# qslab emulates it there (docs/design.md), so the cpu columns count the
# per-CPU fast paths.  Target (issue: fast paths): at most 40 per pair for
# the default front end with per-CPU owners.
INSTR_OBJS, INSTR_ROUNDS = 1000, 4
INSTR_FUNCTIONS = {"pair": ["alloc_free_pairs"], "batch": ["alloc_objs", "free_objs"]}
INSTR_TARGET = 40


def instruction_counts(bin_dir, allocs, fronts):
    """[(column, {test: instructions per pair})]: qslab in every front end
    (QSLAB_FRONT) and owner mode of its columns, then glibc and each peer."""
    exe = os.path.join(bin_dir, "bench_slub")
    cols = []
    for f in fronts:
        for a in (a for a in allocs if a.subject):
            env = dict(a.environ(), QSLAB_FRONT=f)
            cols.append((f"{f}/{a.short}", env))
    cols += [(a.name, a.environ()) for a in allocs if not a.subject and not a.info]
    out = []
    for name, env in cols:
        got = {}
        for test, functions in INSTR_FUNCTIONS.items():
            cmd = [exe, "--test", test, "--size", "64", "--objs", str(INSTR_OBJS),
                   "--rounds", str(INSTR_ROUNDS)]
            try:
                got[test] = callgrind_ir(cmd, env, functions) / (INSTR_OBJS * (INSTR_ROUNDS + 1))
            except (RunError, OSError, subprocess.SubprocessError) as e:
                LOG.write(f"instructions: {name} {test}: {e}")
        out.append((name, got))
    return out


def instruction_lines(counts, peers):
    """Summary lines for instruction_counts' result."""
    if not counts:
        return []
    lines = []
    for test, title in (("pair", "pair"), ("batch", f"batch of {INSTR_OBJS:,}")):
        q = [(n, c[test]) for n, c in counts if test in c and n not in peers]
        p = [(n, c[test]) for n, c in counts if test in c and n in peers]
        if not q:
            continue
        best = min(p, key=lambda x: x[1]) if p else None
        part = f"{title}: " + ", ".join(f"{n} {v:.0f}" for n, v in q)
        if best:
            part += f"; best peer {best[0]} {best[1]:.0f} ({q[0][0]}/best {q[0][1] / best[1]:.2f})"
        if test == "pair":
            part += (f"; target at most {INSTR_TARGET} for {q[0][0]}: "
                     + ("met" if q[0][1] <= INSTR_TARGET else "MISSED"))
        lines.append(part)
    return wrap("Instructions per 64-byte malloc + free (callgrind, the driver's loop included): "
                + "; ".join(lines), 0, SUMMARY_WIDTH)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", required=True, help="directory of the bench_* drivers")
    ap.add_argument("--qslab-lib", required=True, help="libqslab-malloc.so to preload")
    ap.add_argument("--quick", action="store_true", help="fewer sizes, rounds and messages")
    ap.add_argument("--smoke", action="store_true",
                    help="every test at a tiny size; fail if a run fails or does not parse")
    ap.add_argument("--rounds", type=int, help="rounds per case (default: by mode)")
    ap.add_argument("--only", help="comma-separated tests (e.g. slub.pair,prodcons; "
                                   "slub: every slub test; fronts: the front-end comparison; "
                                   "debug: the debugging costs; programs: the real programs "
                                   "and calloc, programs.sqlite: one of them; instructions: "
                                   "the fast paths' instruction counts, which slub includes)")
    ap.add_argument("--allocators", help="comma-separated allocators (default: all found)")
    ap.add_argument("--owners", help="comma-separated qslab owner modes, one qslab column each "
                                     "(QSLAB_OWNER=MODE; 'default': unset); default: "
                                     f"$QSLAB_OWNER if set, else {','.join(DEFAULT_OWNERS)}")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    args = ap.parse_args()
    # SIGTERM ends the run as an exception would: the programs' servers are
    # shut down and their scratch files removed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))

    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    params = MODES[mode]
    rounds = args.rounds or params["rounds"]
    ncpus = len(os.sched_getaffinity(0))
    if not os.path.exists(args.qslab_lib):
        sys.exit(f"run.py: {args.qslab_lib}: no such file (build the qslab_malloc target)")

    qslab_lib = os.path.abspath(args.qslab_lib)
    owners = (args.owners.split(",") if args.owners
              else [os.environ[OWNER_VAR]] if os.environ.get(OWNER_VAR) else DEFAULT_OWNERS)
    tests = build_tests(params, ncpus)
    if ncpus < 2:
        tests = [t for t in tests if t.key not in ("slub.remote", "slub.ring")]
    front_notes = []
    if not args.only or any(w.split(".")[0] == "fronts" for w in args.only.split(",")):
        more, front_notes = front_section(params, ncpus, args.bin_dir, qslab_lib, owners[0])
        tests += more
    debug_notes = []
    if not args.only or any(w.split(".")[0] == "debug" for w in args.only.split(",")):
        more, debug_notes = debug_section(params, args.bin_dir, owners[0])
        tests += more
        if not more and args.only:
            sys.exit(f"run.py: debug: {debug_notes[0]}")
    if not args.only or any(w.split(".")[0] == "defrag" for w in args.only.split(",")):
        tests += defrag_section(params, owners[0])
    program_notes, program_skipped, work = [], [], None
    only = args.only.split(",") if args.only else None
    picks_key = lambda w, k: k == w or k.startswith(w + ".")  # "slub": every slub.*
    # each qslab column of the programs section names its front end itself, so
    # the smoke under QSLAB_FRONT (make test runs the suite once per front end)
    # would run the very same programs again: once, where QSLAB_FRONT is unset
    smoke_again = args.smoke and not only and os.environ.get("QSLAB_FRONT")
    if (not only or any(w.split(".")[0] == "programs" for w in only)) and not smoke_again:
        if args.rounds:
            params = dict(params, program_rounds=args.rounds)
        work = tempfile.mkdtemp(prefix="qslab-bench-programs.")
        more, program_notes, program_skipped = programs_section(
            mode, params, args.bin_dir, work,
            lambda key: not only or any(picks_key(w, key) for w in only))
        tests += more
    if args.only:
        wanted = args.only.split(",")
        picks = lambda w, t: picks_key(w, t.key)
        unknown = [w for w in wanted if not any(picks(w, t) for t in tests)
                   and not any(picks_key(w, k) for k in program_skipped) and w != "instructions"]
        if unknown:
            sys.exit(f"run.py: unknown test {', '.join(unknown)}; tests: "
                     + ", ".join(t.key for t in tests))
        tests = [t for t in tests if any(picks(w, t) for w in wanted)]
    if tests and all(t.section == "programs" for t in tests):
        rounds = params["program_rounds"] if not args.rounds else rounds
    for t in tests:
        if t.shared:
            t.shared.members.append(t)
    allocs, missing = find_allocators(qslab_lib, owners)
    if args.allocators:
        keep = args.allocators.split(",")
        allocs = [a for a in allocs if a.subject or a.name in keep]
    os.makedirs(args.out, exist_ok=True)
    LOG.open(os.path.join(args.out, "log.txt"))
    LOG.write(f"bench/run.py {' '.join(sys.argv[1:])} ({mode} mode, {rounds} round"
              f"{'s' if rounds > 1 else ''}): " + ", ".join(a.describe() for a in allocs))
    # Seconds per run of each step, for the estimates of the time left: the
    # last run's in --out, else those of bench/timings.json (a full and a
    # quick run on the project's 2-core VM).
    timings = os.path.join(args.out, "timings.json")
    known, shipped = {}, {}
    for path, into in ((timings, known), (os.path.join(REPO, "bench", "timings.json"), shipped)):
        try:
            with open(path) as f:
                into.update(json.load(f))
        except (OSError, ValueError):
            pass
    prior = {**shipped.get(mode, {}), **known.get(mode, {})}

    load = os.getloadavg()[0]
    cpu0, t0 = cpu_times(), time.time()
    try:
        columns, samples, errors, seconds, per_run = run_suite(
            tests, allocs, rounds, args.bin_dir, args.timeout, prior)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    # instruction counts: in full mode with the slub tests (about a minute,
    # not in bench-quick's first look), or alone: --only instructions
    instr = []
    wants = args.only.split(",") if args.only else []
    if shutil.which("valgrind") and ("instructions" in wants or (
            mode == "full" and (not wants or "slub" in wants))):
        fronts = discover_fronts(args.bin_dir)[0] or ["slqb"]
        t1 = time.time()
        sys.stderr.write(f"instructions: callgrind counts the fast paths ({len(fronts)} front ends "
                         "and the peers, about a minute)\n")
        LOG.write(f"instructions: callgrind, {len(fronts)} front ends")
        instr = instruction_counts(args.bin_dir, allocs, fronts)
        sys.stderr.write(f"instructions: done in {time.time() - t1:.0f} s\n")
    elapsed, cpu1 = time.time() - t0, cpu_times()
    known[mode] = {**known.get(mode, {}), **per_run}
    with open(timings, "w") as f:
        json.dump(known, f, indent=1, sort_keys=True)
    mismatches, compared = program_mismatches(tests)
    errors += mismatches

    report = [f"qslab benchmark suite ({mode} mode): qslab {allocs[0].version}",
              f"machine: {machine()}",
              f"date:    {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"run took {elapsed:.0f} s ("
              + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()) + ")"]
    if cpu0 and cpu1 and cpu1[2] > cpu0[2]:
        steal = (cpu1[1] - cpu0[1]) / (cpu1[2] - cpu0[2]) * 100
        report.append(f"noise:   load average {load:.2f} before the run; {steal:.1f}% of CPU "
                      "time stolen by the hypervisor during it")
    report.append("allocators: " + ", ".join(a.describe() for a in allocs))
    if missing:
        report.append("missing:    " + ", ".join(f"{n} (Debian package {p})" for n, p in missing)
                      + " -- scripts/install-peers installs them")
    subjects = [a for a in allocs if a.subject]
    report.append(f"method: each (test, case, allocator) in its own process (LD_PRELOAD; "
                  "lastwrite: every allocator in one process), "
                  f"{rounds} interleaved round{'s' if rounds > 1 else ''}; "
                  f"medians; ratio q/peer = {subjects[0].name}/peer"
                  + "".join(f", {a.short}/{subjects[0].short} = {a.name}/{subjects[0].name}"
                            for a in subjects[1:])
                  + "; spread = half the range over the rounds, relative, widest of the row")
    header_len = len(report)
    found = []  # the targets' verdicts, for the summary table
    peer_tests = [t for t in tests if not t.section]  # the front ends have tables only
    if peer_tests:
        for i in range(len(subjects)):
            report.append("")
            report += summary(peer_tests, columns, samples, i)
        report.append("")
        report += targets(peer_tests, columns, samples, found)

    fronts_started = debug_started = programs_started = defrag_started = False
    for t, test in enumerate(tests, 1):
        if test.section == "programs":  # the section prints its tables together
            if not programs_started:
                programs_started = True
                report += programs_report(tests, columns, samples, str(t), program_notes,
                                          mismatches, compared, found)
            continue
        if test.section == "defrag" and not defrag_started:
            defrag_started = True
            report += [""] + DEFRAG_HEADER
            report += defrag_target(test, columns, samples)
        if test.section == "fronts" and not fronts_started:
            fronts_started = True
            report += [""] + FRONTS_HEADER + [f"   {n}" for n in front_notes]
        if test.section == "debug":  # one table for the whole section
            if not debug_started:
                debug_started = True
                report += [""] + DEBUG_HEADER + [f"   {n}" for n in debug_notes] + [""]
                report += debug_table([x for x in tests if x.section == "debug"], columns,
                                      samples, f"{t}.")
            continue
        for i, metric in enumerate(test.metrics):
            number = f"{t}{'abc'[i] if len(test.metrics) > 1 else ''}."
            report.append("")
            report += table(test, metric, columns[test.key], samples, number)

    if debug_notes and not debug_started:  # the section could not run
        report += [""] + DEBUG_HEADER + [f"   {n}" for n in debug_notes]
    if program_notes and not programs_started:  # nothing of the section could run
        report += [""] + PROGRAMS_HEADER + [f"   {n}" for n in program_notes]

    if errors:
        report += ["", f"{len(errors)} run(s) failed:"] + [f"  {e}" for e in errors]

    write_csvs(args.out, tests, columns, samples)
    if any(t.program for t in tests):
        write_program_series(args.out, tests)
    plots = os.path.join(args.out, "plots")
    made, note = (([], "plots: not drawn") if (args.no_plots or args.smoke)
                  else plot(plots, tests, columns, samples))
    report += ["", f"CSV: {os.path.join(args.out, 'results.csv')} (medians), samples.csv "
                   f"(every run); {note}; log of every run: {os.path.join(args.out, 'log.txt')}"]

    # The summary table: first in the report, and all the terminal shows.
    rows = summary_rows(peer_tests, columns, samples, found)
    rows += program_summary_rows(tests, columns, samples, found)
    q = allocs[0].name
    short = [f"qslab benchmark summary ({mode} mode, {rounds} round{'s' if rounds > 1 else ''}, "
             f"{fmt_secs(elapsed)}): qslab {allocs[0].version}; {machine()}"]
    peers = [a.name for a in allocs if not a.subject]
    if rows:
        short += wrap(f"{q} against the best of {', '.join(peers)}"
                      + (f" ({', '.join(n for n, _ in missing)}: not installed)" if missing
                         else "")
                      + "; geometric means over the sizes or cases; ratio = "
                      f"{q} / best peer (↓ lower is better, ↑ higher); thr/cpu = "
                      f"{subjects[1].name if len(subjects) > 1 else '-'} / {q}; target met or "
                      "MISSED, else ahead/tie/behind (±5%)", 0, SUMMARY_WIDTH)
        short += summary_table(q, rows)
    short += front_summary(tests, columns, samples)
    short += debug_summary(tests, columns, samples)
    short += instruction_lines(instr, [a.name for a in allocs if not a.subject])
    if errors:
        short += [f"{len(errors)} run(s) failed (listed in the report); the first: "
                  + errors[0]][:1]
        short[-1] = short[-1][:SUMMARY_WIDTH * 2]
    rel = lambda path: os.path.relpath(path) if not os.path.relpath(path).startswith("..") \
        else path
    short.append(f"Full report: {rel(os.path.join(args.out, 'report.txt'))}; plots: "
                 + (f"{rel(plots)}/ ({len(made)} PNG)" if "PNG files" in note
                    else note.split(": ", 1)[1])
                 + f"; log: {rel(os.path.join(args.out, 'log.txt'))}")
    report[header_len:header_len] = [""] + short[1:-1]
    text = "\n".join(report) + "\n"
    with open(os.path.join(args.out, "report.txt"), "w") as f:
        f.write(text)
    sys.stdout.write("\n".join(short) + "\n")

    if args.smoke:
        expected = sum(len(t.cases) * len(columns[t.key]) for t in tests) * rounds
        got = sum(len(v) for v in samples.values())
        print(f"smoke: {got} passed, {expected - got} failed")
        return 0 if got == expected and not errors else 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
