"""owner_memory_report.py - owner_memory.py's default mode: the tunables the
library gives the caches under each front end, and the model's worst case
per owner, per node and in total for this VM, a 2-socket 128-thread machine
and an 8-node 1,024-CPU machine, as plain-text tables (table, which the
check uses too).
"""

from owner_memory_model import (
    BUDGET_ITEM, FIFO_BYTES, FRONTS, GRANT_BIG, GRANT_STEPS, RETAIN_FLOOR, RETAIN_FRACTION,
    WARM_MS, cache_geometry, cpu_partial_slabs, default_budget, default_empty_limit, fmt,
    grant_cap, machine_totals, meta_round, owner_items, per_node, slub_order)
from owner_memory_probe import possible_cpus, read_params, this_vm


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
