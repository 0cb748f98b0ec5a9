"""bench/runner/plots.py - the PNGs of plots/ (gnuplot): one per table, lines
over size or threads (the values, and under them each column over qslab's),
else clustered bars, every column in the same style in every plot; and the
programs section's plots (RSS over time per program, peak RSS against
glibc's).
"""

import functools
import math
import os
import shutil
import subprocess

from .execute import LOG
from .programs_section import PROGRAM_PEAK, program_cells, progs
from .tables import cell


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


RATIO_CLIP = 8  # the ratio panel shows ratios from 1/8 to 8, names those beyond


def ratio_panels(cols, dat, values, xlabel):
    """The lines of a numeric table in two panels sharing the x axis: the
    values (a log scale when they span decades), and below, each column
    over the first (qslab's primary) case by case, where lines a log scale
    of the values draws on top of each other come apart.  The script's
    lines from `set multiplot` on."""
    q = cols[0].name
    ratios = {}  # column name -> its ratios to the first column
    for k in range(0, len(values), len(cols)):
        for i in range(1, len(cols)):
            a, b = values[k], values[k + i]
            if a and b and a > 0 and b > 0:
                ratios.setdefault(cols[i].name, []).append(b / a)
    # the panels' plot areas aligned: the same margins, the key beside the top one
    margins = ["set lmargin at screen 0.09", "set rmargin at screen 0.80"]
    # y fitted to the values (a log scale would round out to whole decades)
    top = margins + ["set multiplot", "set origin 0,0.34", "set size 1,0.66",
                     "set bmargin 1", "set format x ''", "set autoscale yfix",
                     "set offsets graph 0.03, graph 0.03, graph 0.06, graph 0.06"]
    if spans_decades(values):
        top += ["set logscale y", "set grid mytics"]
    top.append("plot " + ", ".join(line_plots(cols, lambda i, c: f"'{dat}' using 2:{i + 3}")))
    bottom = ["unset title", "unset logscale y", "unset grid", "set grid ytics", "unset key",
              "set origin 0,0", "set size 1,0.36", "set tmargin 0.5", "set bmargin 3.5",
              "set format x '%g'", f"set xlabel '{xlabel}'",
              f"set ylabel '/ {q}'", "set ytics nomirror",
              "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#555555'"]
    # the ratios near 1 are the point: the panel fits those within
    # RATIO_CLIP each way, and names the columns that go further
    inside = [r for rs in ratios.values() for r in rs
              if 1 / RATIO_CLIP <= r <= RATIO_CLIP] + [1.0]
    lo, hi = min(inside), max(inside)
    if hi / lo > 4:
        tics = [2.0 ** e for e in range(-3, 4) if lo / 1.15 <= 2.0 ** e <= hi * 1.15]
        bottom += ["set logscale y", f"set yrange [{lo / 1.15:g}:{hi * 1.15:g}]",
                   "set ytics (" + ", ".join(f"'{t:g}' {t:g}" if t >= 1 else
                                             f"'1/{1 / t:g}' {t:g}" for t in tics) + ")"]
    else:
        pad = (hi - lo) * 0.08 or 0.05
        bottom += [f"set yrange [{lo - pad:g}:{hi + pad:g}]"]
    off = [f"{n} {max(rs):.0f}x" if max(rs) > RATIO_CLIP else f"{n} 1/{1 / min(rs):.0f}"
           for n, rs in ratios.items() if max(rs) > RATIO_CLIP or min(rs) < 1 / RATIO_CLIP]
    if off:
        bottom.append(f"set label 1 'off the scale: {', '.join(off)}' at graph 0.01, graph 0.92 "
                      "front font ',9'")
    terms = line_plots(cols, lambda i, c: f"'{dat}' using 2:(column({i + 3})/column(3))")
    bottom.append("plot " + ", ".join(t for t in terms if not t.startswith("keyentry")))
    return top + bottom + ["unset multiplot"]


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
    term = ("set terminal pngcairo size 900,{h} font ',10' noenhanced"
            if has_pngcairo(gnuplot) else "set terminal png size 900,{h} noenhanced")
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
                term.format(h=660 if numeric else 500),
                f"set output '{png}'",
                f"set title \"{test.title}\\n{m.describe()}\"",
                "set key outside right top", "set grid ytics",
                f"set ylabel '{m.unit}'", "set datafile separator tab",
            ]
            if numeric:
                sized = test.row_title in ("size", "data size")
                xlabel = "object size (bytes)" if sized else "threads"
                xs = [c.x for c in test.cases]
                if min(xs) > 0 and max(xs) / min(xs) >= 4:
                    script += ["set logscale x 2"]
                script += ["set offsets graph 0.03, graph 0.03, 0, 0"]  # end points visible
                script += ratio_panels(cols, dat, values, xlabel)
            else:
                more, plots = bar_script(cols, len(test.cases),
                                         lambda i, c: f"'{dat}' using {i + 3}:xtic(1)", values)
                script += more + ["set xtics font ',9'"]
                if len(test.cases) > 6:  # long row labels (the front ends' memory table)
                    script += ["set xtics rotate by -40 font ',8'", "set bmargin 9"]
                script.append("plot " + ", ".join(plots))
            draw(gnuplot, script, png, made)
    made += plot_programs(out, tests, columns, samples, gnuplot, term.format(h=500))
    return made, f"plots: {len(made)} PNG files in {out}"


@functools.lru_cache(maxsize=None)
def has_pngcairo(gnuplot):
    r = subprocess.run([gnuplot, "-e", "set terminal"], capture_output=True, text=True)
    return "pngcairo" in r.stdout + r.stderr


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
