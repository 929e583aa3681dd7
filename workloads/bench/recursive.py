"""`advisor bench recursive`: maintaining recursive views under link failures and recoveries,
side by side in one run, on transit-stub topologies of 1,000 nodes at densities 1, 2 and 4 and on
the airports route graph; and recursive queries plain vs sketched on Spark.

Per batch (deletions: link failures, both directions of a link; then insertions: the links
recovering): absorption (the provenance state the product keeps: minimal witness sets for
hop-bounded views within their budget, else derivation supports with levels, which a deletion
touches only where a tuple lost every shortest derivation), DRed (over-delete, re-derive) and
recomputation (semi-naive from scratch), each on its own copy of the view, all in driver-side
Python; seconds (garbage collector off during each timed call) and tuples touched.  The policy (``advisor.recursive.policy``) picks one method
per batch from the seconds measured on the earlier batches; its column is the measured time of
the method it picked, and the ratio compares its total with the best single method's.  Every
maintained view is checked against the recomputed one.  The state sizes of the alternatives
(witness sets, BDDs) are measured too, with their budgets.  The Spark part loads the topology as
table ``link`` (with a clustered layout on ``src``), captures the sketch of a node-set and of a
cheapest-path query and runs each plain and sketched: rows read, link rows entering the
recursion, seconds, answers equal.
"""

from __future__ import annotations

import gc
import random
import statistics
import time

from advisor.layout.clustered_copy import build_layout
from advisor.recursive.bdd_witnesses import BddView
from advisor.recursive.capture import capture_recursive
from advisor.recursive.derive import LinkGraph, Spec, fixpoint
from advisor.recursive.dred import DRedView
from advisor.recursive.evaluate import run_native, run_recursive
from advisor.recursive.policy import Costs, choose
from advisor.recursive.shape import recognise
from advisor.recursive.supports import SupportView
from advisor.recursive.witnesses import BudgetExceeded, WitnessView
from workloads.data.airports import route_links
from workloads.data.datasets import load_dataset
from workloads.data.topology import topology_links

METHODS = ("absorption", "dred", "recompute")
QUERIES = {
    # the nodes reached from one source (reach(node), the textbook query)
    "reach(node) from 1": Spec(forward=True, nodes=True),
    # the pairs reachable from 10 sources
    "reach(src, dst) from 10": Spec(forward=True),
    # paths with cost and length within 4 hops from 10 sources (a cheapest-path query's view)
    "paths<=4 from 10": Spec(forward=True, cost=True, hops=True, max_hops=4),
}


def _links(nodes: int, seed: int, density: float) -> dict:
    t = topology_links(nodes, seed, density).to_pydict()
    return {i: (s, d, c) for i, (s, d, c) in enumerate(zip(t["src"], t["dst"], t["cost"]))}


def _airport_links(radius_km: float) -> dict:
    t = route_links(radius_km).to_pydict()
    return {i: (s, d, c) for i, (s, d, c) in enumerate(zip(t["src"], t["dst"], t["km"]))}


def _spec(name: str, links: dict, seed: int) -> Spec:
    spec = QUERIES[name]
    k = int(name.split("from ")[1])
    nodes = sorted({s for s, _, _ in links.values()}, key=repr)
    srcs = frozenset(random.Random(seed).sample(nodes, min(k, len(nodes))))
    return Spec(spec.forward, spec.cost, spec.hops, spec.max_hops, srcs, spec.nodes)


def absorption_state(spec: Spec, links: dict, budget: int):
    """The provenance state the product keeps (module docstring) and its size."""
    if spec.max_hops is not None:
        try:
            w = WitnessView.build(spec, LinkGraph(dict(links)), budget)
            return w, f"witness sets, {w.size:,} row ids"
        except BudgetExceeded:  # over the witness budget: derivation supports instead
            pass
    v = SupportView.build(spec, LinkGraph(dict(links)))
    return v, f"derivation supports, {v.size:,} levels"


