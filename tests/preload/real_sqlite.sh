#!/usr/bin/env bash
# real_sqlite: SQLite (Python's sqlite3 module) inserts 50,000 rows and runs
# ORDER BY / GROUP BY / join / window queries, UPDATE, DELETE and VACUUM with
# the same output on glibc and under qslab-run.
source "$(dirname "$0")/common.sh"
find_python
"$PYTHON" -c 'import sqlite3' 2>/dev/null ||
    fail "python3 has no sqlite3 module: install the Debian package 'python3' (its standard library, libpython3-stdlib, has it; listed in tests/preload/packages.txt)"
workdir sqlite
check_preload_active
export PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
compare_run "sqlite3" "$PYTHON" "$PRELOAD_SRC/sqlite_check.py" test.db
grep -q '^done$' "$WORK/glibc.out" || fail "sqlite_check.py did not finish"
pass "sqlite3: $(grep -c '^==' "$WORK/glibc.out") queries identical on glibc and qslab"
