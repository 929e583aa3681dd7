"""Benchmark: one query's capture by value (values or value sets, where value lineage allows) against
its capture by fragment ids, and against the plain query, side by side in one process; and the
capture that also answers the query (what a capturing step of the product runs instead of the
plain query).

Per query: a plain warm-up run and one capture of each kind (first runs: code generation, the
fragment-id view), then `reps` rounds of plain, by value, by fragment ids, answering; medians.
The sketches of all captures must be equal and the answer the plain one (``same``).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from rich.table import Table

from advisor.engine.execute import versions_now
from advisor.plan.parse import parse_sql
from advisor.sketch.capture import capture, carried_tables, ensure_partition
from advisor.sketch.run import run_query

if TYPE_CHECKING:
    from advisor.context import Context


def bench_capture_paths(ctx: Context, suite, fragments: int = 10000, reps: int = 3) -> list[dict]:
    cat = ctx.catalog
    out = []
    for name, sql, on in suite:
        q = parse_sql(sql, ctx.schema_lookup())
        versions = versions_now(cat, q)
        parts = {t: ensure_partition(cat, t, a, fragments, versions[t]) for t, a in on.items()}
        kinds = carried_tables(q, on, parts)[0]
        run_query(cat, q, versions)

        def cap(by_value: bool):
            return capture(cat, q, on, fragments, versions, check=False, partitions=parts, by_value=by_value)

        def answering():
            return capture(cat, q, on, fragments, versions, check=False, partitions=parts, answer=True)

        first_val, first_ids, first_ans = cap(True), cap(False), answering()
        plain, val, ids, ans = [], [], [], []
        for _ in range(reps):
            plain.append(run_query(cat, q, versions))
            val.append(cap(True).seconds)
            ids.append(cap(False).seconds)
            ans.append(answering().seconds)
        frags = {p.table: p.fragments for p in first_val.sketch.parts}
        same = (frags == {p.table: p.fragments for p in first_ids.sketch.parts}
                == {p.table: p.fragments for p in first_ans.sketch.parts}
                and sorted(map(repr, first_ans.answer.rows)) == sorted(map(repr, plain[0].rows)))
        out.append({"query": name, "kinds": {t: kinds.get(t, "ids") for t in on},
                    "fragments": {t: len(f) for t, f in frags.items()}, "same": same,
                    "t_plain": statistics.median(r.seconds for r in plain), "t_value": statistics.median(val),
                    "t_ids": statistics.median(ids), "t_answer": statistics.median(ans),
                    "t_value_first": first_val.seconds, "t_ids_first": first_ids.seconds})
    return out


def render(console, results: list[dict]) -> None:
    tab = Table("query", "carried as", "fragments", "plain s", "by value s", "by ids s", "answering s",
                "value/plain", "ids/plain", "answering/plain", "first runs s (value, ids)", "same")
    for r in results:
        tab.add_row(r["query"], ", ".join(f"{t} {k}" for t, k in r["kinds"].items()),
                    ", ".join(str(v) for v in r["fragments"].values()), f"{r['t_plain']:.2f}",
                    f"{r['t_value']:.2f}", f"{r['t_ids']:.2f}", f"{r['t_answer']:.2f}",
                    f"{r['t_value'] / r['t_plain']:.2f}", f"{r['t_ids'] / r['t_plain']:.2f}",
                    f"{r['t_answer'] / r['t_plain']:.2f}", f"{r['t_value_first']:.2f}, {r['t_ids_first']:.2f}",
                    "yes" if r["same"] else "NO")
    console.print(tab)