def alternatives(spec: Spec, links: dict, budget: int, bdd_nodes: int, bdd_seconds: float) -> dict:
    """Whether the other provenance states fit: explicit witness sets and BDDs, with their budgets
    (small ones: a probe, not a run)."""
    out = {}
    for name, build in (
        ("witness sets", lambda: WitnessView.build(spec, LinkGraph(dict(links)), budget)),
        ("BDDs", lambda: BddView.build(spec, LinkGraph(dict(links)), bdd_nodes, bdd_seconds)),
    ):
        t0 = time.perf_counter()
        try:
            v = build()
            size = f"{v.size:,} row ids" if name == "witness sets" else f"{v.nodes():,} nodes"
            out[name] = f"fits ({size}, {time.perf_counter() - t0:.2f} s)"
        except BudgetExceeded as e:
            out[name] = f"over budget after {time.perf_counter() - t0:.1f} s ({e})"
    return out


def _timed(fn):
    """(seconds, result) of ``fn()`` with the garbage collector off while it runs (as ``timeit``
    does: a collection of the other views' objects would otherwise land in whichever call runs)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out
    finally:
        gc.enable()


def maintenance_rounds(
    links: dict,
    spec: Spec,
    batches: int,
    per_batch: int,
    seed: int,
    budget: int,
    window: int = 3,
) -> dict:
    """Delete batches then as many recovery batches; per batch the three methods' seconds and
    tuples touched, and the policy's pick (module docstring)."""
    t0 = time.perf_counter()
    wit, wit_size = absorption_state(spec, links, budget)
    wit_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    dred = DRedView.build(spec, LinkGraph(dict(links)))
    dred_build = time.perf_counter() - t0
    rng = random.Random(seed)
    live = dict(links)
    pairs = sorted({(min(s, d), max(s, d)) for s, d, _ in links.values()}, key=repr)
    rows, failed, costs = [], [], Costs()
    for b in range(2 * batches):
        if b < batches:
            chosen = rng.sample([p for p in pairs if p not in set(failed)], per_batch)
            failed += chosen
            gone = {r for r, (s, d, _) in live.items() if (min(s, d), max(s, d)) in set(chosen)}
            kind, ins = "delete", {}
        else:
            back = set(failed[(b - batches) * per_batch : (b - batches + 1) * per_batch])
            gone, kind = set(), "insert"
            ins = {r: lk for r, lk in links.items() if (min(lk[0], lk[1]), max(lk[0], lk[1])) in back}
        n = len(gone) + len(ins)
        pick, why = choose(costs, list(METHODS), window, n, b + 1)
        for r in gone:
            del live[r]
        live.update(ins)
        row = {"batch": b + 1, "kind": kind, "links": n, "policy": pick, "why": why}
        secs, touched = _timed(lambda: wit.delete(gone) if gone else wit.insert(ins))
        row |= {"absorption_s": secs, "absorption_touched": touched}
        secs, touched = _timed(lambda: sum(dred.delete(gone)) if gone else dred.insert(ins))
        row |= {"dred_s": secs, "dred_touched": touched}
        secs, fresh = _timed(lambda: fixpoint(spec, LinkGraph(dict(live))))
        row |= {"recompute_s": secs, "view": len(fresh)}
        assert dred.view == fresh and wit.tuples() == fresh, "maintained view != recomputed"
        for m in METHODS:
            costs.add(m, n, row[f"{m}_s"], b + 1)
        row["policy_s"] = row[f"{pick}_s"]
        rows.append(row)
    dels = [r for r in rows if r["kind"] == "delete"]
    totals = {m: sum(r[f"{m}_s"] for r in dels) for m in METHODS + ("policy",)}
    best = min(METHODS, key=lambda m: totals[m])
    return {
        "links": len(links),
        "rows": rows,
        "state": wit_size,
        "state_build_s": wit_build,
        "dred_build_s": dred_build,
        "delete_totals": totals,
        "delete_batches": len(dels),
        "best": best,
        "policy_vs_best": totals["policy"] / max(totals[best], 1e-9),
    }


