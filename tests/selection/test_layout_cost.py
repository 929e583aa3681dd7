"""Pricing a narrow copy from measured builds: per row plus per byte, so a copy holding a larger
share of the table's bytes is not priced as if every byte cost what a narrow one's did."""

from __future__ import annotations

from advisor.selection.layout_cost import build_rows, log_build, narrow_build_rows
from advisor.warehouse.store import Store

ROWS = 6_000_000


def _builds(store: Store, table: str, pairs) -> None:
    for i, (share, seconds) in enumerate(pairs):
        log_build(store, {"id": f"{table}{i}", "table": table, "attr": "k", "columns": ["k", "v"],
                          "built_on": "driver"}, ROWS, seconds, share)


def test_builds_costing_the_same_at_every_width_price_a_wider_copy_about_the_same(tmp_path):
    store = Store(tmp_path, initialise=True, quiet=True)
    _builds(store, "lineitem", [(0.045, 1.7), (0.1, 2.2), (0.205, 2.7)])
    rows, source = narrow_build_rows(store, ROWS, 0.2, 0.2, 1.0, driver=True, table="lineitem")
    seconds = rows  # at a scan rate of 1 row per second (no fixed part) rows of scanning are seconds
    assert "3 measured" in source
    # Measured 2.7 s at a share of 0.205: a per-byte price (median seconds per row and share) said
    # 2.2 / 0.1 * 0.2 = 4.4 s; the fitted line stays within the measured range.
    assert 2.4 <= seconds <= 2.8, seconds


def test_a_single_build_scales_up_with_width_but_never_below_its_own_cost(tmp_path):
    store = Store(tmp_path, initialise=True, quiet=True)
    _builds(store, "lineitem", [(0.1, 2.0)])
    narrower, _ = narrow_build_rows(store, ROWS, 0.05, 0.05, 1.0, driver=True, table="lineitem")
    wider, _ = narrow_build_rows(store, ROWS, 0.3, 0.3, 1.0, driver=True, table="lineitem")
    assert abs(narrower - 2.0) < 1e-6
    assert abs(wider - 6.0) < 1e-6


def test_a_tables_own_builds_are_preferred_to_another_tables(tmp_path):
    store = Store(tmp_path, initialise=True, quiet=True)
    _builds(store, "orders", [(0.1, 9.0)])
    _builds(store, "lineitem", [(0.1, 2.0)])
    own, source = narrow_build_rows(store, ROWS, 0.1, 0.1, 1.0, driver=True, table="orders")
    assert abs(own - 9.0) < 1e-6 and "1 measured" in source
    unknown, _ = narrow_build_rows(store, ROWS, 0.1, 0.1, 1.0, driver=True, table="part")
    assert 2.0 <= unknown <= 9.0


def test_full_builds_do_not_price_narrow_copies(tmp_path):
    store = Store(tmp_path, initialise=True, quiet=True)
    log_build(store, {"id": "f", "table": "lineitem", "attr": "k", "columns": None, "built_on": "driver"},
              ROWS, 12.0)
    _, source = narrow_build_rows(store, ROWS, 0.1, 0.1, 1.0, driver=True, table="lineitem")
    assert source.startswith("prior")
    full, full_source = build_rows(store, ROWS, 1.0, driver=True)
    assert abs(full - 12.0) < 1e-6 and "1 measured" in full_source
