"""bench/runner - the benchmark suite behind bench/run.py (make bench), one
module per part of the work:

  main.py              the command line, the tests chosen, the report and files
  loop.py              the run loop: rounds, steps, progress lines
  execute.py           one run of a driver, its result lines, the log
  allocators.py        the columns: qslab's owner modes, glibc, the peers found
  suite.py             the tests against the peers and each mode's sizes
  tables.py            cells, ratios, a test's table, the per-table summary
  targets.py           the targets' verdicts and the summary table
  plots.py             the PNGs (gnuplot)
  fronts.py            the front-end comparison (fronts.*)
  debugcost.py         the debugging costs (debug.*)
  defrag.py            cooperative defragmentation (defrag.kv)
  programs_section.py  the real programs and calloc (programs.*)
  instructions.py      the fast paths' instruction counts (callgrind)
"""
