"""Property tests (digest T15 / §7.1.12): for random tables, partitions, queries and 1-5 random
insert/delete batches, the incrementally maintained sketch equals the lineage sketch recomputed
from scratch by the reference evaluator, and every operator state equals the state rebuilt from
scratch on the new tables.

Five tests x 110 derandomized examples = 550 generated batch sequences in the normal run (about
70 s); the `soak` variant runs ten times as many, 1100 per family (`make soak` / `pytest -m soak`).
"""

from __future__ import annotations


import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.maintain import reference as ref
from advisor.maintain.base_side import PandasBase
from advisor.maintain.engine import Maintainer, MaintState
from advisor.plan import ir
from maintain_helpers import agg, distinct, join, part, project, scan, select, topk, union

N_EXAMPLES = 110
RUNS = {"sequences": 0, "batches": 0}  # executed counts, for reporting

COMMON = dict(derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
NORMAL = settings(max_examples=N_EXAMPLES, **COMMON)
SOAK = settings(max_examples=10 * N_EXAMPLES, **COMMON)

R_COLS = ["a", "b", "c"]
S_COLS = ["d", "e"]
VAL = st.integers(0, 6)
NULLABLE = st.one_of(st.none(), VAL, VAL, VAL, VAL)


# ---------- data ----------
def r_rows():
    return st.lists(st.tuples(VAL, VAL, NULLABLE), max_size=60)


def s_rows():
    return st.lists(st.tuples(VAL, NULLABLE), max_size=30)


def make_table(rows, cols, start=0) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=cols, dtype=object) if rows else pd.DataFrame({c: [] for c in cols})
    df["_rid"] = list(range(start, start + len(df)))
    return df


bounds = st.lists(st.integers(0, 7), max_size=3, unique=True).map(sorted)


# ---------- queries ----------
def pred(draw, cols, nullable=()):
    c = draw(st.sampled_from(cols))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "<>"]))
    p = f"{c} {op} {draw(VAL)}"
    extra = draw(st.sampled_from(["", "", "and", "or", "null"]))
    if extra in ("and", "or"):
        c2 = draw(st.sampled_from(cols))
        p = f"({p}) {extra.upper()} {c2} {draw(st.sampled_from(['<', '>=', '<>']))} {draw(VAL)}"
    elif extra == "null" and nullable:
        p = f"({p}) OR {draw(st.sampled_from(list(nullable)))} IS NULL"
    return p


AGGS = [("sum", "c", "s_c"), ("count", None, "n"), ("avg", "c", "av"), ("min", "c", "mn"), ("max", "c", "mx"),
        ("count", "c", "nc"), ("count", "c", "ndc", True)]


def having(draw, outs):
    o = draw(st.sampled_from(outs))
    op = draw(st.sampled_from([">", ">=", "<", "<=", "<>"]))
    return f"{o} {op} {draw(st.integers(0, 12))}"


def r_scan(sid=1, prefix=""):
    return scan("R", [(c, "bigint") for c in R_COLS], sid, prefix)


def s_scan(sid=2):
    return scan("S", [(c, "bigint") for c in S_COLS], sid)


@st.composite
def q_spj(draw):
    kind = draw(st.sampled_from(["select", "distinct", "union", "join", "theta"]))
    r = r_scan()
    if kind == "select":
        return project(select(r, pred(draw, R_COLS, ["c"])), ["a", ("b + c", "x"), ("CASE WHEN c IS NULL THEN 0 ELSE c END", "y")])
    if kind == "distinct":
        base = select(r, pred(draw, R_COLS, ["c"])) if draw(st.booleans()) else r
        return distinct(project(base, draw(st.sampled_from([["b"], ["a", "b"], ["c"]]))))
    if kind == "union":
        left = project(select(r, pred(draw, R_COLS)), ["a", "b"])
        right = project(select(s_scan(), pred(draw, S_COLS, ["e"])), ["d", "e"])
        return union(left, right, ["u1", "u2"])
    if kind == "join":
        return select(join(r, s_scan(), draw(st.sampled_from(["b = d", "a = d", "c = e"]))), pred(draw, R_COLS + S_COLS))
    return join(select(r, pred(draw, R_COLS)), s_scan(), draw(st.sampled_from(["b < d", "a = d AND c > e", None])))


@st.composite
def q_agg(draw):
    r = r_scan()
    base = select(r, pred(draw, R_COLS, ["c"])) if draw(st.booleans()) else r
    if draw(st.integers(0, 3)) == 0:  # nested aggregate
        inner = agg(base, ["a", "b"], [("sum", "c", "s_c"), ("count", None, "n")])
        if draw(st.booleans()):
            inner = select(inner, having(draw, ["s_c", "n"]))
        outer = agg(inner, draw(st.sampled_from([["a"], []])), [("count", None, "m"), ("max", "s_c", "mx"), ("sum", "n", "tn")])
        return select(outer, having(draw, ["m", "mx", "tn"]))
    keys = draw(st.sampled_from([["a"], ["b"], ["a", "b"], [], ["c"]]))
    aggs = draw(st.lists(st.sampled_from(AGGS), min_size=1, max_size=3, unique_by=lambda a: a[2]))
    g = agg(base, keys, aggs)
    if draw(st.booleans()):
        return g  # no HAVING: every group's lineage
    return select(g, having(draw, [a[2] for a in aggs] + keys))


