"""IR -> Spark SQL text, optionally instrumented for sketch capture (seed 001 §3, rules r0-r7).

Instrumentation carries one provenance column per sketched scan (Λ). Below the first aggregation
it is the row's fragment id (kind INT, the "delay" optimisation); in captures an aggregation
collects its group's ids into an array (kind IDS: ``collect_set``, later aggregations union the
arrays) and the one-row capture query holds the array of the provenance's ids per sketched scan.
The maintenance engine's side reads (``Gen.id_sets`` off) build Spark bitmaps instead (kind BM:
``bitmap_construct_agg(bitmap_bit_position(frag + 1))``, ORed by ``bitmap_or_agg``). A bitmap is a
4 KB variable-width buffer per group, which Spark aggregates by sorting every input row and which
takes groups x 4 KB per task; an array costs one entry per distinct id, never more than the
task's input rows, and aggregates by hashing.

Kind VAL carries the sketched attribute's *value* instead of a fragment id. It is used
only when every aggregation above the scan groups by that attribute (``advisor.plan.value_lineage``):
then all provenance rows of a group share the value, an aggregation keeps it with ``min``, the
root collects the distinct values, and the driver maps them to fragments.  No per-row fragment
assignment and no arrays of ids: the capture costs about one plain run of the query.

Kind SET carries a set of such values: where ``value_lineage.carried_kinds`` lets a value
pass an aggregation that does not keep it, that aggregation collects its input rows' values
(``collect_set`` of one-field structs, so a NULL value is kept), later ones union the sets, and
the root reads them out as VAL's root does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from advisor.plan import ir
from advisor.plan.uniqueness import unique_on_join_keys

INT, BM, IDS, VAL, SET = "int", "bm", "ids", "val", "set"


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def esql(e) -> str:
    return e.sql(dialect="spark")


# Spark pushes ``a IN (v1, ..., vn)`` to Parquet as ``a = v1 OR (... OR a = vn)``, nested n deep,
# when n is at most ``spark.sql.parquet.pushdown.inFilterThreshold`` (``advisor.engine.session`` sets
# it to this).  Executors deserialize that filter recursively: at about 700 values a task's stack
# overflows and the executor dies (StackOverflowError, reported as "Connection refused"; 600 passed).
IN_PUSHDOWN_MAX = 256


def in_lists(column: str, literals: list[str]) -> str:
    """``column IN (...)`` over ``literals``, as an OR of lists of at most ``IN_PUSHDOWN_MAX`` values
    each, so every list is pushed to Parquet whole and no pushed filter nests deeper than about
    ``IN_PUSHDOWN_MAX`` plus the number of lists.

    >>> in_lists("b", ["1", "2"])
    'b IN (1, 2)'
    >>> in_lists("b", [str(i) for i in range(300)]).count(" IN (")
    2
    """
    chunks = [literals[i:i + IN_PUSHDOWN_MAX] for i in range(0, len(literals), IN_PUSHDOWN_MAX)]
    lists = [f"{column} IN ({', '.join(c)})" for c in chunks]
    return lists[0] if len(lists) == 1 else "(" + " OR ".join(lists) + ")"


@dataclass
class Source:
    """How a scan reads its table: a FROM-able SQL fragment and, when instrumented, its fragment column."""

    from_sql: str
    frag_col: Optional[str] = None
    kind: str = INT  # INT: frag_col holds fragment ids; VAL: frag_col is the sketched attribute itself
    more_vals: tuple = ()  # VAL only: further attributes carried by value (Λ columns ``lam_name(id, j)``)
    absent: frozenset = frozenset()  # base columns the source lacks (a narrow copy): the query reads none


@dataclass
class Gen:
    source: Callable[[ir.Scan], Source]
    lams: dict[str, int] = field(default_factory=dict)  # Λ column -> scan_id
    n: int = 0
    to_set: dict = field(default_factory=dict)  # id(aggregation) -> Λ columns whose values become sets there
    id_sets: bool = False  # aggregations turn fragment ids into arrays of ids (IDS), not bitmaps (BM)

    def alias(self) -> str:
        self.n += 1
        return f"q{self.n}"


def lam_name(scan_id: int, j: int = 0) -> str:
    """Λ column of a scan; ``j > 0`` names the j-th extra value column (``Source.more_vals``)."""
    return f"__ps{scan_id}" if j == 0 else f"__ps{scan_id}_v{j}"


def null_flag(name: str) -> str:
    return name + "__null"


def _lam_agg(name: str, kind: str, root: bool = False, to_set: bool = False, id_sets: bool = False) -> str:
    if kind == VAL and to_set:  # the group's values, NULL kept inside its struct
        return f"collect_set(named_struct('v', {q(name)})) AS {q(name)}"
    if kind == SET:
        union = f"array_distinct(flatten(collect_list({q(name)})))"
        if root:
            return (f"filter(transform({union}, s -> s.v), v -> v IS NOT NULL) AS {q(name)}, "
                    f"max(CASE WHEN exists({q(name)}, s -> s.v IS NULL) THEN 1 ELSE 0 END) AS {q(null_flag(name))}")
        return f"{union} AS {q(name)}"
    if kind == VAL:
        if root:  # distinct values (collect_set drops NULLs: a flag says whether one was there)
            return (f"collect_set({q(name)}) AS {q(name)}, "
                    f"max(CASE WHEN {q(name)} IS NULL THEN 1 ELSE 0 END) AS {q(null_flag(name))}")
        return f"min({q(name)}) AS {q(name)}"  # constant within the group (value_lineage)
    if kind == INT and id_sets:
        return f"collect_set({q(name)}) AS {q(name)}"
    if kind == IDS:
        return f"array_distinct(flatten(collect_list({q(name)}))) AS {q(name)}"
    if kind == INT:
        return f"bitmap_construct_agg(bitmap_bit_position({q(name)} + 1)) AS {q(name)}"
    return f"bitmap_or_agg({q(name)}) AS {q(name)}"


def _after_agg(lams: dict[str, str], to_set=frozenset(), id_sets: bool = False) -> dict[str, str]:
    """Kinds after an aggregation: fragment ids become bitmaps (arrays of ids with ``id_sets``),
    values stay values (or become value sets, for the Λ columns in ``to_set``), sets stay sets."""
    ids = IDS if id_sets else BM
    return {x: SET if k == SET or (k == VAL and x in to_set) else VAL if k == VAL else IDS if k == IDS
            else ids for x, k in lams.items()}


def gen(node: ir.Node, g: Gen) -> tuple[str, dict[str, str]]:
    """SQL for node plus its Λ columns {name: kind}."""
    if isinstance(node, ir.Scan):
        src = g.source(node)
        items = [f"CAST(NULL AS {c.dtype}) AS {q(c.name)}" if c.source in src.absent else f"{q(c.source)} AS {q(c.name)}"
                 for c in node.cols]
        lams = {}
        if src.frag_col is not None:
            for j, col in enumerate((src.frag_col,) + tuple(src.more_vals)):
                ln = lam_name(node.scan_id, j)
                items.append(f"{q(col)} AS {q(ln)}")
                lams[ln] = src.kind
                g.lams[ln] = node.scan_id
        return f"SELECT {', '.join(items)} FROM {src.from_sql}", lams
    if isinstance(node, ir.Select):
        c, lams = gen(node.child, g)
        return f"SELECT * FROM ({c}) {g.alias()} WHERE {esql(node.cond)}", lams
    if isinstance(node, ir.Project):
        c, lams = gen(node.child, g)
        items = [f"{esql(e)} AS {q(col.name)}" for e, col in node.items] + [q(x) for x in lams]
        return f"SELECT {', '.join(items)} FROM ({c}) {g.alias()}", lams
    if isinstance(node, ir.Join):
        l, ll = gen(node.left, g)
        r, rl = gen(node.right, g)
        on = f" ON {esql(node.cond)}" if node.cond is not None else ""
        kw = "JOIN" if node.cond is not None else "CROSS JOIN"
        return f"SELECT * FROM ({l}) {g.alias()} {kw} ({r}) {g.alias()}{on}", {**ll, **rl}
    if isinstance(node, ir.PARTIAL_JOINS):
        return _partial_join(node, g)
    if isinstance(node, ir.Aggregate):
        c, lams = gen(node.child, g)
        items = [q(k) for k in node.keys]
        for a in node.aggs:
            if a.arg is None:
                call = "count(1)"
            else:
                call = f"{a.func}({'DISTINCT ' if a.distinct else ''}{esql(a.arg)})"
            items.append(f"{call} AS {q(a.out.name)}")
        conv = g.to_set.get(id(node), frozenset())
        items += [_lam_agg(x, k, to_set=x in conv, id_sets=g.id_sets) for x, k in lams.items()]
        group = f" GROUP BY {', '.join(q(k) for k in node.keys)}" if node.keys else ""
        return f"SELECT {', '.join(items)} FROM ({c}) {g.alias()}{group}", _after_agg(lams, conv, g.id_sets)
    if isinstance(node, ir.Distinct):
        c, lams = gen(node.child, g)
        cols = [q(x.name) for x in node.cols]
        if not lams:
            return f"SELECT DISTINCT * FROM ({c}) {g.alias()}", {}
        conv = g.to_set.get(id(node), frozenset())
        items = cols + [_lam_agg(x, k, to_set=x in conv, id_sets=g.id_sets) for x, k in lams.items()]
        return f"SELECT {', '.join(items)} FROM ({c}) {g.alias()} GROUP BY {', '.join(cols)}", \
            _after_agg(lams, conv, g.id_sets)
    if isinstance(node, ir.TopK):
        c, lams = gen(node.child, g)
        # identical tuples from different fragments: the lower fragment id wins (the maintenance
        # engine's rule), so captured and maintained sketches agree exactly
        ties = "".join(f", {q(x)} ASC" for x, k in lams.items() if k == INT)
        return f"SELECT * FROM ({c}) {g.alias()} ORDER BY {order_clause(node)}{ties} LIMIT {node.k}", lams
    if isinstance(node, ir.Union):
        l, ll = gen(node.left, g)
        r, rl = gen(node.right, g)
        all_l = {**ll, **rl}

        def side(sql, cols, mine):
            items = [f"{q(src.name)} AS {q(dst.name)}" for src, dst in zip(cols, node.cols)]
            for x, k in all_l.items():
                if x in mine:
                    items.append(q(x))
                else:
                    items.append(f"CAST(NULL AS {NULL_TYPE[k]}) AS {q(x)}")
            return f"SELECT {', '.join(items)} FROM ({sql}) {g.alias()}"

        return f"{side(l, node.left.cols, ll)} UNION ALL {side(r, node.right.cols, rl)}", all_l
    raise TypeError(f"unknown node {type(node).__name__}")


NULL_TYPE = {INT: "INT", BM: "BINARY", IDS: "ARRAY<INT>"}  # a UNION side's missing Λ column


def _partial_join(node, g: Gen) -> tuple[str, dict[str, str]]:
    """LEFT SEMI / LEFT ANTI / LEFT OUTER JOIN.  A semi-join whose right side carries Λ columns is
    written as the inner join it equals when the right side is unique on the join keys
    (``unique_on_join_keys``), so the right side's provenance reaches the output; Λ columns under
    an anti-join or the NULL-padded side of an outer join are not carried (the safety rules never
    sketch there)."""
    l, ll = gen(node.left, g)
    r, rl = gen(node.right, g)
    la, ra = g.alias(), g.alias()
    on = esql(node.cond)
    if isinstance(node, ir.SemiJoin):
        if rl:
            if not unique_on_join_keys(node):
                raise ValueError("a sketched scan under a semi-join whose right side is not unique on the join keys")
            extra = "".join(f", {ra}.{q(x)}" for x in rl)
            return f"SELECT {la}.*{extra} FROM ({l}) {la} JOIN ({r}) {ra} ON {on}", {**ll, **rl}
        return f"SELECT * FROM ({l}) {la} LEFT SEMI JOIN ({r}) {ra} ON {on}", ll
    if rl:
        raise ValueError(f"a sketched scan on the right of a {type(node).__name__}")
    if isinstance(node, ir.AntiJoin):
        return f"SELECT * FROM ({l}) {la} LEFT ANTI JOIN ({r}) {ra} ON {on}", ll
    cols = ", ".join([f"{la}.*"] + [f"{ra}.{q(c.name)}" for c in node.right.cols])
    return f"SELECT {cols} FROM ({l}) {la} LEFT OUTER JOIN ({r}) {ra} ON {on}", ll


def order_clause(node: ir.TopK) -> str:
    """ORDER BY keys, then every other attribute ascending: a deterministic total order."""
    parts = [f"{q(n)} {'ASC' if asc else 'DESC'}" for n, asc in node.order]
    used = {n for n, _ in node.order}
    parts += [f"{q(c.name)} ASC" for c in node.cols if c.name not in used]
    return ", ".join(parts)


def query_sql(query: ir.Query, source: Callable[[ir.Scan], Source]) -> str:
    """Plain (or sketch-filtered, via `source`) SQL for a query, with user-visible column names."""
    body, _ = gen(query.root, Gen(source))
    return _output(query, body, [])


def answer_sql(query: ir.Query, source: Callable[[ir.Scan], Source],
               to_set: dict | None = None) -> tuple[str, dict[str, int], dict[str, str]]:
    """The query's answer (user-visible columns first, in ``query_sql``'s order) with each result
    row's Λ columns after them, for a capture that answers its query in the same job: per row and
    sketched scan a value (VAL), a set of values (SET), a fragment id (INT, no aggregation above
    the scan) or an array of them (IDS); the driver unions them over the answer's rows.  Returns
    (sql, {Λ column: scan_id}, {Λ column: kind})."""
    g, body, lams = _instrumented(query, source, to_set, id_sets=True)
    return _output(query, body, list(lams)), dict(g.lams), dict(lams)


def _output(query: ir.Query, body: str, extra: list[str]) -> str:
    items = [f"{q(c.name)} AS {q(n)}" for c, n in zip(query.root.cols, query.output_names)]
    items += [q(x) for x in extra]
    order = ""
    visible = {c.name for c in query.root.cols}
    if query.order and all(n in visible for n, _ in query.order):
        parts = [f"{q(n)} {'ASC' if asc else 'DESC'}" for n, asc in query.order]
        used = {n for n, _ in query.order}
        parts += [f"{q(c.name)} ASC" for c in query.root.cols if c.name not in used]
        order = " ORDER BY " + ", ".join(parts)
    return f"SELECT {', '.join(items)} FROM ({body}) _out{order}"


def capture_sql(query: ir.Query, source: Callable[[ir.Scan], Source],
                to_set: dict | None = None) -> tuple[str, dict[str, int]]:
    """One-row capture query: per sketched scan the array of the fragment ids in the provenance
    (kind IDS), or the provenance's values and a NULL flag (kinds VAL and SET).  ``to_set``:
    {id(aggregation node): Λ columns turned into value sets there} (``value_lineage.carried_kinds``)."""
    g, body, lams = _instrumented(query, source, to_set, id_sets=True)
    items = [_lam_agg(x, k, root=True, id_sets=True) for x, k in lams.items()]
    return f"SELECT {', '.join(items)} FROM ({body}) _cap", dict(g.lams)


def _instrumented(query: ir.Query, source: Callable[[ir.Scan], Source], to_set: dict | None = None,
                  id_sets: bool = False) -> tuple[Gen, str, dict[str, str]]:
    """The instrumented body of ``query`` (``gen``) with its generator and root Λ kinds; at least one
    scan must be sketched."""
    g = Gen(source, to_set=dict(to_set or {}), id_sets=id_sets)
    body, lams = gen(query.root, g)
    if not lams:
        raise ValueError("no sketched scan in the query")
    return g, body, lams
