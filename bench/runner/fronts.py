"""bench/runner/fronts.py - the front-end comparison (fronts.*): qslab's front
ends (SLQB, SLUB, SLAB, SLOB) against each other, the seeds' argument rerun.

bench_fronts runs every front end in one process through the object-cache
API (the slub_test patterns, a hackbench-like test, memory): SharedRun is
that process, which feeds several tests per round.  bench_prodcons runs
under the drop-in once per front end (QSLAB_FRONT), and for SLUB once more
with the page-allocator pass-through (QSLAB_TUNE), when qslab accepts the
tune.  Also the section's header and its line of the summary.
"""

import os
import subprocess
import textwrap
import time

from .allocators import Contender, OWNER_VAR, qslab_version, run_env
from .execute import LOG, RunError, exit_error, result_words
from .suite import Case, Metric, Test, prodcons_cases
from .tables import cell, geomean, wrap
from .targets import SUMMARY_WIDTH


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
