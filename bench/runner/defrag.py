"""bench/runner/defrag.py - cooperative defragmentation (defrag.kv):
bench_defrag (examples/kvcache.c) deletes 90% of a key-value cache's entries
at random and shrinks, with and without mobility callbacks; its test, its
header and its target.
"""

import textwrap

from .allocators import Contender, OWNER_VAR, qslab_version
from .suite import Case, Metric, Test
from .tables import cell
# The target: the resident set's growth right after the shrink, at most
# this many times the live bytes (with mobility).
DEFRAG_TARGET = 1.3


DEFRAG_HEADER = textwrap.wrap(
    "Cooperative defragmentation (docs/design.md, qslab_cache_set_mobility): "
    "bench_defrag (examples/kvcache.c) loads a hash table of 64-byte entries from a qslab "
    "cache, deletes 90% at random and calls qslab_cache_shrink, with the table's mobility "
    "callbacks and without; every key is checked after.  Memory: the growth of the resident "
    "set over the program's start, as a multiple of the live bytes (entries, buckets, the "
    "bitmap of kept keys), right after the shrink (the target) and 1.5 s later (the "
    "retention rule's second: a slab that emptied after the shrink's give-back, by a "
    "remote free reaching its owner late, goes back by then).  mobility-slob: the same "
    "under the SLOB front end (QSLAB_FRONT=slob), whose pages every cache shares.  The "
    "columns run in turn, one process each.", 110)


def defrag_section(m, owner):
    """The defragmentation test: one case, a column with mobility and one without."""
    env = {OWNER_VAR: None if owner == "default" else owner}
    version = qslab_version()
    cols = [Contender("mobility", None, version, env=env, subject=True, short="mobility"),
            Contender("mobility-slob", None, version, env=dict(env, QSLAB_FRONT="slob"),
                      subject=True, short="mobility-slob"),
            Contender("no-mobility", None, version, extra_args=["--no-mobility"], env=env,
                      subject=True, short="no-mobility")]
    n = m["defrag_entries"]
    return [Test(
        "defrag.kv", f"defragmentation: {n:,} key-value entries, 90% deleted at random, "
                     "then qslab_cache_shrink",
        'the "slab defrag" series (kmem_cache_setup_defrag), issue 38', "defrag",
        [Case(f"{n:,} entries", [str(n)])],
        [Metric("after_ratio", "RSS growth / live bytes, right after the shrink", "x", True),
         Metric("settled_ratio", "RSS growth / live bytes, 1.5 s after the shrink", "x", True),
         Metric("shrink_ms", "time of qslab_cache_shrink", "ms", True)],
        "a cache whose population was mostly freed at random: every slab keeps survivors",
        contenders=lambda allocs: cols, section="defrag")]


def defrag_target(test, columns, samples):
    """The target line of the defragmentation test: every column with mobility."""
    metric, case = test.metrics[0], test.cases[0]
    got = []
    for col in columns[test.key]:
        if not col.name.startswith("mobility"):
            continue
        c = cell(samples, test, case, col, metric)
        if c is not None:
            got.append((col.name, c.median))
    if not got:
        return ["   target: not measured"]
    ok = all(v <= DEFRAG_TARGET for _, v in got)
    figures = ", ".join(f"{name} {v:.2f}x" for name, v in got)
    return [f"   target: RSS growth right after the shrink at most {DEFRAG_TARGET}x the live "
            f"bytes with mobility: {figures}, {'met' if ok else 'MISSED'}"]
