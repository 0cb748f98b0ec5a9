"""bench/runner/instructions.py - instructions per 64-byte malloc + free
through the drop-in, counted by valgrind's callgrind inside bench_slub's
measured loops, for qslab in every front end and owner mode and for each
peer; and callgrind_ir, which bench/profile.py and bench/fastpath_budget.py
use too.
"""

import os
import re
import subprocess
import tempfile

from .execute import LOG, RunError
from .tables import wrap
from .targets import SUMMARY_WIDTH


def callgrind_ir(cmd, env, functions, timeout=1800):
    """Instructions executed inside `functions` (and what they call) by cmd
    under valgrind's callgrind (bench/profile.py, bench/fastpath_budget.py,
    the instruction counts below); RunError if the run fails."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        vg += [f"--toggle-collect={f}*" for f in functions]
        r = subprocess.run(vg + cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RunError(f"valgrind failed: {r.stderr.strip().splitlines()[-1:]}")
        text = open(out).read()
    m = re.search(r"^(?:totals|summary):\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else 0


# Instructions per 64-byte malloc + free through the drop-in, counted by
# callgrind inside bench_slub's measured loops (the loop's own instructions
# included): `pair`, and `batch` of 1,000 objects.  Valgrind refuses rseq;
# qslab emulates it there (docs/design.md), so the cpu columns count the
# per-CPU fast paths.  Target (issue: fast paths): at most 40 per pair for
# the default front end with per-CPU owners.
INSTR_OBJS, INSTR_ROUNDS = 1000, 4
INSTR_FUNCTIONS = {"pair": ["alloc_free_pairs"], "batch": ["alloc_objs", "free_objs"]}
INSTR_TARGET = 40


def instruction_counts(bin_dir, allocs, fronts):
    """[(column, {test: instructions per pair})]: qslab in every front end
    (QSLAB_FRONT) and owner mode of its columns, then glibc and each peer."""
    exe = os.path.join(bin_dir, "bench_slub")
    cols = []
    for f in fronts:
        for a in (a for a in allocs if a.subject):
            env = dict(a.environ(), QSLAB_FRONT=f)
            cols.append((f"{f}/{a.short}", env))
    cols += [(a.name, a.environ()) for a in allocs if not a.subject and not a.info]
    out = []
    for name, env in cols:
        got = {}
        for test, functions in INSTR_FUNCTIONS.items():
            cmd = [exe, "--test", test, "--size", "64", "--objs", str(INSTR_OBJS),
                   "--rounds", str(INSTR_ROUNDS)]
            try:
                got[test] = callgrind_ir(cmd, env, functions) / (INSTR_OBJS * (INSTR_ROUNDS + 1))
            except (RunError, OSError, subprocess.SubprocessError) as e:
                LOG.write(f"instructions: {name} {test}: {e}")
        out.append((name, got))
    return out


def instruction_lines(counts, peers):
    """Summary lines for instruction_counts' result."""
    if not counts:
        return []
    lines = []
    for test, title in (("pair", "pair"), ("batch", f"batch of {INSTR_OBJS:,}")):
        q = [(n, c[test]) for n, c in counts if test in c and n not in peers]
        p = [(n, c[test]) for n, c in counts if test in c and n in peers]
        if not q:
            continue
        best = min(p, key=lambda x: x[1]) if p else None
        part = f"{title}: " + ", ".join(f"{n} {v:.0f}" for n, v in q)
        if best:
            part += f"; best peer {best[0]} {best[1]:.0f} ({q[0][0]}/best {q[0][1] / best[1]:.2f})"
        if test == "pair":
            part += (f"; target at most {INSTR_TARGET} for {q[0][0]}: "
                     + ("met" if q[0][1] <= INSTR_TARGET else "MISSED"))
        lines.append(part)
    return wrap("Instructions per 64-byte malloc + free (callgrind, the driver's loop included): "
                + "; ".join(lines), 0, SUMMARY_WIDTH)
