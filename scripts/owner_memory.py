#!/usr/bin/env python3
"""owner_memory.py - memory held in qslab's per-owner and per-node structures.

On paper: for each front end (slqb, slub, slab, slob) and a set of
representative caches, the worst-case bytes each structure may hold, from the
tunables the library itself gives those caches (read by a small C probe,
scripts/owner_memory_probe.c and owner_memory_workloads.c, linked against a
build's libqslab.a), totalled for this VM, a 2-socket 128-thread machine (2
nodes x 64 CPUs) and an 8-node 1,024-CPU machine (8 x 128): the seeds' worry
about SLAB's alien-cache "crossbar" of CPUs x nodes x caches.

--check: the same model for one 256-byte cache on this VM under
QSLAB_FAKE_NUMA=2, 4 and 8, beside what the probe measures after driving every
per-owner and per-node structure of that cache to its bound.

Usage:
  scripts/owner_memory.py [--build DIR] [--caches SPEC,...]
  scripts/owner_memory.py --check [--build DIR]
A SPEC is name:size[:align][:hw] (hw: QSLAB_HWCACHE_ALIGN).  DIR (default
build/test) must hold libqslab.a at its top level; it is built with cmake
when missing.  Python 3 standard library only.

Owners are CPUs throughout (the default where the kernel has rseq: one queue
per CPU and cache); with QSLAB_OWNER=thread every thread that uses a cache is
an owner instead, and "per owner" multiplies by threads.

SLQB's owner budget (src/front/slqb/budget.c) is per owner, not per cache: the queued
objects and the stashes of all an owner's SLQB queues together hold at most
owner_budget bytes (256 KiB by default), so an owner's SLQB figure for a set
of caches is min(budget, sum of the caches' queue + stash bounds) +
min(transit budget, their remote frees in transit) + structures: each
pending or open batch reserves its room of the owner's transit budget, a
quarter of the owner budget (at least 16 KiB).
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRONTS = ("slqb", "slub", "slab", "slob")

# Constants of the library, with where they live.
PAGE = 4096          # src/core/internal.h QS_PAGE_SIZE
MAX_ORDER = 14       # src/core/internal.h QS_MAX_ORDER
PENDING = 4          # src/core/internal.h QS_PENDING: pending remote batches per queue
ALIEN_LIMIT = 12     # src/front/slab/slab.h ALIEN_LIMIT: objects per alien array
SLAB_DESC = 96       # src/core/internal.h: a slab descriptor, in its chunk's header
CHUNK_HDR = 128      # src/core/internal.h QS_CHUNK_HDR_SLABS: struct qs_chunk
META_MIN, META_MAX = 16, 64 << 10  # src/core/meta.c: power-of-two bins up to 64 KiB
CHECK_SIZE = 256     # scripts/owner_memory_probe.h CHECK_SIZE
SLOB_JOB_OBJS = 1024 # scripts/owner_memory_workloads.c job_slob: objects per thread
SLOB_HDR = 8         # src/front/slob/slob.h: a block's header
GRANT_STEPS = 16     # src/front/slqb/budget.c QS_GRANT_STEPS: a miss asks for budget / 16
GRANT_BIG = 8        # src/front/slqb/budget.c QS_GRANT_BIG: objects over budget / 8 never queued
GRANT_OBJ_MAX = 32768  # src/front/slqb/budget.c QS_GRANT_OBJ_MAX: nor over 32 KiB
TRANSIT_PART = 4     # src/front/slqb/budget.c QS_TRANSIT_PART: transit budget = budget / 4
TRANSIT_LOW = 16 << 10  # src/front/slqb/budget.c QS_TRANSIT_LOW: at least 16 KiB


def transit_budget(budget):
    """src/front/slqb/budget.c qs_transit_budget: what one owner's batches of remote
    frees may reserve, over all its caches."""
    return max(budget // TRANSIT_PART, TRANSIT_LOW)
FIFO_BYTES = 1 << 30     # src/observe/tune.c default_empty_limit: 1 GiB per node, at least 4 slabs
RETAIN_FLOOR = 1 << 20   # src/core/internal.h QS_RETAIN_FLOOR: the warm pool's floor
RETAIN_FRACTION = 8      # src/core/internal.h QS_RETAIN_FRACTION: ... or slab bytes / 8
WARM_MS = 1000           # src/core/internal.h QS_WARM_MS: a warm slot's life
WARM_LIMIT = 1 << 30     # src/core/internal.h QS_WARM_LIMIT: bytes warm at most
SLOB_PAGE = 4096     # src/front/slob/slob.h: a SLOB page (kinds[K_PAGE]), 511 units after its first 8 bytes
SLOB_KEEP_MIN = 64   # src/front/slob/slob.h: empty pages kept at least, 256 KiB (an eighth of those in use above it)

DEFAULT_CACHES = ",".join([
    # the kmalloc classes a server uses most
    "kmalloc-64:64", "kmalloc-256:256", "kmalloc-1k:1024", "kmalloc-4k:4096",
    # two object caches, sizes as on a 6.x x86-64 kernel
    "dentry:192", "ext4_inode_cache:1096",
])


# ---- sizes ----

def fmt(n):
    """Bytes, human-readable (binary units)."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def meta_round(size):
    """What src/core/meta.c hands out for `size` bytes: a power of two from 16 up
    to 64 KiB, pages (mapped directly) above."""
    if size <= 0:
        return 0
    if size > META_MAX:
        return (size + PAGE - 1) // PAGE * PAGE
    b = META_MIN
    while b < size:
        b *= 2
    return b


