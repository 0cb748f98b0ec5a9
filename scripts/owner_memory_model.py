"""owner_memory_model.py - the per-owner and per-node memory model of
owner_memory.py: the library's constants (with where they live), SLUB's
order rule for machines other than this one, and the worst-case bytes each
structure of a cache holds per owner and per node under each front end,
from the tunables the probe reads.  Pure functions, no I/O.
"""

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
