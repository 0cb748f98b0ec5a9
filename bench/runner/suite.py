"""bench/runner/suite.py - what the suite measures: the tests, their cases
and metrics, and the sizes and lengths of each mode (full, quick, smoke).

Metric, Case and Test describe a table; build_tests builds the tests of qslab
against the peers (slub.*, prodcons, scale, idle, giveback, cache, lastwrite,
churn).  The sections of qslab alone build their own tests (fronts.py,
debugcost.py, defrag.py, programs_section.py) from the same mode parameters
(MODES).
"""

from .allocators import Contender


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
# Quick: 64 B and 1 KiB, hackbench's and prodcons's messages halved: at four
# sizes hackbench is half of bench_fronts's time, and SLOB's batches at 4 KiB
# (some 80,000 cycles an object) much of the rest (docs/benchmarks.md,
# "Quick mode").
FRONTS_QUICK = dict(front_sizes=[64, 1024], hb_groups=2, hb_senders=4,
                    hb_receivers=4, hb_loops=2000, hb_rounds=3, front_msgs=25000)
FRONTS_SMOKE = dict(front_sizes=[64], hb_groups=1, hb_senders=2, hb_receivers=2, hb_loops=50,
                    hb_rounds=1, front_msgs=2000)
# The debugging costs: bench_debug's object sizes and its rounds inside a
# process (every configuration twice per round, a warm-up and a measured
# run; the whole process takes about 1.5 s in full mode on the 2-core VM).
DEBUG_FULL = dict(debug_sizes=[64, 1024], debug_rounds=9)
DEBUG_QUICK = dict(debug_sizes=[64, 1024], debug_rounds=3)
DEBUG_SMOKE = dict(debug_sizes=[64, 1024], debug_rounds=1)

# Cooperative defragmentation: the key-value cache's entries (bench_defrag,
# examples/kvcache.c), of which 90% are deleted before the shrink.
DEFRAG_FULL = dict(defrag_entries=2000000)
DEFRAG_QUICK = dict(defrag_entries=500000)
DEFRAG_SMOKE = dict(defrag_entries=20000)

# Sizes and lengths per mode.  Full: the seed tables' sizes and lengths.
# Quick (make bench-quick's first look, about 2 minutes in one round on the
# 2-vCPU VM): every test, at fewer sizes or shorter; no 16 KiB (10,000
# objects of it are 160 MiB a thread to fault in: over a third of the slub
# tests' time), half the messages and operations; the programs smaller and
# without the qslab-slub and qslab-slab columns (the front ends' section
# compares those).  docs/benchmarks.md, "Quick mode", argues each cut.
MODES = {
    "full": dict(rounds=7, sizes=[8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
                 objs=10000, inner=5, msgs=300000, ops=3000000, idle_threads=1000,
                 mib=256, wait_ms=2000, cache_objs=10000, inproc_rounds=21,
                 churn_ops=16000000, program_rounds=3, calloc_blocks=100000,
                 program_fronts=["slub", "slab", "slob"],
                 **FRONTS_FULL, **DEBUG_FULL, **DEFRAG_FULL),
    "quick": dict(rounds=3, sizes=[8, 64, 256, 1024, 4096],
                  objs=10000, inner=3, msgs=50000, ops=500000, idle_threads=1000,
                  mib=32, wait_ms=2000, cache_objs=10000, inproc_rounds=21,
                  churn_ops=3000000, program_rounds=1, calloc_blocks=100000,
                  program_fronts=["slob"],
                  **FRONTS_QUICK, **DEBUG_QUICK, **DEFRAG_QUICK),
    "smoke": dict(rounds=1, sizes=[64, 4096], objs=200, inner=1, msgs=2000, ops=20000,
                  idle_threads=20, mib=2, wait_ms=500, cache_objs=200, inproc_rounds=3,
                  churn_ops=32000, program_rounds=1, calloc_blocks=1000,
                  program_fronts=["slub", "slab", "slob"],
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

    # Appended after churn, so the numbers above stay.
    tests.append(Test(
        "phases", f"threads take {n:,} blocks each, a size each (256 B, 1 KiB, ...), then free "
                  f"them, in rounds started together; {m['ops']:,} ops a thread",
        "(not from the 2009 thread) slub_test's batch on all CPUs, each CPU in a size class "
        "of its own slab order: what one thread frees, another's growth may give back",
        "threads",
        [Case(f"{t} threads", ["--mode", "phases", "--threads", str(t), "--objs", str(n),
                               "--ops", str(m["ops"])], t)
         for t in sorted({2, ncpus, 2 * ncpus})],
        [Metric("ops_per_s", "operations per second (all threads)", "Mop/s", False,
                scale=1e-6, short="Mops/s")],
        "the threads of a program in phases, each with buffers or records of its own size"))
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
