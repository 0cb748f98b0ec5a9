"""bench/runner/tables.py - the numbers of the report and its tables: a cell's
median and spread over the rounds, the ratios of qslab to each peer and to
the best peer of a row, a test's table per metric, the per-table summary of
where qslab is best, tied or behind, and the formatting helpers the other
sections' tables share (grid, wrap, fmt_num).
"""

import math
import statistics
import textwrap


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
