#!/usr/bin/env bash
# real_python: alloc_heavy.py (dicts, lists, strings, bytearrays from 4
# threads, objects freed by other threads) prints the same on glibc and under
# qslab-run.  PYTHONMALLOC=malloc sends every Python object through malloc
# (pymalloc would serve the small ones from its own arenas); a second run
# keeps pymalloc, as Python normally runs.
source "$(dirname "$0")/common.sh"
find_python
workdir python
check_preload_active
export PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
PYTHONMALLOC=malloc compare_run "python3 alloc_heavy.py (PYTHONMALLOC=malloc)" "$PYTHON" "$PRELOAD_SRC/alloc_heavy.py"
compare_run "python3 alloc_heavy.py (pymalloc)" "$PYTHON" "$PRELOAD_SRC/alloc_heavy.py" 1
pass "python3 output identical on glibc and qslab ($(head -1 "$WORK/glibc.out"))"
