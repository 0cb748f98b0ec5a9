"""alloc_heavy.py - a Python workload that allocates heavily from 4 threads.

Each thread builds and tears down dicts, lists, strings, bytes and bytearrays
from its own seeded generator, hands some objects to the next thread through
a queue (so they are freed by another thread), and returns a digest.  The
output depends only on the seeds: real_python.sh runs it on glibc and under qslab-run
(with PYTHONMALLOC=malloc, so that every object goes through malloc) and
compares.  Set membership and dict order are only printed sorted or in
insertion order; no hash() or id() value is printed.
"""
import queue
import random
import sys
import threading
import zlib

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
PATTERN = bytes(range(256)) * 16
NTHREADS = 4


def work(tid, inbox, outbox, results):
    rng = random.Random(1000 + tid)
    crc = 0
    counts = {"dict": 0, "list": 0, "str": 0, "bytes": 0, "received": 0}
    for rnd in range(ROUNDS):
        # dicts of strings and tuples, grown then deleted in random order
        d = {}
        for i in range(4000):
            k = "k%d-%d" % (rng.randrange(20000), i % 7)
            d[k] = (i, "v" * rng.randrange(1, 64), [i] * rng.randrange(0, 5))
        keys = list(d)
        rng.shuffle(keys)
        for k in keys[: len(keys) // 2]:
            del d[k]
        crc = zlib.crc32(repr(sorted(d.items())[:50]).encode(), crc)
        counts["dict"] += len(d)

        # lists of lists, sorted and sliced
        ll = [[rng.random() for _ in range(rng.randrange(1, 40))] for _ in range(1000)]
        ll.sort(key=len)
        flat = [x for sub in ll[::3] for x in sub]
        crc = zlib.crc32(repr(round(sum(flat), 6)).encode(), crc)
        counts["list"] += len(flat)

        # strings: joins, splits, replaces, formatting
        words = ["".join(chr(97 + rng.randrange(26)) for _ in range(rng.randrange(1, 12)))
                 for _ in range(3000)]
        text = " ".join(words)
        text2 = text.upper().replace("A", "<a>").replace(" ", "\n")
        parts = text2.split("\n")
        crc = zlib.crc32(text2.encode(), crc)
        counts["str"] += len(parts)

        # bytes and bytearrays of all sizes, resized in place
        ba = bytearray()
        for i in range(400):
            start = (i * 7) & 0xFF
            chunk = PATTERN[start:start + rng.randrange(0, 3000)]
            ba += chunk
            if len(ba) > 200000:
                del ba[: rng.randrange(1, len(ba))]
        big = bytes(rng.randrange(1, 2_000_000))  # large block
        crc = zlib.crc32(bytes(ba), crc)
        crc = zlib.crc32(big[:1000], crc)
        counts["bytes"] += len(ba) + len(big)
        del big

        # hand objects to the next thread, free what the previous one sent
        outbox.put([{"r": rnd, "t": tid, "s": "x" * rng.randrange(1, 5000)} for _ in range(200)])
        got = inbox.get()
        counts["received"] += sum(len(o["s"]) for o in got)
        del got
    results[tid] = (crc, counts)


def main():
    queues = [queue.Queue() for _ in range(NTHREADS)]
    results = [None] * NTHREADS
    threads = [threading.Thread(target=work,
                                args=(t, queues[t], queues[(t + 1) % NTHREADS], results))
               for t in range(NTHREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for tid, (crc, counts) in enumerate(results):
        print("thread %d crc=%08x %s" % (tid, crc, " ".join("%s=%d" % kv for kv in sorted(counts.items()))))
    print("done")


if __name__ == "__main__":
    main()
