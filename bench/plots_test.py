#!/usr/bin/env python3
"""bench/plots_test.py - the runner's plots (bench/runner/plots.py) drawn from
made-up medians, no driver run: a PNG per table; the lines over sizes and
threads in two panels, the values and each column over qslab's (a scale
fitted to the ratios within 1/8..8, the columns beyond named); bars for the
other tables.  The scripts gnuplot gets are checked as text, the PNGs by
their signature and height.  Skipped (exit 0, said) without gnuplot.

    python3 bench/plots_test.py
"""

import os
import shutil
import struct
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import plots  # noqa: E402
from runner.execute import LOG  # noqa: E402
from runner.suite import MODES, build_tests  # noqa: E402

FAILED = []


def check(ok, what, detail=""):
    print(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        FAILED.append(what)
        if detail:
            print("        " + str(detail)[:2000])


def png_height(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">I", head[20:24])[0]


def main():
    if not shutil.which("gnuplot"):
        print("plots_test: skipped (no gnuplot; scripts/install-deps installs it)")
        return 0
    names = ["qslab-cpu", "qslab-thread", "glibc", "jemalloc"]
    cols = [types.SimpleNamespace(name=n, subject=n.startswith("qslab")) for n in names]
    tests = [t for t in build_tests(MODES["smoke"], 2)
             if t.key in ("slub.batch", "scale", "idle")]
    # made-up medians: glibc 150x qslab-cpu's at the largest size (off the
    # ratio panel's scale), jemalloc 1.2x, qslab-thread 0.9x
    factor = {"qslab-cpu": 1.0, "qslab-thread": 0.9, "glibc": 1.5, "jemalloc": 1.2}
    samples = {}
    for t in tests:
        for j, case in enumerate(t.cases):
            for c in cols:
                f = factor[c.name]
                if c.name == "glibc" and j == len(t.cases) - 1:
                    f = 150.0
                res = {}
                for m in t.metrics:
                    for k in (m.key,) + tuple(m.split or ()):
                        res[k] = 10.0 * (j + 1) * f
                samples[(t.key, case.label, c.name)] = [res]
    tmp = tempfile.mkdtemp(prefix="qslab-plots-test.")
    try:
        LOG.open(os.path.join(tmp, "log.txt"))
        out = os.path.join(tmp, "plots")
        made, note = plots.plot(out, tests, {t.key: cols for t in tests}, samples)
        log = open(os.path.join(tmp, "log.txt")).read()
        check("gnuplot failed" not in log, "gnuplot draws every plot", log)
        want = [f"{t.key}.{m.key}".replace("_", "-") + ".png" for t in tests for m in t.metrics]
        check(sorted(made) == sorted(want), f"a PNG per table ({len(want)})", made)
        for name in want:
            numeric = name.startswith(("slub.", "scale."))
            h = png_height(os.path.join(out, name)) if name in made else None
            check(h == (660 if numeric else 500),
                  f"{name}: a PNG, {'two panels' if numeric else 'bars'}", h)

        # the two panels' script: the values' panel on a log scale (10 to
        # 3000); the ratios' fitted to those within 1/8..8 (0.9 to 6: a log
        # scale), glibc's 150x named off the scale
        values = [10, 9, 15, 60, 20, 18, 3000, 24]
        lines = plots.ratio_panels(cols, "x.dat", values, "threads")
        # the values' settings, their plot and the ratios' settings, the ratios' plot
        top, middle, ratios = "\n".join(lines).split("\nplot ")
        values_plot, bottom = middle.split("\n", 1)
        check("set logscale y" in top.splitlines(), "values spanning decades: a log scale", top)
        check("off the scale: glibc 150x" in bottom, "a ratio past 8 named off the scale",
              bottom)
        check("set yrange [0.782609:6.9]" in bottom and "'1/2' 0.5" not in bottom
              and "'4' 4" in bottom and "'8' 8" not in bottom,
              "the ratios' scale fits them, tics in powers of 2", bottom)
        check("column(5)/column(3)" in ratios and "keyentry" not in ratios,
              "the ratios are each column over the first's, without a second key", ratios)
        near = plots.ratio_panels(cols, "x.dat", [10, 9, 11, 10.5, 20, 19, 21, 20], "threads")
        near = "\n".join(near).split("\nplot ")[1].split("\n", 1)[1]
        check("set logscale y" not in near.splitlines(),
              "ratios within 4x of each other: a linear scale", near)
        check(values_plot.startswith("keyentry")
              and "title 'qslab-cpu'" in values_plot.split(",")[0]
              and values_plot.endswith("lw 3 notitle")
              and "using 2:3 " in values_plot.rsplit(",", 1)[1],
              "qslab-cpu named first in the key and drawn last", values_plot)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"plots_test: {len(FAILED)} failed" if FAILED else "plots_test: ok")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
