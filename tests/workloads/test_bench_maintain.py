"""The maintenance benchmark's summary (pure: hand-made step records, no Spark)."""

from workloads.bench.maintain_vs_recapture import break_even, summarise


def _rec(query, step, delta, t_inc, t_cap, same=True):
    return {"query": query, "step": step, "delta": delta, "kind": "mixed", "t_incremental": t_inc,
            "t_recapture": t_cap, "speedup": t_cap / t_inc, "same": same}


def test_summary_takes_medians_per_query_and_size_and_counts_steps_below_100x():
    recs = [_rec("q", 0, 1000, 0.050, 1.0),   # 20x: the warm-up step
            _rec("q", 1, 1000, 0.010, 2.0),   # 200x
            _rec("q", 2, 1000, 0.020, 1.5),   # 75x
            _rec("q", 3, 1000, 0.008, 1.2),   # 150x
            _rec("q", 4, 5, 0.001, 1.0, same=False)]
    by = {(s["query"], s["delta"]): s for s in summarise(recs)}
    s = by[("q", 1000)]
    assert s["steps"] == 4 and s["below_100x"] == 2
    assert s["t_incremental"] == (0.010 + 0.020) / 2 and s["t_recapture"] == (1.2 + 1.5) / 2
    assert s["ratio_median"] == (75 + 150) / 2 and s["ratio_min"] == 20
    assert s["all_same"] and not by[("q", 5)]["all_same"]
    warm = {(x["query"], x["delta"]): x for x in summarise(recs, skip_first=1)}[("q", 1000)]
    assert warm["steps"] == 3 and warm["below_100x"] == 1 and warm["ratio_min"] == 75


def test_break_even_is_the_first_size_where_incremental_is_not_faster():
    recs = [_rec("q", 0, 10, 0.01, 1.0), _rec("q", 1, 1000, 0.5, 1.0), _rec("q", 2, 5000, 2.0, 1.0),
            _rec("q", 3, 9000, 3.0, 1.0)]
    assert break_even(recs) == {"q/mixed": 5000}


def test_phased_benchmark_recaptures_every_version_and_matches(spark, tmp_path):
    """Phased order on real Spark: every step is maintained first, then recaptured at its own
    version afterwards; each maintained sketch must equal that recapture."""
    from advisor.context import Context
    from workloads.bench.maintain_vs_recapture import QUERIES, bench_maintain
    from workloads.data.datasets import load_dataset

    ctx = Context(tmp_path / "wh", spark=spark)
    load_dataset(ctx.catalog, "tpch", sf=0.01)
    q = [x for x in QUERIES if x[0] == "having_orderkey"]
    recs = bench_maintain(ctx, queries=q, sizes=(20,), kinds=("insert", "delete", "mixed"), repeat=2,
                          init_both=False, fragments=50, recaptures=2)
    assert [r["step"] for r in recs] == list(range(6))
    assert all(r["order"] == "phased" and r["same"] and r["t_recapture"] > 0 for r in recs)
    assert len({r["table_rows"] for r in recs}) > 1   # the versions really differ
