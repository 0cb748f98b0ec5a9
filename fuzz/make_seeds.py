#!/usr/bin/env python3
"""Write the hand-made seeds of fuzz/corpus/ops and fuzz/corpus/misuse.

Each seed is a small input that exercises one operation (or one misuse)
the way fuzz_ops.c and fuzz_misuse.c decode it; the fuzzer mutates from
there.  Seeds are named "seed-<what>"; inputs the fuzzer found and that
were kept (minimised) are named "found-<what>" and are not touched here.

    python3 fuzz/make_seeds.py            # rewrite the seed-* files
    python3 fuzz/make_seeds.py --check    # exit 1 if they differ from the files
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- fuzz_ops.c: byte 0 = threads - 1; records [op | thread << 5, a, b, c] ----
(CREATE, ALLOC, ALLOC_NODE, FREE, MALLOC, CALLOC, REALLOC, ALIGNED, MALLOC_NODE, SHRINK, TRIM,
 TUNE, DESTROY, VALIDATE, HANDOFF, RESPAWN, CHECK, QUERY, REPORT, BULK, FREE_SLOT) = range(21)

# TUNE attributes (fuzz_ops.c attr_names) and targets (a % 16: 0-7 a cache
# slot, 8-13 kmalloc-8/64/192/1024/4096/32768, 14 "*", 15 no such cache);
# values: c < 128 the number c (order: c % 8), else special_values[c - 128]
A = dict(order=0, hiwater=1, freebatch=2, empty_limit=3, empty_decay_ms=4, stash_bytes=5,
         cpu_partial=6, min_partial=7, pass_through=8, limit=9, batchcount=10, shared=11,
         front=12, bogus=13, empty=14, debug=15, owner_budget=16)
SPECIAL = ["0", "1", "2", "3", "4", "5", "7", "8", "14", "15", "63", "64", "65", "1000", "32768",
           "32769", "1048576", "1048577", "3600000", "3600001", "67108864", "67108865",
           "4294967295", "4294967296", "999999999999", "9999999999999", "", "-1", "+1", "x",
           "12x", " 3", "slqb", "slub", "slab", "slob", "debug", "SLUB"]


def sv(s):
    return 128 + SPECIAL.index(s)


def r(op, a=0, b=0, c=0, t=0):
    return bytes([op | t << 5, a, b, c])


def create(slot=0, size_idx=9, align_flags=0, c_bits=0):
    """size_idx: fuzz_ops.c cache_sizes[a % 36] (9: 64 bytes); c bit 0: ctor
    (then a % 10 picks the ctor size), bits 1-2 a size delta, bits 5-7 the slot."""
    return r(CREATE, size_idx, align_flags, c_bits | slot << 5)


def ops_seeds():
    s = {}
    base = create()
    s["create-alloc-free"] = bytes([0]) + base + r(ALLOC, 0, 0, 3) + r(FREE, 0, 0, 3) + r(VALIDATE)
    s["create-each-size"] = bytes([0]) + b"".join(
        create(k % 8, k) + r(BULK, k % 8, 4, k % 4) + r(DESTROY, k % 8) for k in range(36))
    s["ctor-caches"] = bytes([0]) + b"".join(
        create(k % 8, k, 0, 1) + r(ALLOC, k % 8, 0, 3) + r(FREE, 0, 0, 0xf3) for k in range(10))
    s["align-hwcache"] = bytes([0]) + b"".join(
        create(k, 3 + 2 * k, (k & 7) | 8) + r(ALLOC, k, 0, 3) for k in range(8)) + r(QUERY)
    s["debug-flags"] = bytes([0]) + b"".join(
        create(k, 5 + k, 0x80 | k << 4, k & 1) + r(BULK, k, 10, k % 4) for k in range(8)) + r(VALIDATE)
    s["create-invalid"] = bytes([0]) + b"".join(r(CREATE, k, 0, 0x1f) for k in range(7))
    s["alloc-node"] = bytes([0]) + base + b"".join(r(ALLOC_NODE, 0, k) for k in range(12))
    s["malloc-sizes"] = bytes([0]) + b"".join(r(MALLOC, a, b, 0) for a in range(8) for b in (0, 1, 7, 100, 255))
    s["malloc-large"] = bytes([0]) + r(MALLOC, 0xff, 3, 0) + r(REALLOC, 0, 0xff, 9) + r(REALLOC, 0, 0, 40)
    s["calloc"] = bytes([0]) + b"".join(r(CALLOC, a, 77, c) for a in (0, 3, 5, 7) for c in (1, 2, 4, 0xf9))
    s["realloc-grow-shrink"] = bytes([0]) + r(MALLOC, 0, 100, 0) + b"".join(
        r(REALLOC, 0, a, b) for a, b in ((3, 200), (0, 10), (5, 20), (4, 99), (0, 0), (2, 50)))
    s["aligned-alloc"] = bytes([0]) + b"".join(r(ALIGNED, k, 0, 100 + k) for k in range(20))
    s["malloc-node"] = bytes([0]) + b"".join(r(MALLOC_NODE, 0, 64, k) for k in range(12))
    s["shrink-trim"] = bytes([0]) + base + r(BULK, 0, 200, 2) + r(SHRINK, 0) + r(MALLOC, 0, 50, 3) \
        + r(FREE, 0, 0, 1) + r(SHRINK, 0x80) + r(TRIM) + r(VALIDATE)
    s["destroy-busy"] = bytes([0]) + base + r(ALLOC, 0) + r(DESTROY, 0) + r(FREE, 0) + r(DESTROY, 0) \
        + r(DESTROY, 0x10, 3)
    s["tune-valid"] = bytes([0]) + base + b"".join(
        r(TUNE, 0, A[n], v) for n, v in (("freebatch", 1), ("hiwater", 2), ("order", 3),
                                         ("empty_limit", 0), ("empty_decay_ms", 5),
                                         ("stash_bytes", 0), ("cpu_partial", 4), ("min_partial", 1),
                                         ("pass_through", 1), ("batchcount", 1), ("limit", 2),
                                         ("shared", 0))) + r(BULK, 0, 50, 0) + r(VALIDATE)
    s["tune-invalid"] = bytes([0]) + base + b"".join(
        r(TUNE, 0, A[n], sv(v)) for n, v in (("order", "15"), ("hiwater", "1048577"),
                                             ("freebatch", "0"), ("empty_limit", "x"),
                                             ("empty_decay_ms", "3600001"), ("stash_bytes", "67108865"),
                                             ("pass_through", "2"), ("limit", "32769"),
                                             ("shared", "65"), ("order", ""), ("hiwater", "-1"),
                                             ("order", "9999999999999"), ("bogus", "1"), ("empty", "1")))
    s["tune-front"] = bytes([0]) + b"".join(
        create(k, 9) + r(TUNE, k, A["front"], sv(f)) + r(ALLOC, k) + r(TUNE, k, A["front"], sv(f))
        for k, f in enumerate(("slqb", "slub", "slab", "slob", "debug", "4", "x", "2")))
    s["tune-kmalloc"] = bytes([0]) + b"".join(
        r(TUNE, 8 + k, A["freebatch"], 1) + r(TUNE, 8 + k, A["hiwater"], 4) + r(MALLOC, 3, (8 << k) & 0xff, 3)
        + r(TUNE, 8 + k, A["order"], sv("14")) for k in range(6)) + r(TUNE, 14, A["empty_decay_ms"], 0) \
        + r(TUNE, 15, A["order"], 1)
    s["tune-budget"] = bytes([2]) + b"".join(r(MALLOC, 3, 40 * t, 3, t) for t in range(3)) \
        + r(TUNE, 14, A["owner_budget"], sv("32768")) + r(TUNE, 8, A["owner_budget"], sv("1048576")) \
        + r(TUNE, 14, A["owner_budget"], sv("1000")) + b"".join(
            r(MALLOC, 5, 100 + t, 3, t) + r(FREE, 0, 0, 0xf1, t) for t in range(3)) \
        + r(TUNE, 14, A["owner_budget"], sv("67108864")) + r(VALIDATE)
    s["handoff-3threads"] = bytes([2]) + base + r(BULK, 0, 30, 3, 1) + r(BULK, 0, 30, 3, 2) \
        + r(HANDOFF, 0, 0, 0x25, 1) + r(HANDOFF, 0, 0, 0x25, 2) + r(CHECK, 0, 0, 0xff, 0) \
        + r(FREE, 0, 0, 0xf1, 0) + r(VALIDATE)
    s["threads-same-cache"] = bytes([2]) + base + b"".join(
        r(BULK, 0, 20 + t, t, t) + r(MALLOC, 0, 40 * t, 3, t) for t in range(3)) + r(VALIDATE)
    s["respawn"] = bytes([1]) + base + r(BULK, 0, 40, 3, 1) + r(RESPAWN, 0) + r(FREE, 0, 0, 0xf2, 1) \
        + r(VALIDATE)
    s["report"] = bytes([0]) + base + r(ALLOC, 0) + r(REPORT) + r(QUERY) + r(CHECK)
    s["free-slot"] = bytes([1]) + base + create(1, 20) + r(BULK, 0, 9, 3) + r(BULK, 1, 9, 3, 1) \
        + r(MALLOC, 1, 90, 3) + r(FREE_SLOT, 1) + r(FREE_SLOT, 2, 0, 0, 1) + r(FREE_SLOT, 0) + r(VALIDATE)
    s["bulk-orders"] = bytes([0]) + base + b"".join(r(BULK, 0, 255, c) for c in range(4)) + r(VALIDATE)
    return s


# ---- fuzz_misuse.c: bytes 0-1 = fronts (3 bits per cache: 0 default, 1 slqb,
# 2 slub, 3 slab, 4 slob); records [op | drain << 5, a, b, c] ----
(M_ALLOC, M_FREE, M_SHRINK, M_TUNE, M_THREAD_ALLOC, M_THREAD_FREE, DF_IMMEDIATE, DF_DELAYED,
 DF_REMOTE, DF_THREAD, DF_SHRUNK, INTERIOR, FOREIGN, WRONG_CACHE, TAIL, SLOT, DF_LARGE,
 M_CHECK) = range(18)
FRONTS = dict(default=0, slqb=1, slub=2, slab=3, slob=4)


def fronts(name):
    f = FRONTS[name]
    v = sum(f << (3 * k) for k in range(5))
    return bytes([v & 0xff, v >> 8])


def m(op, a=0, b=0, c=0, drain=0):
    return bytes([op | drain << 5, a, b, c])


def misuse_seeds():
    s = {}
    live = m(M_ALLOC, 0, 0, 7) + m(M_ALLOC, 2, 0, 3) + m(M_ALLOC, 5, 2, 3)
    body = {
        "df-immediate": b"".join(m(DF_IMMEDIATE, k, k, k % 4) for k in range(6)),
        "df-delayed": live + m(DF_DELAYED, 0, 0, 8) + m(DF_DELAYED, 0x40, 0, 40) + m(DF_DELAYED, 0x85, 1, 4),
        "df-remote": live + b"".join(m(DF_REMOTE, k, 3) for k in range(6)),
        "df-shrunk": b"".join(m(DF_SHRUNK, k, 100, k) for k in range(5)),
        "interior": live + b"".join(m(INTERIOR, k, k, 7 + k) for k in range(12)),
        "foreign": b"".join(m(FOREIGN, k, 3, c) for k in range(9) for c in (0, 1)),
        "wrong-cache": b"".join(m(WRONG_CACHE, k, k + 1, 2) for k in range(6)),
        "tail": m(TAIL, 0, 0, 0) + m(TAIL, 0, 1, 1),
        "slot": b"".join(m(SLOT, k, 0, k & 1) for k in range(5)),
        "df-large": m(DF_LARGE, 0, 1),
        "legit-threads": live + m(M_THREAD_ALLOC, 0, 20) + m(M_THREAD_ALLOC, 5, 20) + m(M_THREAD_FREE, 0, 30)
        + m(M_TUNE, 0, 2, 1) + m(M_SHRINK, 0) + m(M_SHRINK, 0x80) + m(M_FREE, 0, 0, 0xf0) + m(M_CHECK),
    }
    for name, b in body.items():
        s[name] = fronts("default") + b
    # every misuse once under each front end
    every = live + m(DF_IMMEDIATE, 0) + m(DF_DELAYED, 0, 0, 8) + m(DF_REMOTE, 1) + m(DF_SHRUNK, 3, 50) \
        + m(INTERIOR, 0, 0, 9) + m(FOREIGN, 2) + m(WRONG_CACHE, 0, 1) + m(TAIL) + m(SLOT, 1) + m(M_CHECK)
    for f in ("slqb", "slub", "slab", "slob"):
        s["every-" + f] = fronts(f) + every
    return s


def main():
    check = "--check" in sys.argv
    differ = 0
    for sub, seeds in (("ops", ops_seeds()), ("misuse", misuse_seeds())):
        d = os.path.join(HERE, "corpus", sub)
        os.makedirs(d, exist_ok=True)
        for name, data in sorted(seeds.items()):
            path = os.path.join(d, "seed-" + name)
            old = open(path, "rb").read() if os.path.exists(path) else None
            if old == data:
                continue
            differ += 1
            if check:
                print("differs: " + path)
            else:
                with open(path, "wb") as f:
                    f.write(data)
    if check and differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
