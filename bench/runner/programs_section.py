"""bench/runner/programs_section.py - the real programs (programs.*): Python,
sqlite3 and redis-server (bench/programs/programs.py runs them) under every
allocator, their peak RSS, wall time and output, and calloc's page faults
(bench_calloc).

The columns: qslab's first owner mode with its default front end (SLQB),
then QSLAB_FRONT=slub, slab, slob (the front ends this build has), the
hardened profile (QSLAB_HARDEN=1: qslab-hard), glibc and the peers, every
column in every round.  Every run's output must be glibc's
(program_mismatches).  The section's tables, targets, summary rows and its
RSS series (programs-rss.csv).
"""

import csv
import os
import sys
import textwrap
import time

from .allocators import REPO, Contender
from .execute import LOG
from .fronts import FRONT_VAR, discover_fronts
from .suite import Case, Metric, Test
from .tables import cell, fmt_num, geomean, grid, is_peer, median_row, table
from .targets import (MEMORY_TOLERANCE, Target, combined, gmean_or_mean, target_lines,
                      verdict)

sys.path.insert(0, os.path.join(REPO, "bench", "programs"))
import programs as progs  # noqa: E402  bench/programs/programs.py: the real programs


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
    other front end of `fronts` (the mode's program_fronts this build has),
    the hardened profile (unless not `hard`), then glibc and the peers; each
    runs in the first `rounds` rounds of the suite."""
    first = next(a for a in allocs if a.subject)
    env = {**first.env, FRONT_VAR: None}
    cols = [Contender(first.name, first.preload, first.version, env=env, subject=True,
                      short=first.short, rounds=rounds)]
    for f in fronts:
        cols.append(Contender(f"qslab-{f}", first.preload, first.version,
                              env={**env, FRONT_VAR: f}, subject=True, short=f, rounds=rounds))
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
    left_out = [f for f in fronts if f != "slqb" and f not in m["program_fronts"]]
    fronts = [f for f in m["program_fronts"] if f in fronts]
    if left_out:
        notes.append(f"{mode} mode: no {', '.join('qslab-' + f for f in left_out)} column "
                     "(the front ends' section compares them)")
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

        def judge(name, base, limit):
            """(met, missed, the worst miss) of each program's peak RSS in the
            column `name` over base(t): (the base's cell, the name the lines
            give it, or "")."""
            ok, miss, far = [], [], []
            for t in ptests:
                x, (y, who) = peak.get((t.key, name)), base(t)
                if x and y:
                    r = x.median / y.median
                    (ok if r <= limit else miss).append(
                        f"{label(t)} ({r:.2f}" + (f" vs {who})" if who else ")"))
                    if r > limit:
                        far.append((r, f"{label(t)} {r:.2f}x" + (f" {who}" if who else "")))
            return ok, miss, max(far)[1] if far else None

        def smallest(t):
            peer, best = smallest_peer(peak, t.key, cols)
            return best, peer.name if peer else ""

        ok, miss, worst = judge(q.name, smallest, PROGRAM_LIMIT)
        if ok or miss:
            target_lines(lines, f"{q.name}: each program's peak RSS at most {PROGRAM_LIMIT:.2f}x "
                         "the smallest peer's", ok, miss, "programs", found, "programs/peak",
                         worst)
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
            ok, miss, worst = judge(name, lambda t: (peak.get((t.key, ref)), ""), tol)
            if ok or miss:
                target_lines(lines, desc, ok, miss, "programs", found, f"programs/{name}", worst)

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


PROGRAMS_HEADER = textwrap.wrap(
    "Programs: real programs under every allocator, each run in a process of its "
    "own (bench/programs/programs.py; the allocator preloaded into the program only), its "
    "peak RSS (the kernel's high-water mark), wall time and output, which must be glibc's; "
    "qslab with its default front end (SLQB) and with QSLAB_FRONT=slub, slab and slob. Then "
    "calloc's page faults (bench_calloc).", width=100)


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
