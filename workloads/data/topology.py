"""Seeded transit-stub network topologies (the GT-ITM setting) as a link table.

Each transit domain has 4 transit nodes, each transit node 3 stub domains of 8 nodes (100 nodes
per domain; other sizes scale the stubs).  Transit nodes of a domain form a ring, domains a ring
through their first transit nodes, each stub hangs off its transit node by one link and is a
random spanning tree; random extra links (mostly inside stubs, some across the stubs of a domain,
cost 10) bring the network to ``density`` bidirectional links per node.  Costs are latencies:
50 transit-transit, 10 transit-stub, 2 inside a stub.  Every link is stored in both directions; node ids are contiguous per domain and stub.

>>> t = topology_links(100, seed=1)
>>> t.num_rows, len(set(t.column("src").to_pylist()))
(400, 100)
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from advisor.errors import BadInput

TRANSIT_PER_DOMAIN, STUBS_PER_TRANSIT, STUB_NODES = 4, 3, 8
COST = {"tt": 50, "ts": 10, "ss": 2}


def topology_links(nodes: int, seed: int = 7, density: float = 2.0) -> pa.Table:
    """link(src, dst, cost) of a transit-stub network of ``nodes`` nodes (module docstring)."""
    if not 10 <= nodes <= 100_000:
        raise BadInput(f"--nodes must be between 10 and 100000, got {nodes}")
    if not 1.0 <= density <= 8.0:
        raise BadInput(f"--density (bidirectional links per node) must be between 1 and 8, got {density}")
    rng = np.random.default_rng(seed)
    domains = max(1, round(nodes / 100))
    per_domain = [nodes // domains + (1 if d < nodes % domains else 0) for d in range(domains)]
    edges: dict = {}
    transit_first, stubs, transit_all, domain_nodes = [], [], [], []
    nid = 0
    for size in per_domain:
        domain_nodes.append(list(range(nid, nid + size)))
        tn = min(TRANSIT_PER_DOMAIN, size)
        transit = list(range(nid, nid + tn))
        nid += tn
        transit_all.append(transit)
        transit_first.append(transit[0])
        for a, b in zip(transit, transit[1:] + transit[:1]):
            if a != b:
                edges[(min(a, b), max(a, b))] = COST["tt"]
        n_stubs = tn * STUBS_PER_TRANSIT
        rest = size - tn
        for s in range(n_stubs):
            k = rest // n_stubs + (1 if s < rest % n_stubs else 0)
            if k == 0:
                continue
            stub = list(range(nid, nid + k))
            nid += k
            stubs.append(stub)
            edges[(transit[s % tn], stub[0])] = COST["ts"]
            for i in range(1, k):
                p = stub[int(rng.integers(0, i))]
                edges[(p, stub[i])] = COST["ss"]
    if domains > 1:
        for a, b in zip(transit_first, transit_first[1:] + transit_first[:1]):
            if a != b:
                edges[(min(a, b), max(a, b))] = COST["tt"]
    target = int(math.ceil(density * nodes))
    tries = 0
    while len(edges) < target and tries < 50 * target:
        tries += 1
        r = rng.random()
        if r < 0.1 or not stubs:
            grp, cost = transit_all[int(rng.integers(0, len(transit_all)))], COST["tt"]
        elif r < 0.3:  # across stubs of one domain (stubs saturate in dense networks)
            d = int(rng.integers(0, domains))
            grp, cost = domain_nodes[d], COST["ts"]
        else:
            grp, cost = stubs[int(rng.integers(0, len(stubs)))], COST["ss"]
        if len(grp) < 2:
            continue
        a, b = (int(x) for x in rng.choice(grp, 2, replace=False))
        edges.setdefault((min(a, b), max(a, b)), cost)
    src, dst, cost = [], [], []
    for (a, b), c in sorted(edges.items()):
        src += [a, b]
        dst += [b, a]
        cost += [c, c]
    order = np.lexsort((np.array(dst), np.array(src)))
    return pa.table(
        {
            "src": pa.array(np.array(src, dtype=np.int64)[order]),
            "dst": pa.array(np.array(dst, dtype=np.int64)[order]),
            "cost": pa.array(np.array(cost, dtype=np.int64)[order]),
        }
    )
