"""bench/runner/targets.py - the targets and their verdicts, and the summary
table the terminal shows at the end.

targets() measures the suite's targets against the peers (met or MISSED,
never asserted) and records each verdict as a Target; summary_rows turns
every test and metric into one row (qslab, the best peer, their ratio, the
other owner mode's ratio, the target's verdict or ahead/tie/behind), which
summary_table aligns.
"""


from .tables import TIE, against_best, cell, fmt_num, geomean, is_peer, ratio, wrap


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