@st.composite
def q_join_agg(draw):
    r, s = r_scan(), s_scan()
    if draw(st.integers(0, 4)) == 0:  # self join
        r2 = r_scan(3, "r2_")
        j = join(r, r2, "a = r2_b")
        g = agg(j, ["a"], [("sum", "r2_a", "sa"), ("count", None, "n")])
        return select(g, having(draw, ["sa", "n"]))
    left = select(r, pred(draw, R_COLS)) if draw(st.booleans()) else r
    left = project(left, ["a", "b", "c"])
    j = join(left, s, draw(st.sampled_from(["b = d", "a = d", "b = d AND c <= e"])))
    keys = draw(st.sampled_from([["a"], ["e"], ["a", "d"], []]))
    g = agg(j, keys, [("sum", "e", "se"), ("count", None, "n"), ("max", "c", "mx"), ("avg", "e", "ae")])
    return select(g, having(draw, ["se", "n", "mx", "ae"]))


@st.composite
def q_topk(draw):
    r = r_scan()
    k = draw(st.integers(1, 3))
    asc = draw(st.booleans())
    if draw(st.booleans()):
        g = agg(r, ["b"], [("sum", "c", "s_c"), ("count", None, "n")])
        node = topk(g, [(draw(st.sampled_from(["s_c", "n"])), asc)], k)
        if draw(st.booleans()):
            node = select(node, having(draw, ["s_c", "n"]))
        return node
    base = project(r, ["b", "c"]) if draw(st.booleans()) else r
    return topk(base, [(draw(st.sampled_from(["c", "b"])), asc)], k)


def sketched_for(draw, root):
    """Sketch most scans (at least one) on a random attribute with random boundaries."""
    scans = [n for n in root.walk() if isinstance(n, ir.Scan)]
    chosen = [s for s in scans if draw(st.integers(0, 5))] or scans[:1]
    out = {}
    for s in chosen:
        attr = draw(st.sampled_from(s.cols)).name
        out[s.scan_id] = (attr, part(s.table, attr, draw(bounds), pid=s.scan_id))
    return out


# ---------- the check ----------
def draw_batch(data, tables, next_rid):
    delta, new = {}, {}
    for name, cols, gen in (("R", R_COLS, st.tuples(VAL, VAL, NULLABLE)), ("S", S_COLS, st.tuples(VAL, NULLABLE))):
        t = tables[name]
        ins_rows = data.draw(st.lists(gen, max_size=4))
        rids = t["_rid"].tolist()
        bias = data.draw(st.sampled_from([None, None] + [(c, asc) for c in cols for asc in (True, False)]))
        if bias and len(t):  # aim deletions at the rows a top-k or min/max most likely uses
            srt = t.assign(_k=t[bias[0]].astype(float)).sort_values("_k", ascending=bias[1], na_position="first")
            rids = srt["_rid"].tolist()[:5]
        del_rids = data.draw(st.lists(st.sampled_from(rids), unique=True, max_size=4)) if rids else []
        ins = make_table(ins_rows, cols, next_rid)
        next_rid += len(ins)
        dels = t[t["_rid"].isin(del_rids)]
        if len(ins) or len(dels):
            delta[name] = (ins if len(ins) else None, dels if len(dels) else None)
        new[name] = pd.concat([t[~t["_rid"].isin(del_rids)], ins], ignore_index=True) if len(ins) else \
            t[~t["_rid"].isin(del_rids)].reset_index(drop=True)
    return delta, new, next_rid


def run_sequence(data, query_strategy, vary_options: bool = False):
    root = data.draw(query_strategy)
    sketched = sketched_for(data.draw, root)
    tables = {"R": make_table(data.draw(r_rows()), R_COLS), "S": make_table(data.draw(s_rows()), S_COLS, 1000)}
    opts = {"topk_buffer": data.draw(st.sampled_from([None, 1, 2, 4]))}
    if vary_options:
        opts["pushdown_on"] = data.draw(st.booleans())
        opts["bloom"] = data.draw(st.booleans())
    state = Maintainer.init(root, sketched, tables, **opts)
    assert state.sketch() == ref.sketch(root, tables, sketched)
    next_rid = 2000
    for _ in range(data.draw(st.integers(1, 5))):
        delta, new, next_rid = draw_batch(data, tables, next_rid)
        if vary_options and data.draw(st.booleans()):
            state = MaintState.from_bytes(state.to_bytes())
        got = state.apply(delta, PandasBase(tables, new, sketched))
        want = ref.sketch(root, new, sketched)
        assert got == want, (got, want)
        fresh = Maintainer.init(root, sketched, new, **opts)
        assert state.snapshot() == fresh.snapshot()
        tables = new
        RUNS["batches"] += 1
    RUNS["sequences"] += 1


def _mixed():
    return st.one_of(q_spj(), q_agg(), q_join_agg(), q_topk())


@NORMAL
@given(st.data())
def test_select_project_union_distinct_join(data):
    run_sequence(data, q_spj())


@NORMAL
@given(st.data())
def test_aggregate_having_and_nested(data):
    run_sequence(data, q_agg())


@NORMAL
@given(st.data())
def test_join_then_aggregate(data):
    run_sequence(data, q_join_agg())


@NORMAL
@given(st.data())
def test_topk_asc_desc_with_small_buffers(data):
    run_sequence(data, q_topk())


@NORMAL
@given(st.data())
def test_mixed_with_options_and_round_trips(data):
    run_sequence(data, _mixed(), vary_options=True)


def _soak(strategy_fn, vary: bool):
    @SOAK
    @given(st.data())
    def run(data):
        run_sequence(data, strategy_fn(), vary_options=vary)

    return run


SOAK_RUNS = {"spj": _soak(q_spj, False), "agg": _soak(q_agg, False), "join_agg": _soak(q_join_agg, True),
             "topk": _soak(q_topk, True), "mixed": _soak(_mixed, True)}


@pytest.mark.soak
@pytest.mark.parametrize("family", sorted(SOAK_RUNS))
def test_soak(family):
    """Ten times the normal number of sequences per family (`make soak`; `make test` deselects it)."""
    SOAK_RUNS[family]()