SPARK_QUERIES = {
    "nodes within 3 hops of node 20": (
        "WITH RECURSIVE reach(node, hops) AS (SELECT dst, 1 FROM link WHERE src = 20 UNION SELECT l.dst, "
        "r.hops + 1 FROM reach r JOIN link l ON l.src = r.node WHERE r.hops < 3) SELECT node, MIN(hops) AS hops "
        "FROM reach GROUP BY node"
    ),
    "cheapest paths within 4 hops from node 20": (
        "WITH RECURSIVE p(src, dst, cost, hops) AS (SELECT src, dst, cost, 1 FROM link WHERE src = 20 UNION "
        "SELECT p.src, l.dst, p.cost + l.cost, p.hops + 1 FROM p JOIN link l ON p.dst = l.src "
        "WHERE p.hops < 4) SELECT src, dst, MIN(cost) AS cost, MIN(hops) AS hops FROM p GROUP BY src, dst"
    ),
}


def sketched_query(ctx, nodes: int, seed: int, density: float, fragments: int, reps: int, label: str) -> dict:
    """Load the topology as ``link`` with a layout on src (once); run ``SPARK_QUERIES[label]`` plain
    and sketched."""
    cat = ctx.catalog
    if not cat.exists("link") or cat.version("link").rows != len(_links(nodes, seed, density)):
        load_dataset(cat, "topology", nodes=nodes, seed=seed, density=density)
        build_layout(cat, "link", "src", rows_per_file=max(50, cat.version("link").rows // 40))
    sql = SPARK_QUERIES[label]
    shape = recognise(sql)
    rs = capture_recursive(cat, shape, fragments=fragments)
    view, cond = rs.source(cat)
    runs = {"plain": [], "sketched": []}
    for _ in range(reps):
        runs["plain"].append(run_recursive(cat, shape))
        runs["sketched"].append(run_recursive(cat, shape, None, cond, view=view))
    p, s = runs["plain"][-1], runs["sketched"][-1]
    return {
        "nodes": nodes,
        "density": density,
        "label": label,
        "sql": sql,
        "capture_s": rs.seconds,
        "fragments": f"{len(rs.fragments)} of {rs.part.n_fragments}",
        "selectivity": rs.selectivity(),
        "how": p.how,
        "plain": {
            "rows_read": p.scan_rows,
            "link_rows": p.link_rows,
            "rounds": p.rounds,
            "seconds": statistics.median(r.seconds for r in runs["plain"]),
        },
        "sketched": {
            "rows_read": s.scan_rows,
            "link_rows": s.link_rows,
            "rounds": s.rounds,
            "seconds": statistics.median(r.seconds for r in runs["sketched"]),
        },
        "answers_equal": sorted(p.rows) == sorted(s.rows),
        "answer_rows": len(p.rows),
    }


def native_vs_loop(ctx, reps: int) -> dict:
    """Spark's own recursive CTE (UNION ALL, hop-bounded) against the semi-naive loop on ``link``."""
    cat = ctx.catalog
    sql = (
        "WITH RECURSIVE p(src, dst, cost, hops) AS (SELECT src, dst, cost, 1 FROM link WHERE src = 20 UNION "
        "SELECT p.src, l.dst, p.cost + l.cost, p.hops + 1 FROM p JOIN link l ON p.dst = l.src "
        "WHERE p.hops < 4) SELECT src, dst, MIN(cost) AS cost FROM p GROUP BY src, dst"
    )
    shape = recognise(sql)
    loop = [run_recursive(cat, shape, how="loop") for _ in range(reps)]
    native = [run_native(cat, shape) for _ in range(reps)]
    return {
        "loop_s": statistics.median(r.seconds for r in loop),
        "native_s": statistics.median(r.seconds for r in native),
        "answers_equal": sorted(loop[-1].rows) == sorted(native[-1].rows),
    }


def bench_recursive(
    ctx,
    out,
    nodes: int = 1000,
    seed: int = 7,
    batches: int = 3,
    per_batch: int = 2,
    budget: int = 3_000_000,
    spark_nodes: int = 1000,
    fragments: int = 100,
    reps: int = 2,
    bdd_nodes: int = 2_000_000,
    bdd_seconds: float = 10.0,
    probe_budget: int = 200_000,
    densities: tuple = (1.0, 2.0, 4.0),
    radius_km: float = 150.0,
) -> dict:
    """Everything above, printed side by side (module docstring); returns the measurements."""
    res = {"maintenance": [], "spark": None}
    graphs = [(f"transit-stub, {nodes} nodes, density {d:g}", d, _links(nodes, seed, d)) for d in densities]
    if radius_km:
        graphs.append((f"airports within {radius_km:g} km", None, _airport_links(radius_km)))
    for label, density, links in graphs:
        for q in QUERIES:
            spec = _spec(q, links, seed)
            m = maintenance_rounds(links, spec, batches, per_batch, seed, budget)
            m |= {"graph": label, "density": density, "query": q, "nodes": nodes}
            if q == "reach(node) from 1":
                m["alternatives"] = alternatives(spec, links, probe_budget, bdd_nodes, bdd_seconds)
            res["maintenance"].append(m)
            _print_maintenance(out, m)
    if ctx is not None:
        res["spark"] = [sketched_query(ctx, spark_nodes, seed, 2.0, fragments, reps, q) for q in SPARK_QUERIES]
        res["native"] = native_vs_loop(ctx, reps)
        for s in res["spark"]:
            _print_spark(out, s)
        _print_native(out, res["native"])
    return res


def _print_maintenance(out, m: dict) -> None:
    out.print(
        f"{m['graph']} ({m['links']:,} link rows), view {m['query']}: absorption state {m['state']} "
        f"built in {m['state_build_s']:.2f} s, DRed view in {m['dred_build_s']:.2f} s",
        highlight=False,
    )
    for k, v in (m.get("alternatives") or {}).items():
        out.print(f"  {k}: {v}", highlight=False)
    out.print(
        "  batch kind    links | absorption s (touched) | DRed s (touched) | recompute s (view) | policy",
        highlight=False,
    )
    for r in m["rows"]:
        out.print(
            f"  {r['batch']:>5} {r['kind']:<7} {r['links']:>5} | {r['absorption_s']:.4f} ({r['absorption_touched']:,})"
            f" | {r['dred_s']:.4f} ({r['dred_touched']:,}) | {r['recompute_s']:.4f} ({r['view']:,}) | "
            f"{r['policy']} ({r['why']})",
            highlight=False,
        )
    t, k = m["delete_totals"], max(1, m["delete_batches"])
    out.print(
        f"  deletions, mean s per batch: absorption {t['absorption'] / k:.4f}, DRed {t['dred'] / k:.4f}, "
        f"recomputation {t['recompute'] / k:.4f}; policy {t['policy'] / k:.4f} = "
        f"{m['policy_vs_best']:.2f}x the best ({m['best']})",
        highlight=False,
    )


def _print_spark(out, s: dict) -> None:
    out.print(
        f"Spark, topology {s['nodes']} nodes: {s['label']}; sketch {s['fragments']} fragments of link.src "
        f"({s['selectivity']:.1%} of the links), captured in {s['capture_s']:.2f} s",
        highlight=False,
    )
    for k in ("plain", "sketched"):
        r = s[k]
        out.print(
            f"  {k:<8}: {r['seconds']:.2f} s, {r['rows_read']:,} rows read, "
            f"{r['link_rows']:,} link rows in the recursion, {r['rounds']} rounds",
            highlight=False,
        )
    out.print(f"  evaluated by: {s['how']}; answers equal: {s['answers_equal']} ({s['answer_rows']} rows)",
              highlight=False)


def _print_native(out, n: dict) -> None:
    out.print(
        "Forced each way (cheapest paths within 4 hops): Spark recursive CTE (UNION ALL) "
        f"{n['native_s']:.2f} s vs semi-naive loop {n['loop_s']:.2f} s (answers equal: {n['answers_equal']})",
        highlight=False,
    )
