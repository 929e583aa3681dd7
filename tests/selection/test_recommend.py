"""`advisor recommend` end to end on a small generated table (40k rows, shared Spark session).

Table ``t``: 200 groups ``g`` of 200 rows; every 10th group is heavy (``val`` in [50, 60), else
[0, 10)), so ``HAVING sum(val) > 5000`` keeps exactly the 20 heavy groups (10 % of the rows);
``ts`` is clustered by group, ``noise`` is independent of everything, ``tag`` has 5 values.
A clustered layout on ``g`` (one file per group) is what lets a sketch on ``g`` skip anything.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from advisor.context import Context
from advisor.errors import BadInput
from advisor.layout.clustered_copy import build_layout
from advisor.selection.recommend import recommend, recommend_command

HAVING = "SELECT g, sum(val) AS s FROM t GROUP BY g HAVING sum(val) > 5000"


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    rng = np.random.default_rng(3)
    g = np.repeat(np.arange(200), 200)
    heavy = g % 10 == 0
    pdf = pd.DataFrame({"g": g, "ts": g * 1000 + rng.integers(0, 1000, g.size),
                        "val": np.where(heavy, rng.uniform(50, 60, g.size), rng.uniform(0, 10, g.size)),
                        "noise": rng.integers(0, 100_000, g.size),
                        "tag": rng.choice(list("abcde"), g.size)})
    c = Context(tmp_path_factory.mktemp("rec"), spark=spark)
    c.catalog.create_table("t", spark.createDataFrame(pdf), "test")
    build_layout(c.catalog, "t", "g", rows_per_file=200)  # one file per group: sketches on g can skip
    return c


def cands(rec):
    return {c["attr"]: c for c in rec["candidates"]}


def test_having_pick_is_safe_and_its_captured_size_is_in_the_interval(ctx):
    out = io.StringIO()
    rec = recommend_command(ctx, Console(file=out, width=200), HAVING, capture=True, fragments=100)
    d, c = rec["decision"], cands(rec)
    assert rec["estimable"] and rec["table"] == "t" and rec["shape"] == "having"
    assert d["attr"] == "g" and d["go"] and d["reason"].startswith("go:")
    assert c["g"]["safe"] and c["g"]["picked"] and "gb" in c["g"]["roles"]
    real = rec["captured"]["selectivity"]
    lo, hi = c["g"]["ci"]
    assert 0.18 <= real <= 0.25  # 20 heavy groups of 10 %, about two groups per fragment of g
    assert lo - 0.02 <= real <= hi + 0.02 and abs(c["g"]["selectivity"] - real) <= 0.02
    text = out.getvalue()
    assert "g" in text and "go:" in text and "sketch" in text
    json.dumps(rec)  # the record is JSON-able


def test_unsafe_attributes_are_flagged_and_never_recommended(ctx):
    rec = recommend(ctx, "SELECT g, avg(val) AS a FROM t GROUP BY g HAVING avg(val) > 30", "CB-OPT",
                    fragments=100)
    c = cands(rec)
    unsafe = [a for a, x in c.items() if not x["safe"]]
    assert {"val", "noise"} <= set(unsafe) and all(not c[a]["estimated"] for a in unsafe)
    assert "avg" in c["val"]["safety_reason"]
    assert rec["decision"]["attr"] in {a for a, x in c.items() if x["safe"]}
    assert rec["captured"] is None  # nothing is captured without capture=True


def test_query_whose_every_candidate_covers_everything_is_no_go(ctx):
    rec = recommend(ctx, "SELECT tag, count(*) AS n FROM t GROUP BY tag HAVING count(*) > 0", "CB-OPT",
                    fragments=100, capture=True)
    est = [x for x in rec["candidates"] if x["estimated"]]
    assert len(est) >= 2 and all(x["selectivity"] > 0.95 for x in est)
    # tag (5 strings in every row group) could skip only on a layout clustered on it: priced with one
    tag = cands(rec)["tag"]
    assert tag["layout"]["table"] == "t" and tag["layout"]["attr"] == "tag" and not tag["layout"]["built"]
    assert tag["layout"]["build_rows"] > 0 and not tag["go"]
    assert not rec["decision"]["go"] and rec["decision"]["reason"].startswith("no-go")
    assert "80%" in rec["decision"]["reason"] and rec["captured"] is None


def test_opt_oracle_picks_the_smallest_real_sketch(ctx):
    rec = recommend(ctx, HAVING, "OPT", fragments=100)
    real = {a: x["real_selectivity"] for a, x in cands(rec).items() if x["real_selectivity"] is not None}
    assert len(real) >= 2 and real["noise"] > 0.95  # noise: sized with the layout it would need
    reads = {a: x["real_read_fraction"] for a, x in cands(rec).items() if a in real}
    # g reads least among the attributes a layout already serves; val would read its 10 % only
    # through a copy still to build (pages of a double column skip like any other's): the oracle
    # picks g, or val when the narrow copy of its columns is priced to pay (then it reads less)
    laid = {a: r for a, r in reads.items() if not cands(rec)[a]["layout"]}
    assert reads["g"] == min(laid.values()) and reads["ts"] > 0.95
    pick = rec["decision"]["attr"]
    assert pick == "g" or (pick == "val" and cands(rec)["val"]["layout"]["columns"] is not None
                           and reads["val"] < reads["g"]), pick
    assert 0.18 <= real["g"] <= 0.25
    # an oracle does not sample: it decides on the captured sizes, which stand in as its estimates
    assert rec["sample"] is None and "sampling" not in rec["seconds"] and rec["seconds"]["oracle"] > 0
    assert all(cands(rec)[a]["selectivity"] == real[a] for a in real)
    assert rec["seconds"]["oracle"] >= rec["seconds"]["oracle_partitions"] and rec["partitions_built"] >= 0
    # noise is spread over every file: sized as read through the layout it would need, with the reason
    note = cands(rec)["noise"]["layout_note"]
    assert note and "no layout clusters it" in note and cands(rec)["noise"]["layout"]["attr"] == "noise"


def test_exact_method_sizes_group_by_candidates_from_one_capture(ctx):
    """method exact: CB-OPT-GB's candidate g is sized by a capture by value; its size equals a
    fragment-id capture's, and the saved sketch is that capture. CB-OPT's pool holds non-group-by
    attributes, which only the estimator sizes: it falls back to sampling."""
    from advisor.engine.execute import versions_now
    from advisor.plan.parse import parse_sql
    from advisor.selection.cost_model import CostParams
    from advisor.sketch.capture import capture
    from advisor.sketch.lookup import sketch_rows
    from advisor.warehouse.sketch_records import load_sketch

    rec = recommend(ctx, HAVING, "CB-OPT-GB", method="exact", fragments=100, capture=True,
                    params=CostParams(measured=False))  # priors: the go does not depend on earlier tests
    c = cands(rec)["g"]
    assert rec["exact"] and rec["sample"] is None and rec["seconds"]["exact"] > 0
    assert c["ci"][0] == c["ci"][1] == c["selectivity"]
    q = parse_sql(HAVING, ctx.schema_lookup())
    versions = versions_now(ctx.catalog, q)
    slow = capture(ctx.catalog, q, {"t": "g"}, 100, versions, by_value=False).sketch
    total = ctx.catalog.version("t", versions["t"]).rows
    assert c["selectivity"] == pytest.approx(sketch_rows(ctx.catalog, slow) / total)
    assert rec["decision"]["go"] and rec["decision"]["attr"] == "g"
    saved = load_sketch(ctx.catalog.store, rec["captured"]["sketch_id"])
    assert saved.parts[0].fragments == slow.parts[0].fragments
    fallback = recommend(ctx, HAVING, "CB-OPT", method="exact", fragments=100)
    assert not fallback["exact"] and fallback["sample"] is not None


def test_read_fraction_follows_the_layout(ctx):
    """On the layout (one file per group) the sketch on g reads about what it covers; on the base
    files (two, each spanning half the groups) the same kind of sketch on ts would read them all,
    so ts is priced as read through a layout of its own, whose build it must pay for."""
    rec = recommend(ctx, HAVING, "CB-OPT", fragments=100)
    c = cands(rec)
    assert c["g"]["read_units"].startswith("layout") and c["g"]["layout"] is None
    assert c["g"]["read_fraction"] <= c["g"]["selectivity"] + 0.1
    assert c["ts"]["read_units"].startswith("a layout on ts to build") and c["ts"]["layout"]["attr"] == "ts"
    # 20 passing groups 2,000 rows apart: each touches one 1,000-row page of the 40 such a layout has
    assert "still read ~100%" in c["ts"]["layout_note"] and 0.45 <= c["ts"]["read_fraction"] <= 0.55
    assert c["ts"]["go"] is False and c["ts"]["layout"]["share_rows"] > 0
    # g is the pick; whether it is a go depends on the capture costs earlier tests measured in
    # this store (``advisor.calibration.measured_costs``), so only the layout's part of the reason is checked
    assert rec["decision"]["attr"] == "g" and "(layout " in rec["decision"]["reason"]


def test_layout_is_read_only_when_it_skips_clearly_more_than_the_base_files(ctx, spark):
    """t's base files span half the groups each: the layout on g (one group per file) pays. A copy
    whose base files hold about one group each, with a coarse layout (10 groups per file, so every
    layout file holds one of the 20 passing groups), is read from its base files, skipping most
    of their rows, with the plain answer."""
    from advisor.engine.execute import versions_now
    from advisor.partition.range_partition import load_partition
    from advisor.plan.parse import parse_sql
    from advisor.sketch.sketched_scan import SketchedScan
    from advisor.sketch.capture import capture
    from advisor.sketch.run import run_query

    cat = ctx.catalog
    q = parse_sql(HAVING, ctx.schema_lookup())
    sk = capture(cat, q, {"t": "g"}, 100, versions_now(cat, q)).sketch
    part, fr = load_partition(cat.store, sk.parts[0].partition_id), sk.parts[0].fragments
    assert SketchedScan(cat, "t", "g", cat.current_version("t"), part, fr).reads_layout

    cat.create_table("tc", cat.read("t").drop("_rid").repartitionByRange(200, "g").sortWithinPartitions("g"), "test")
    build_layout(cat, "tc", "g", rows_per_file=2000)
    qc = parse_sql(HAVING.replace(" t ", " tc "), ctx.schema_lookup())
    vc = versions_now(cat, qc)
    skc = capture(cat, qc, {"tc": "g"}, 100, vc).sketch
    partc = load_partition(cat.store, skc.parts[0].partition_id)
    assert not SketchedScan(cat, "tc", "g", vc["tc"], partc, skc.parts[0].fragments).reads_layout
    plain, sketched = run_query(cat, qc), run_query(cat, qc, sketch=skc)
    assert sorted(plain.rows) == sorted(sketched.rows) and len(plain.rows) == 20
    assert all("_base" in sc["relation"] for sc in sketched.metrics.scans)  # not the layout
    assert sketched.metrics.rows_read < plain.metrics.rows_read / 2  # row groups of sketched groups
    from advisor.sketch.lookup import read_fraction  # predicts the read of the files the scan really opens

    assert read_fraction(cat, skc, vc) == pytest.approx(sketched.metrics.rows_read / plain.metrics.rows_read, abs=0.05)


def test_sample_is_cached_and_a_new_table_version_maintains_it(ctx, spark):
    first = recommend(ctx, HAVING, fragments=100, sample_rate=0.1)
    again = recommend(ctx, HAVING.replace("5000", "4000"), fragments=100, sample_rate=0.1)
    assert again["sample"]["cached"] and again["sample"]["strata"] == ["g"]
    assert first["decision"]["attr"] == again["decision"]["attr"] == "g"
    ins = ctx.catalog.read("t").limit(10)
    ctx.catalog.apply_frames("t", ins, None)
    after = recommend(ctx, HAVING, fragments=100, sample_rate=0.1)
    assert not after["sample"]["cached"]
    rows = ctx.store.query("SELECT table_version, meta_json FROM samples WHERE table_name='t' "
                           "AND strata_json='[\"g\"]' AND theta=0.1")
    assert [r["table_version"] for r in rows] == [2]  # the key's version-1 sample is replaced
    assert json.loads(rows[0]["meta_json"])["maintained_from"] == 1  # from the 10-row delta, not redrawn


@pytest.mark.parametrize("kw,msg", [({"strategy": "BEST"}, "unknown strategy"), ({"sample_rate": 0}, "sample-rate"),
                                    ({"sample_rate": 1.5}, "sample-rate"), ({"fragments": 0}, "fragments"),
                                    ({"method": "magic"}, "method")])
def test_bad_input_is_one_clear_sentence(ctx, kw, msg):
    with pytest.raises(BadInput, match=msg):
        recommend_command(ctx, Console(file=io.StringIO()), HAVING, **kw)


def test_a_covariate_prior_is_named_in_the_estimation_notes(ctx, spark):
    """Table ``t2``: 1,000 groups of 40 rows whose mean is 10, or 30 for the last 200 groups (a block
    of adjacent keys), with row noise of sd 60: two sampled rows per group say little about their
    own group, but the groups' key ranges do.  The estimate names ``g`` as its prior's covariate."""
    rng = np.random.default_rng(8)
    g = np.repeat(np.arange(1000), 40)
    pdf = pd.DataFrame({"g": g, "val": np.where(g >= 800, 30.0, 10.0) + rng.normal(0, 60, g.size)})
    ctx.catalog.create_table("t2", spark.createDataFrame(pdf), "test")
    build_layout(ctx.catalog, "t2", "g", rows_per_file=4000)
    rec = recommend(ctx, "SELECT g, avg(val) AS a FROM t2 GROUP BY g HAVING avg(val) > 25", fragments=100)
    assert rec["estimable"] and cands(rec)["g"]["estimated"]
    assert any("alike in g" in n for n in rec["estimation_notes"]), rec["estimation_notes"]


def test_the_first_advice_of_a_process_is_marked_cold(ctx, monkeypatch):
    """Only the process's first sampling or sizing is ``cold`` (``calibrate.warm_first``); a
    recommendation that neither samples nor sizes (NO-PS) warms nothing."""
    from advisor.calibration import warmth

    monkeypatch.setattr(warmth, "_advised", False)
    none = recommend(ctx, HAVING, "NO-PS")
    first = recommend(ctx, HAVING, "CB-OPT-GB", method="exact", fragments=100)
    second = recommend(ctx, HAVING, "CB-OPT-GB", method="exact", fragments=100)
    assert none["cold"] and "partitions" not in none["seconds"]
    assert first["cold"] and "partitions" in first["seconds"]
    assert second["cold"] is False
    logged = [json.loads(x["record_json"])["cold"] for x in
              ctx.store.query("SELECT record_json FROM runs WHERE kind='recommend' ORDER BY id DESC LIMIT 2")]
    assert logged == [False, True]


def test_a_query_run_anyway_that_no_sketch_can_repay_is_declined_before_its_candidates(ctx):
    from advisor.selection.cost_model import CostParams

    hopeless = CostParams(prior_reuses=0.2)  # a fifth of a use cannot repay a capture of the table
    run = recommend(ctx, HAVING, params=hopeless, answer=[])
    assert run["cannot_pay"] and run["decision"]["reason"].startswith("no-go before sampling")
    assert run["candidates"] == [] and not run["decision"]["go"]  # no candidate enumerated, none proven
    what_if = recommend(ctx, HAVING, params=hopeless)  # an explicit recommendation still lists them
    assert what_if["cannot_pay"] and "g" in cands(what_if) and cands(what_if)["g"]["safe"]
