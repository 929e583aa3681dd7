"""The decision record: what the advise path did for one query, why, with the numbers it weighed,
and what the run read.  One format for `advisor run` (``--json``), `run --file`, the replay's
``run.json`` queries and the Python API's ``Advisor.last_decision``; ``version`` names it.

>>> rec = new_record("SELECT 1", "CB-OPT-GB", step=0, template="t1")
>>> rec["version"], rec["decision"]["action"]
(1, 'plain')
>>> digest([(1, 2.0000000001)]) == digest([(1, 2.0)])
True
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib

RECORD_VERSION = 1
ACTIONS = ("plain", "capture", "reuse", "no-go", "unsupported")


def new_record(sql: str, strategy: str, step=None, template: str | None = None, bindings=None) -> dict:
    """An empty record for one query: action ``plain`` until the path decides otherwise."""
    return {"version": RECORD_VERSION, "strategy": strategy, "step": step, "template": template, "sql": sql,
            "bindings": bindings or {}, "table_rows": None,
            "decision": {"action": "plain", "reason": "", "attr": None, "fragments": None, "layout": None},
            "sketch_id": None, "selectivity": {"estimated": None, "ci": None, "real": None}}


def _norm(v):
    """Row values made comparable across plans: doubles summed in a different order differ in the
    last bits, so floats are rounded to 9 significant digits; everything else is exact."""
    if isinstance(v, float):
        return float(format(v, ".9g"))
    if isinstance(v, decimal.Decimal):
        return str(v.normalize()) if v == v else "NaN"
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    return v


def digest(rows: list[tuple]) -> str:
    """Order-independent fingerprint of a bag of rows."""
    keys = sorted(repr(tuple(_norm(x) for x in r)) for r in rows)
    return hashlib.sha1("\n".join(keys).encode()).hexdigest()


def finish_record(rec: dict, res, secs: dict, lookup_s: float = 0.0, spent: float | None = None) -> dict:
    """Fill the record's scan, result and seconds.  ``spent`` is the step's wall time less the work
    done only to record it (scan metrics, real selectivity, measured recaptures); what of it no
    phase timed (parsing, recalling decisions, the finder after a capture, the run log) is ``other``."""
    m = res.metrics
    secs["query"] = res.seconds + lookup_s
    if spent is not None:
        secs["other"] = max(0.0, spent - sum(v for k, v in secs.items() if k != "other"))
    rec["lookup_seconds"] = round(lookup_s, 4)
    rec["scan"] = {"files": int(m.files_read), "bytes": int(m.bytes_read), "rows": int(m.rows_read)}
    rec["result"] = {"rows": len(res.rows), "digest": digest(res.rows)}
    rec["seconds"] = {k: round(v, 4) for k, v in secs.items()}
    rec["seconds"]["total"] = round(sum(v for k, v in secs.items() if k != "oracle"), 4)
    return rec


def one_line(rec: dict) -> str:
    """The sentence `advisor run` prints: what happened and why.

    >>> one_line({"decision": {"action": "reuse", "reason": "reused sketch 3", "attr": "lineitem.l_orderkey",
    ...           "layout": None}, "sketch_id": 3, "selectivity": {"real": 0.005},
    ...           "scan": {"rows": 3001}, "table_rows": 600572})
    'used sketch 3 (lineitem.l_orderkey, 0.5 % of rows): read 3,001 rows of tables holding 600,572; reused sketch 3'
    """
    d, scan, total = rec["decision"], rec.get("scan"), rec.get("table_rows")
    read = ("not run yet (a lazy DataFrame)" if scan is None
            else f"read {scan.get('rows', 0):,} rows" + (f" of tables holding {total:,}" if total else ""))
    if rec.get("sketch_id") is not None:
        sel = (rec.get("selectivity") or {}).get("real")
        what = f"{d['attr']}" + (f", {sel * 100:.1f} % of rows" if sel is not None else "")
        verb = "captured and used" if d["action"] == "capture" else "used"
        lay = d.get("layout") or {}
        built = f"; built layout {lay['id']} on {lay['table']}.{lay['attr']} ({lay['seconds']:.1f} s)" \
            if lay.get("built") else ""
        return f"{verb} sketch {rec['sketch_id']} ({what}): {read}{built}; {d['reason']}"
    why = d["reason"] or "no sketch was asked for"
    return f"no sketch: {read}; {why}"
