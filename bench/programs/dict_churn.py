"""dict_churn.py - build and drop dicts of strings of mixed sizes.

Each generation builds a dict of ENTRIES str keys to str values of mixed
lengths (half under 64 bytes, a third 64..512, the rest 512 bytes to 8 KiB),
then deletes every other key of the previous generation's dict (holes in the
heap), and drops the oldest dict once KEEP are alive.  The value lengths of
a generation are a window of one deterministic table, moved along from one
generation to the next, so freed memory is asked back in other sizes.  The
output (entries, bytes and a CRC per generation) depends only on the
arguments: compare it between allocators.

    python3 dict_churn.py [GENERATIONS [ENTRIES [KEEP]]]
"""
import random
import sys
import zlib

GENS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
ENTRIES = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
KEEP = int(sys.argv[3]) if len(sys.argv) > 3 else 3

rng = random.Random(34)
BASE = "".join(chr(33 + rng.randrange(94)) for _ in range(16384))


def length(r):
    if r < 0.5:
        return 1 + int(r * 126)                 # 1..63
    if r < 0.83:
        return 64 + int((r - 0.5) * 1357)       # 64..511
    return 512 + int((r - 0.83) * 45176)        # 512..8191


LENGTHS = [length(rng.random()) for _ in range(1 << 16)]
OFFSETS = [rng.randrange(8192) for _ in range(1 << 16)]


def main():
    live = []
    crc = 0
    for g in range(GENS):
        d = {}
        shift = g * 7919
        for i in range(ENTRIES):
            j = (i * 40503 + shift) & 0xFFFF
            n = LENGTHS[j]
            o = OFFSETS[j]
            d["g%d:%x" % (g, i)] = BASE[o:o + n]
        if live:  # holes in the previous generation
            prev = live[-1]
            for k in list(prev)[::2]:
                del prev[k]
        live.append(d)
        if len(live) > KEEP:
            del live[0]
        total = sum(len(v) for v in d.values())
        crc = zlib.crc32(("%d %d %s" % (len(d), total, d["g%d:%x" % (g, ENTRIES // 2)][:16])).encode(), crc)
        print("gen %d entries=%d bytes=%d crc=%08x" % (g, len(d), total, crc))
    print("live %d dicts, %d entries" % (len(live), sum(len(x) for x in live)))


if __name__ == "__main__":
    main()