def slots_bytes(need):
    """A queue's slot array holding `need` pointers: capacity doubling from 32
    (src/owner/owner.c qs_queue_slots_grow), plus the NULL sentinel slots[-1]."""
    cap = 32
    while cap < need:
        cap *= 2
    return meta_round((cap + 1) * 8)


def slab_bytes(order):
    return PAGE << order


# ---- SLUB's order rule, for machines other than this one ----

def min_order(slot, align=0):
    """src/core/slab.c qs_slab_min_order: the smallest order holding one object."""
    need, k = max(slot, align), 0
    while k < MAX_ORDER and slab_bytes(k) < need:
        k += 1
    return k


def calc_slab_order(size, min_objects, max_order, fract):
    """src/front/slub/cachewide.c calc_slab_order (mm/slub.c's)."""
    order = 0
    while slab_bytes(order) < min_objects * size and order < MAX_ORDER:
        order += 1
    while order <= max_order:
        slab = slab_bytes(order)
        if slab >= size and slab % size <= slab // fract:
            break
        order += 1
    return order


def slub_order(slot, ncpu):
    """src/front/slub/cachewide.c slub_calculate_order, the 5.12 rule: aim for 4 * (fls(possible
    CPUs) + 1) objects per slab, at most order 3, wasting at most 1/16, 1/8,
    1/4 of the slab, then fewer objects; past order 3 only for big objects."""
    fls = max(ncpu, 1).bit_length()
    min_objects = 4 * (fls + 1)
    min_objects = min(min_objects, slab_bytes(3) // slot)
    order = None
    while min_objects > 1 and order is None:
        for fract in (16, 8, 4):
            o = calc_slab_order(slot, min_objects, 3, fract)
            if o <= 3:
                order = o
                break
        else:
            min_objects -= 1
    if order is None:
        order = calc_slab_order(slot, 1, 3, 1)
        if order > 3:
            order = calc_slab_order(slot, 1, MAX_ORDER, 1)
    return min(max(order, min_order(slot)), MAX_ORDER)


# ---- the model ----

def cpu_partial_slabs(cpu_partial, objs):
    """src/front/slub/slabs.c cpu_partial_slabs: cpu_partial * 2 / objects per slab, up."""
    return 0 if not cpu_partial else (cpu_partial * 2 + max(objs, 1) - 1) // max(objs, 1)


def default_empty_limit(order):
    """src/observe/tune.c default_empty_limit: 1 GiB of slabs of `order` per node,
    at least 4."""
    return max(4, FIFO_BYTES >> (12 + order))


def refill_objs(p):
    """src/observe/tune.c qs_tune_derive: a refill is half a batch, at least 4
    objects (QS_REFILL_MIN), at most 64 KiB (QS_REFILL_BYTES), at least 1."""
    r = max(p["freebatch"] // 2, 4)
    return max(min(r, (64 << 10) // p["slot"]), 1)


def grant_cap(p, budget):
    """The grant an SLQB queue reaches alone in its owner's budget
    (src/front/slqb/budget.c slqb_grant_grow): each miss asks for as much as the queue has
    (doubling from a refill's worth), at most budget / 16 bytes (at least
    one object; objects over budget / 8 or 32 KiB are never queued), the last step
    short of hiwater, while the budget has room.  A queue's objects are at
    most its grant."""
    slot, hw = p["slot"], p["hiwater"]
    if slot > budget // GRANT_BIG or slot > GRANT_OBJ_MAX:
        return 0
    most = max(budget // GRANT_STEPS // slot, 1)
    g = 0
    while g < hw:
        s = min(max(g, refill_objs(p)), most, hw - g)
        if (g + s) * slot > budget:
            break
        g += s
    return g


def default_budget(cpus):
    """src/front/slqb/budget.c qs_owner_budget_default: 16 MiB over the possible CPUs,
    at least 256 KiB and at most 4 MiB each."""
    return max(256 << 10, min(4 << 20, (16 << 20) // max(cpus, 1)))


def stash_keep(p, sb, room=None):
    """Empty slabs an SLQB queue's stash keeps at most: it goes to the node's
    FIFO as it reaches stash_bytes or empty_limit slabs (src/front/slqb/budget.c
    slqb_stash_add), so one slab short of that; none when the cache keeps no
    empties; and only as many as `room` bytes of the owner budget hold (a
    slab the budget has no room for goes to the node at once)."""
    if not p["stash_bytes"] or not p["empty_decay_ms"]:
        return 0
    lim = min(p["empty_limit"], -(-p["stash_bytes"] // sb))
    keep = max(lim - 1, 0)
    return keep if room is None else min(keep, room // sb)


def transit_objs(p, targets, percpu=True):
    """SLQB objects freed by an owner on their way to other owners (their
    slabs' owners: other owners' queues, node lists, the own node's too once
    the queue is past `park`): a CPU's open batch (the free fast path fills
    it to freebatch) and QS_PENDING pending batches (each posted at
    freebatch, so freebatch - 1 at most), one per target (src/front/slqb/remote.c
    slqb_percpu_fb_open, pending_add).  A thread has no open batch."""
    fb = p["freebatch"]
    if percpu:
        return 0 if targets < 1 else fb + (min(targets, PENDING + 1) - 1) * (fb - 1)
    return min(targets, PENDING) * (fb - 1)


def slab_free_limit(p, objs, cpus, nodes):
    """src/front/slab/slabs.c slabfe_free_limit: (1 + CPUs of the node) * batchcount +
    objects per slab, the node's share counted as possible CPUs / nodes."""
    per_node = max(cpus // max(nodes, 1), 1)
    return (1 + per_node) * p["batchcount"] + objs


def cache_geometry(front, p, cpus):
    """(order, objects per slab) of a cache on a machine with `cpus` possible
    CPUs: the library's own, except SLUB's, whose order depends on the
    number of possible CPUs (recomputed here with the 5.12 rule)."""
    if front == "slub":
        order = slub_order(p["slot"], cpus)
        return order, slab_bytes(order) // p["slot"]
    return p["order"], p["objs"]


BUDGETED = ("queued objects (grant)", "stash (empty slabs)")  # SLQB's, in the owner budget
BUDGET_ITEM = "queued objects + stash (owner budget)"


def per_owner(front, p, sizes, cpus, nodes, owners=None, percpu=True, budget=None):
    """Worst-case bytes one owner holds for one cache, each item alone:
    {item: bytes}.  cpus: the machine's possible CPUs; owners: how many
    owners there are (CPUs, unless threads own the queues); budget: the
    owner budget (SLQB).  SLQB's queued objects and stash are each at most
    the budget here; together, over all an owner's caches, they are at most
    the budget too (owner_items)."""
    owners = owners or cpus
    order, objs = cache_geometry(front, p, cpus)
    sb, slot = slab_bytes(order), p["slot"]
    queue = meta_round(sizes["queue"])  # struct qs_queue from src/core/meta.c
    if front == "slqb":
        targets = nodes + (owners - 1)  # every node's list, the other owners
        grant = grant_cap(p, budget)
        return {
            "queue struct": queue,
            "slots": slots_bytes(max(grant, 1)),
            "queued objects (grant)": grant * slot,
            "stash (empty slabs)": stash_keep(p, sb, budget) * sb,
            "remote frees in transit": transit_objs(p, targets, percpu) * slot,
        }
    if front == "slub":
        return {
            "queue struct": queue,
            "active slab (all free)": sb,
            "cpu partial slabs (all free)": cpu_partial_slabs(p["cpu_partial"], objs) * sb,
        }
    if front == "slab":
        return {
            "queue struct": queue,
            "slots": slots_bytes(p["limit"]),
            "array objects (limit)": p["limit"] * slot,
            "alien objects": (nodes - 1) * ALIEN_LIMIT * slot,
            # src/front/slab/shared.c alien_of: one array for every node, the own
            # node's unused (the kernel's: nodes - 1), made at the first
            # free of another node's object
            "alien arrays": meta_round(8 * (ALIEN_LIMIT + 1) * nodes) if nodes > 1 else 0,
        }
    return {}  # slob: nothing per owner


def owner_items(front, caches, sizes, cpus, nodes, owners=None, percpu=True, budget=None):
    """Worst-case bytes one owner holds for a set of caches: {item: bytes},
    and, for SLQB, the sum over the caches of what each one's queue + stash
    holds alone on its owner (min(budget, queue + stash)), before the owner
    budget cuts the set to min(budget, the caches' queue + stash bounds)."""
    items, uncut = {}, 0
    for p in caches:
        po = per_owner(front, p, sizes, cpus, nodes, owners, percpu, budget)
        if front == "slqb":
            uncut += min(budget, sum(po[k] for k in BUDGETED))
        for k, v in po.items():
            items[k] = items.get(k, 0) + v
    if front == "slqb":
        alone = sum(items.pop(k, 0) for k in BUDGETED)
        out = {}
        for k, v in items.items():  # the budget's item before the transit
            if k == "remote frees in transit":
                out[BUDGET_ITEM] = min(budget, alone)
                v = min(transit_budget(budget), v)
            out[k] = v
        items = out
    return items, uncut


def per_node(front, p, sizes, cpus, nodes):
    """Bytes one node holds for one cache beyond the FIFO: {item: bytes}."""
    order, objs = cache_geometry(front, p, cpus)
    sb, slot = slab_bytes(order), p["slot"]
    # every cache has a struct qs_node per node (src/api/cache.c), in one block
    items = {"node struct": meta_round(sizes["node"] * nodes) // nodes}
    if front == "slub":
        items["min_partial slabs"] = p["min_partial"] * sb
    if front == "slab":
        sh = p["shared"] * p["batchcount"]
        items["shared array objects"] = sh * slot
        items["shared array"] = meta_round(8 * sh) if sh else 0
        items["free_limit objects"] = slab_free_limit(p, objs, cpus, nodes) * slot
    return items


def fifo_burst(front, p, cpus):
    """The empty-slab FIFO of one node (src/core/node.c): at most empty_limit
    slabs, each given back once empty for empty_decay_ms (1 s by default;
    the purger enforces it when nothing touches the FIFO).  SLQB and SLUB
    only (SLAB keeps free slabs by free_limit; SLOB its own empty pages).
    Slabs past the limit go warm in the page layer (process-wide, not
    counted here: model_mode says how it is bounded)."""
    if front == "slqb":
        return p["empty_limit"] * slab_bytes(p["order"])
    if front == "slub":
        # src/observe/tune.c: empty_limit = 1 GiB of slabs of the cache's order (at
        # least 4), rederived when the tunable `front` gives an untuned
        # cache SLUB's order; here for SLUB's order on the machine counted
        order, _ = cache_geometry(front, p, cpus)
        return default_empty_limit(order) * slab_bytes(order)
    return 0


def machine_totals(front, caches, sizes, cpus, nodes, budget):
    """Totals over the cache set for one machine (owners = cpus)."""
    items, _ = owner_items(front, caches, sizes, cpus, nodes, budget=budget)
    owner = sum(items.values())
    node = sum(sum(per_node(front, p, sizes, cpus, nodes).values()) for p in caches)
    alien = items.get("alien objects", 0) + items.get("alien arrays", 0)
    return {
        "owner": owner,
        "node": node,
        "total": cpus * owner + nodes * node,
        "alien": cpus * alien,
        "transit": cpus * items.get("remote frees in transit", 0),
        "budget": cpus * items.get(BUDGET_ITEM, 0),
        "fifo": nodes * sum(fifo_burst(front, p, cpus) for p in caches),
    }


# ---- the probe ----

def ensure_lib(build):
    lib = os.path.join(build, "libqslab.a")
    if not os.path.exists(lib):
        print(f"# {lib} missing: building it", file=sys.stderr)
        subprocess.run(["cmake", "-S", ROOT, "-B", build], check=True, stdout=sys.stderr)
        subprocess.run(["cmake", "--build", build, "-j2"], check=True, stdout=sys.stderr)
    return lib


def build_probe(build, tmp):
    lib = ensure_lib(build)
    exe = os.path.join(tmp, "owner_memory_probe")
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-std=gnu11", "-pthread", "-I", os.path.join(ROOT, "src"),
           "-I", os.path.join(ROOT, "include"),
           os.path.join(ROOT, "scripts", "owner_memory_probe.c"),
           os.path.join(ROOT, "scripts", "owner_memory_workloads.c"), lib, "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("owner_memory.py: the probe does not build:\n" + " ".join(cmd) + "\n" + r.stderr)
    return exe


def parse_probe(text):
    """Lines "kind key=value ...": a list of (kind, {key: int or str})."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        kv = {}
        for f in parts[1:]:
            k, _, v = f.partition("=")
            kv[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
        out.append((parts[0], kv))
    return out


def run_probe(exe, args, nodes=None):
    env = dict(os.environ, QSLAB_PURGE="0")
    env.pop("QSLAB_TUNE", None)   # the defaults, whatever the caller's shell says
    env.pop("QSLAB_FRONT", None)
    if nodes:
        env["QSLAB_FAKE_NUMA"] = str(nodes)
    else:
        env.pop("QSLAB_FAKE_NUMA", None)
    r = subprocess.run([exe] + args, capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0:
        sys.exit(f"owner_memory.py: probe {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return parse_probe(r.stdout)


def read_params(exe, specs, nodes=None):
    """{front: [cache params]}, and the machine line (sizes of the structures)."""
    res, machine = {}, None
    for f in FRONTS:
        lines = run_probe(exe, ["params", f] + specs, nodes)
        machine = next(kv for k, kv in lines if k == "machine")
        res[f] = [kv for k, kv in lines if k == "cache"]
    return res, machine


def this_vm():
    """(CPUs, nodes) of this machine: os.cpu_count() and sysfs's nodes."""
    nodes = len(glob.glob("/sys/devices/system/node/node[0-9]*")) or 1
    return os.cpu_count() or 1, nodes


def possible_cpus():
    """Possible CPUs (/sys/devices/system/cpu/possible, as the library's
    qs_os_cpu_possible reads them): what SLUB's order and SLAB's free_limit
    count; 0 if unknown."""
    try:
        text = open("/sys/devices/system/cpu/possible").read().strip()
    except OSError:
        return 0
    last = -1
    for part in text.split(","):
        last = max(last, int(part.split("-")[-1]))
    return last + 1


# ---- tables ----

def table(headers, rows, right=None):
    """Plain-text table, columns aligned (numbers right)."""
    right = right if right is not None else [i > 0 for i in range(len(headers))]
    w = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    def line(r):
        return "  ".join(str(x).rjust(w[i]) if right[i] else str(x).ljust(w[i])
                         for i, x in enumerate(r)).rstrip()
    out = [line(headers), line(["-" * x for x in w])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def print_tunables(params, machine):
    print("Tunables as the library sets them (probe: qslab_tune_get, qslab_cache_stats),")
    print(f"this VM: {machine['nr_cpu_ids']} possible CPUs, owners: {machine['owner']}; "
          f"struct qs_queue {machine['sizeof_queue']} B ({meta_round(machine['sizeof_queue'])} B "
          f"from the meta allocator), struct qs_node {machine['sizeof_node']} B; "
          f"owner_budget {fmt(machine['owner_budget'])}")
    budget = machine["owner_budget"]
    rows = []
    for i, p in enumerate(params["slqb"]):
        name = p["name"][3:]
        u, s = params["slub"][i], params["slab"][i]
        rows.append([
            name, p["slot"],
            f"{p['order']}/{p['objs']}", p["hiwater"], grant_cap(p, budget), p["freebatch"],
            fmt(p["stash_bytes"]), p["empty_limit"],
            f"{u['order']}/{u['objs']}", u["cpu_partial"],
            cpu_partial_slabs(u["cpu_partial"], u["objs"]), u["min_partial"], u["empty_limit"],
            f"{s['order']}/{s['objs']}", s["limit"], s["batchcount"], s["shared"],
        ])
    print(table(["cache", "slot",
                 "slqb ord/objs", "hiwater", "grant", "freebatch", "stash", "empty_limit",
                 "slub ord/objs", "cpu_partial", "(slabs)", "min_partial", "empty_limit",
                 "slab ord/objs", "limit", "batch", "shared"], rows, [False] + [True] * 16))
    print(f"grant: the objects a queue may hold when it has its owner's budget to itself "
          f"(doubling steps of at most {fmt(budget // GRANT_STEPS)},")
    print(f"at most hiwater; none for objects over {fmt(budget // GRANT_BIG)}).  empty_limit: "
          f"slabs per node, {fmt(FIFO_BYTES)} of slabs of the cache's order,")
    print("at least 4 (src/observe/tune.c default_empty_limit).")
    odd = [f"{f} {p['name'][3:]} ({p['empty_limit']}, not {default_empty_limit(p['order'])})"
           for f in ("slqb", "slub") for p in params[f]
           if p["empty_limit"] != default_empty_limit(p["order"])]
    if odd:
        print("empty_limit DIFFERS from the default rule for: " + ", ".join(odd) + ".")


def print_machine(title, cpus, nodes, params, sizes, names, budget):
    print(f"\n== {title}: {nodes} node(s) x {cpus // nodes} CPUs = {cpus} owners (CPUs), "
          f"{len(names)} caches ({', '.join(names)})")
    rows, tot = [], {}
    for f in FRONTS:
        t = tot[f] = machine_totals(f, params[f], sizes, cpus, nodes, budget)
        share = lambda k: f"{fmt(t[k])} ({100.0 * t[k] / t['total']:.0f}%)" if t[k] else "-"
        rows.append([f, fmt(t["owner"]), fmt(t["node"]), fmt(t["total"]), share("budget"),
                     share("transit"), share("alien"), fmt(t["fifo"]) if t["fifo"] else "-"])
    print(table(["front", "per owner", "per node", "total: owners x owner + nodes x node",
                 "owner budgets (share)", "remote frees in transit (share)",
                 "alien caches (share)", "+ FIFO burst, decays in 1 s"], rows))
    q, u = tot["slqb"], tot["slub"]
    print(f"slqb less its remote frees in transit: {fmt(q['total'] - q['transit'])} "
          f"(slub: {fmt(u['total'])}); with them {q['total'] / u['total']:.1f} x slub's.")
    # what the per-owner and per-node totals are made of (summed over caches)
    print()
    for f in FRONTS[:3]:
        items, uncut = owner_items(f, params[f], sizes, cpus, nodes, budget=budget)
        print(f"  {f} per owner: " + ", ".join(
            f"{k} {fmt(v)}" + (f" (each cache alone: {fmt(uncut)} summed)" if k == BUDGET_ITEM else "")
            for k, v in items.items() if v))
        items = {}
        for p in params[f]:
            for k, v in per_node(f, p, sizes, cpus, nodes).items():
                items[k] = items.get(k, 0) + v
        print(f"  {f} per node: " + ", ".join(f"{k} {fmt(v)}" for k, v in items.items() if v))
    # per cache: per owner / per node, each front end
    rows = []
    for i, name in enumerate(names):
        r = [name]
        for f in FRONTS[:3]:
            p = params[f][i]
            o = sum(owner_items(f, [p], sizes, cpus, nodes, budget=budget)[0].values())
            n = sum(per_node(f, p, sizes, cpus, nodes).values())
            order, objs = cache_geometry(f, p, cpus)
            r += [f"{order}/{objs}" if f == "slub" else None, fmt(o), fmt(n)]
        rows.append([x for x in r if x is not None])
    print()
    print(table(["cache", "slqb owner", "slqb node", "slub ord/objs", "slub owner", "slub node",
                 "slab owner", "slab node"], rows, [False] + [True] * 7))
    print("(slqb owner per cache: the cache alone on its owner; the caches together share one "
          "owner budget, so the column sums to more than the per-owner total.)")


def model_mode(args, exe):
    specs = [s for s in args.caches.split(",") if s]
    params, machine = read_params(exe, specs)
    sizes = {"queue": machine["sizeof_queue"], "node": machine["sizeof_node"]}
    budget, slob_keep = machine["owner_budget"], machine["slob_empty_limit"]
    names = [p["name"][3:] for p in params["slqb"]]
    # the tunables do not depend on the node count: read them again with 8
    # fake nodes to be sure
    fake, _ = read_params(exe, specs, nodes=8)
    same = all(fake[f] == params[f] for f in FRONTS)
    print_tunables(params, machine)
    print(f"Read again under QSLAB_FAKE_NUMA=8: {'identical' if same else 'DIFFERENT'}.")
    cpus, nodes = this_vm()
    possible = possible_cpus() or cpus
    # SLUB's order here: the probe's (the library's) against the rule
    bad = [p["name"] for p in params["slub"] if slub_order(p["slot"], possible) != p["order"]]
    print("SLUB orders recomputed with the 5.12 rule for this VM's CPUs: "
          + ("match the library's." if not bad else "DIFFER for " + ", ".join(bad)))
    print(f"""
Per owner (one CPU), worst case:
  slqb  per cache: struct qs_queue + its slot array + remote frees in transit (a
        CPU's open batch of up to freebatch and 4 pending batches of freebatch-1,
        one per other owner or node list); and for all the owner's caches
        together the OWNER BUDGET, owner_budget = {fmt(budget)}: every queue's
        grant (the objects it may hold: its limit is min(grant, hiwater)) and
        every stash's empty slabs (one slab short of stash_bytes each) come out
        of it.  A queue's grant grows on its misses by budget / 16 (objects over
        budget / 8 or 32 KiB are never queued), taken from the coldest other
        queue of the owner when the budget is full.  So queued objects +
        stashes are min(budget, the caches' own bounds summed), however many
        caches the owner uses; remote frees in transit likewise within the
        owner's transit budget, a quarter of it (at least 16 KiB).
  slub  per cache: struct qs_queue + the active slab all free + cpu_partial_slabs
        slabs all free (cpu_partial * 2 / objects per slab, src/front/slub/slabs.c)
  slab  per cache: struct qs_queue + slot array + limit objects + 12 objects per
        other node (alien arrays) + the alien pointer arrays (13 pointers per node)
  slob  nothing (one lock, pages shared by every cache; empty pages kept up to
        an eighth of the pages in use, at least 256 KiB of them, for the
        arena's empty_decay_ms, 1 s)
Per node (one node, one cache): struct qs_node; slub: min_partial slabs kept even
when empty; slab: the shared array (shared * batchcount pointers and objects) and
free_limit objects in free slabs ((1 + CPUs per node) * batchcount + objects per
slab).  The FIFO of empty slabs (slqb, slub) is bounded by empty_limit slabs
({fmt(FIFO_BYTES)} of slabs of the cache's order per node and cache by default, at
least 4: a burst's bound) and by its decay: an empty slab goes back after
empty_decay_ms (1 s), so it holds what the node freed in the last second, not a
standing cost; it is shown apart.
Warm slots: an empty slab a FIFO gives up young (past empty_limit, or taken by
the retention rule for another cache), a destroyed cache's slabs and SLUB's
pass-through blocks stay resident in the page layer, for the next slab of their
order and node, of any cache: one pool for the whole process.
The retention rule (src/core/page.c, src/core/node.c qs_node_reclaim) bounds the FIFOs and
the warm slots together by the working set, not by owners or nodes: whenever
the page layer hands out memory that is not resident, what they keep is first
brought down to max({fmt(RETAIN_FLOOR)}, slab bytes in the caches / {RETAIN_FRACTION}) (a FIFO slab of
the wanted order goes warm for the allocation, then the oldest FIFO slabs back,
then the warm pool is cut); a warm slot goes back after {WARM_MS} ms.  So kept
empty slabs let the process grow by at most 1/{RETAIN_FRACTION} of what its caches hold
in slabs ({fmt(RETAIN_FLOOR)} when they hold less than {fmt(RETAIN_FLOOR * RETAIN_FRACTION)}); not in
the tables.
Not counted: objects posted to an owner's inbox and not yet claimed (SLQB:
bounded by what others freed since its last refill), free objects in partly
used slabs (fragmentation, not a structure), the page layer's slab descriptors
(96 B per slab), owners' tables (one per CPU, whatever the caches).""")
    if possible != cpus:
        print(f"\nNote: this VM has {possible} possible CPUs and {cpus} online; the tables count"
              f" {cpus} owners and SLUB's orders for {cpus}.")
    for title, c, n in ((f"this VM (os.cpu_count() {cpus}, {nodes} node(s))", cpus, nodes),
                        ("2-socket 128-thread machine", 128, 2),
                        ("8-node 1,024-CPU machine", 1024, 8)):
        # the default budget follows the machine's CPUs (a tuned one is kept)
        b = budget if c == cpus or budget != default_budget(possible or cpus) else default_budget(c)
        print_machine(title, c, n, params, sizes, names, b)
    print("""
owner budgets: CPUs x owner_budget, SLQB's queued objects and stashes of every cache
together; remote frees in transit: CPUs x min(transit budget, caches x (freebatch + 4 x
(freebatch - 1)) objects): an open batch and 4 pending batches per queue, each
reserving its room of the owner's transit budget (owner_budget / 4, at least 16 KiB).
alien caches: CPUs x caches x ((nodes - 1) x 12 objects + nodes x 13 pointers
(src/front/slab/shared.c makes one array per node, its own node's unused; the kernel's
SLAB made nodes - 1)): the crossbar grows with CPUs x nodes, where every other
structure grows with CPUs or with nodes alone.""")


# ---- --check ----

def kib(n):
    return f"{n / 1024:.1f} KiB"


def page_layer_estimate(slabs, nodes, fbits=False):
    """Resident bytes of the page layer's headers (src/core/page.c): each node's
    chunk has a header page or more, struct qs_chunk then a 96-byte
    descriptor for every slot used so far (the slabs made, spread over the
    nodes), and for SLQB's slabs the free bits (src/core/internal.h: 64 bytes per
    4 KiB of slab, a page for 64 order-0 slabs).  An estimate: what the
    slabs came to per node is not known."""
    if not slabs or not nodes:
        return 0
    per_node = -(-slabs // nodes)
    hdr = -(-(CHUNK_HDR + SLAB_DESC * per_node) // PAGE) * PAGE
    if fbits:
        hdr += -(-per_node // 64) * PAGE
    return nodes * hdr


def check_mode(args, exe):
    tol_objs, tol_rss, tol_rss_abs = 0.05, 0.10, 32 << 10
    cpus, _ = this_vm()
    possible = possible_cpus() or cpus
    print(f"Fake-NUMA check: one cache of {CHECK_SIZE}-byte objects on this VM ({cpus} CPUs), "
          f"QSLAB_FAKE_NUMA=N, QSLAB_PURGE=0 (measured at the bound, before any reclaim).")
    print("Each run starts CPUs + 2 threads pinned round-robin; the threads of an owner (a CPU) "
          "run the owner's routine one at a time, its last thread")
    print("last; then the probe reads qslab_cache_stats, the anonymous RSS delta "
          "(/proc/self/smaps_rollup) and what each structure holds.")
    print(f"Tolerance: objects held (statistics) within {tol_objs:.0%} of the bound; RSS within "
          f"{tol_rss:.0%} or {fmt(tol_rss_abs)} (page granularity).")
    summary, seen = [], None
    for n in (2, 4, 8):
        for f in FRONTS:
            lines = run_probe(exe, ["check", f], nodes=n)
            get = lambda kind: next(kv for k, kv in lines if k == kind)
            machine, chk, p = get("machine"), get("check"), get("cache")
            st, rss, d, arena = get("stats"), get("rss"), get("detail"), get("arena")
            warm = get("warm")
            valid = not any(k == "validate" for k, _ in lines)
            sizes = {"queue": machine["sizeof_queue"], "node": machine["sizeof_node"]}
            budget = machine["owner_budget"]
            owners, nodes, slot, objs = chk["owners"], chk["nodes"], p["slot"], p["objs"]
            percpu = machine["owner"] == "cpu"
            # the model for this configuration: this VM's possible CPUs, the
            # probe's owners (CPUs, or threads), the probe's own tunables and
            # the owner budget (one cache: min(budget, its queue + stash))
            po, _ = owner_items(f, [p], sizes, possible, nodes, owners, percpu, budget)
            pn = per_node(f, p, sizes, possible, nodes)
            bound = owners * sum(po.values()) + nodes * sum(pn.values())
            meta_items = ("queue struct", "slots", "alien arrays", "node struct", "shared array")
            meta = owners * sum(v for k, v in po.items() if k in meta_items) \
                + nodes * sum(v for k, v in pn.items() if k in meta_items)
            bound_objs = bound - meta                       # objects and slabs alone
            fifo = d["fifo_slabs"] * objs * slot            # burst: not in the bound
            held = (st["num_objs"] - st["active_objs"]) * slot - fifo
            live = st["active_objs"] * slot
            # empty slabs past a FIFO's empty_limit, warm in the page layer
            # (no cache's: not in the statistics), resident
            warm_b = max(warm["after_b"] - warm["base_b"], 0)
            # RSS: the bound with metadata, the FIFO, the page layer's headers
            # (SLOB: its arena's pages, on the nodes of the CPUs), SLOB's kept
            # pages: every page of the peak on each node the threads ran on
            # (a node's pages serve that node only; emptied, they stay kept,
            # the purger being off), at most SLOB_KEEP_MIN once every
            # object is freed (an eighth of none in use)
            if f == "slob":
                # the arena's pages at the peak (one thread's objects: the
                # threads run one at a time), on the nodes of the CPUs
                peak = -(-SLOB_JOB_OBJS // ((SLOB_PAGE - SLOB_HDR) // (CHECK_SIZE + SLOB_HDR)))
                pages = page_layer_estimate(max(peak, arena["num_slabs"]), min(nodes, chk["cpus"]))
                # at most SLOB_KEEP_MIN pages kept once none is in use
                # (fewer after a give-back, never more)
                extra = min(peak * min(nodes, chk["cpus"]), SLOB_KEEP_MIN) * SLOB_PAGE
            else:
                pages, extra = page_layer_estimate(st["new_slab"], nodes, f == "slqb"), 0
            exp_rss = bound + fifo + warm_b + pages + extra
            rss_held = (rss["after_kb"] - rss["base_kb"]) * 1024 - live
            d["held_objs"] = st["num_objs"] - st["active_objs"]
            rows = structure_rows(f, p, owners, nodes, possible, percpu, d, budget)
            if f == "slqb":
                seen = (p, budget)
            print(f"\n-- {f}, QSLAB_FAKE_NUMA={n}: {chk['threads']} threads, {owners} owners "
                  f"({machine['owner']}), {nodes} nodes; order {p['order']}, {objs} objects per slab"
                  + ("" if valid else "  !! qslab_cache_validate FAILED"))
            print(table(["structure", "bound", "measured", "ratio"],
                        [[w, b, m, f"{m / b:.3f}" if b else "-"] for w, b, m in rows],
                        [False, True, True, True]))
            ok_objs = abs(held - bound_objs) <= tol_objs * bound_objs if bound_objs else held == 0
            ok_rss = abs(rss_held - exp_rss) <= max(tol_rss * exp_rss, tol_rss_abs)
            print(f"objects held, (num_objs - active_objs) x slot{' less the FIFO' if fifo else ''}: "
                  f"{kib(held)}, bound {kib(bound_objs)}"
                  + (f" ({held / bound_objs:.3f})" if bound_objs else "")
                  + ("  ok" if ok_objs else "  OUTSIDE TOLERANCE"))
            terms = [f"bound with metadata {kib(bound)}"]
            if fifo:
                terms.append(f"FIFO {kib(fifo)}")
            if warm_b:
                terms.append(f"warm slots {kib(warm_b)}")
            terms.append(f"page-layer headers ~{kib(pages)}")
            if extra:
                terms.append(f"SLOB's kept pages {kib(extra)}")
            print(f"RSS delta less live objects ({kib(live)}): {kib(rss_held)}, expected "
                  f"{' + '.join(terms)} = {kib(exp_rss)} ({rss_held / exp_rss:.3f})"
                  + ("  ok" if ok_rss else "  OUTSIDE TOLERANCE"))
            summary.append([n, f, kib(bound_objs), kib(held),
                            f"{held / bound_objs:.3f}" if bound_objs else "-",
                            kib(fifo) if fifo else "-", kib(exp_rss), kib(rss_held),
                            f"{rss_held / exp_rss:.3f}",
                            "ok" if ok_objs and ok_rss and valid else "CHECK"])
    if seen:
        p, budget = seen
        grant, sb = grant_cap(p, budget), slab_bytes(p["order"])
        keep = stash_keep(p, sb, budget - grant * p["slot"])
        print(f"""
The owner budget, {fmt(budget)} per owner: the queue's misses on its way up grow its grant
to {grant} objects of {p['slot']} B ({fmt(grant * p['slot'])}, hiwater {p['hiwater']}); the stash keeps the empty slabs
the rest of the budget holds: {keep} of {stash_keep(p, sb)} (the others go to the node's FIFO).""")
    print("""
Where measured and bound differ:
  slqb  transit: the free fast path fills a CPU's open batch to freebatch, the workload
        stops each group at freebatch - 1 (one object per owner); free objects in partly
        used slabs: the last slab of each node list's group, and the routine's fillers
        when the budget leaves the stash room (sent home without emptying their slab);
        N=8: 9 groups per owner (8 node lists, 1 owner) for 5 batches, so 4 node-list
        batches per owner were posted to make room and their slabs, emptied, wait in
        the nodes' FIFOs (the burst: given back after 1 s; past empty_limit they would
        stay warm in the page layer, counted in the RSS as warm slots).
  slub  one object per node stays live, to keep the node's last partial slab (a free
        that empties a slab of a node with min_partial partial slabs, itself counted,
        gives it to the FIFO).
  RSS   above the estimate: thread stacks of the slow paths, the slot arrays a queue
        outgrew on its way to hiwater (kept in the meta allocator's bins), SLAB's
        off-slab index arrays (32 B per slab), SLOB's partly used pages; below it:
        metadata placed in pages the baseline had touched already.""")
    print("\n== summary: bound (model: this VM's CPUs, N fake nodes) vs measured")
    print(table(["N", "front", "bound (objects)", "held (stats)", "ratio", "FIFO (burst)",
                 "expected RSS", "RSS held", "ratio", ""], summary,
                [True, False] + [True] * 7 + [False]))
    bad = [f"{row[1]} at N={row[0]}" for row in summary if row[-1] != "ok"]
    if bad:  # ctest's scripts_owner_memory fails on it
        sys.exit("owner_memory.py --check: outside tolerance: " + ", ".join(bad))


def structure_rows(f, p, owners, nodes, ncpu, percpu, d, budget):
    """(structure, bound, measured) in objects or slabs, from the probe's
    breakdown (its `detail` line)."""
    objs = p["objs"]
    sb = slab_bytes(p["order"])
    other = d["held_objs"] - d["fifo_slabs"] * objs  # free objects outside the structures
    if f == "slqb":
        targets = nodes + (owners - 1)
        other -= d["queue_objs"] + d["stash_slabs"] * objs + d["transit_objs"] + d["inbox_objs"]
        # the owner budget: the queue fills first (its misses grow its grant
        # to grant_cap), the stash keeps what the rest of the budget holds
        grant = grant_cap(p, budget)
        return [
            ("queued objects (grant each: min(hiwater, budget))", owners * grant, d["queue_objs"]),
            ("stash slabs (the budget's rest)",
             owners * stash_keep(p, sb, budget - grant * p["slot"]), d["stash_slabs"]),
            ("objects in transit (open + pending batches)",
             owners * transit_objs(p, targets, percpu), d["transit_objs"]),
            ("objects in inboxes (not bounded)", 0, d["inbox_objs"]),
            ("FIFO slabs (burst, decays)", 0, d["fifo_slabs"]),
            ("free objects in partly used slabs (not a structure)", 0, other),
        ]
    if f == "slub":
        return [
            ("active slabs", owners, d["active_slabs"]),
            ("cpu partial slabs", owners * cpu_partial_slabs(p["cpu_partial"], objs),
             d["cpu_partial_slabs"]),
            ("node partial slabs (min_partial each)", nodes * p["min_partial"],
             d["node_partial_slabs"]),
            ("FIFO slabs (burst, decays)", 0, d["fifo_slabs"]),
        ]
    if f == "slab":
        return [
            ("array objects (limit each)", owners * p["limit"], d["queue_objs"]),
            ("alien objects (12 per other node)", owners * (nodes - 1) * ALIEN_LIMIT, d["alien_objs"]),
            ("shared array objects", nodes * p["shared"] * p["batchcount"], d["shared_objs"]),
            ("free objects in node slabs (free_limit)",
             nodes * slab_free_limit(p, objs, ncpu, nodes), d["node_free_objs"]),
            ("free objects elsewhere (not a structure)", 0,
             other - d["queue_objs"] - d["alien_objs"] - d["shared_objs"] - d["node_free_objs"]),
        ]
    return [("structures", 0, 0)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "test"),
                    help="build directory with libqslab.a (default build/test)")
    ap.add_argument("--caches", default=DEFAULT_CACHES,
                    help="comma-separated name:size[:align][:hw] (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="check the model against QSLAB_FAKE_NUMA=2,4,8 runs")
    args = ap.parse_args()
    if not shutil.which(os.environ.get("CC", "cc")):
        sys.exit("owner_memory.py: no C compiler (cc) for the probe")
    with tempfile.TemporaryDirectory(prefix="owner_memory.") as tmp:
        exe = build_probe(os.path.abspath(args.build), tmp)
        (check_mode if args.check else model_mode)(args, exe)


if __name__ == "__main__":
    main()
