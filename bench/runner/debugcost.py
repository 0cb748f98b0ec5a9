"""bench/runner/debugcost.py - the debugging costs (debug.*): what SLUB's debug
flags (docs/debugging.md) cost a cache on the slub_test pair and batch
patterns, one CPU, against the plain cache in the same process.

bench_debug runs every configuration (its configs[] list: plain, F, Z, P,
U, FZPU, ...) in one process per round, interleaved, and prints each one's
cycles and its ratio to plain measured in the same inner round (DebugRun).
The section's one table, its header and its line of the summary.
"""

import os
import statistics
import subprocess
import textwrap

from .allocators import Contender, OWNER_VAR, qslab_version
from .execute import result_words
from .fronts import SharedRun
from .suite import Case, Metric, Test
from .tables import Cell, fmt_num, geomean, wrap
from .targets import SUMMARY_WIDTH


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
