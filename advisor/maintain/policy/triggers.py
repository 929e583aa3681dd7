"""Where maintenance policies meet the commands: after an update batch is applied and before a
query uses a sketch. One policy object per sketch chain (template + bindings) is persisted in the
store, so arrival-aware and batched policies see the history across CLI invocations."""

from __future__ import annotations

import json
import pickle
import time
from typing import TYPE_CHECKING

from advisor.engine.execute import versions_now
from advisor.errors import BadInput
from advisor.maintain.policy.catch_up import buy_now, decline_reason, evidence
from advisor.maintain.policy.policies import make_policy
from advisor.maintain.spark.service import maintain_sketch, stale_heads
from advisor.maintain.spark.state_store import has as stored
from advisor.sketch.lookup import usable_sketches

if TYPE_CHECKING:
    from advisor.warehouse.catalog import Catalog
    from advisor.warehouse.store import Store

DEFAULT_POLICY = "lazy"


def policy_spec(store: Store) -> str:
    return store.setting("policy", DEFAULT_POLICY)


def set_policy(store: Store, spec: str) -> str:
    try:
        make_policy(spec)
    except (ValueError, KeyError) as e:
        raise BadInput(f"unknown maintenance policy {spec!r}: {e} (use eager, lazy, batched:N, batched:Ns or arrival)")
    store.set_setting("policy", spec)
    return spec


def _chain(sk) -> str:
    return json.dumps([sk.template, list(sk.bindings)], default=str)


def _load(store: Store, sk, spec: str):
    r = store.one("SELECT spec, blob FROM policy_state WHERE chain=?", (_chain(sk),))
    if r is not None and r["spec"] == spec:
        try:
            return pickle.loads(r["blob"])
        except Exception:
            pass
    return make_policy(spec)


def _save(store: Store, sk, spec: str, pol) -> None:
    with store.tx() as c:
        c.execute("INSERT OR REPLACE INTO policy_state(chain, spec, blob) VALUES (?,?,?)",
                  (_chain(sk), spec, pickle.dumps(pol)))


def after_apply(catalog: Catalog, table: str, n_tuples: int) -> list:
    """Tell every sketch reading `table` about the batch; maintain those whose policy says so."""
    spec = policy_spec(catalog.store)
    done = []
    for sk in stale_heads(catalog, {table}):
        pol = _load(catalog.store, sk, spec)
        now = time.time()
        if pol.on_update(now, n_tuples):
            res = maintain_sketch(catalog, sk.id)
            pol.on_maintained(time.time(), res.seconds, res.delta_rows)
            done.append(res)
        _save(catalog.store, sk, spec, pol)
    return done


def before_use(catalog: Catalog, query, declined: list | None = None, answer: bool = False,
               measured: bool = True) -> list:
    """Lazy catch-up: maintain the one stale sketch that will serve this query -- the smallest whose
    reuse for these bindings is proven and that does not cover nearly everything (the finder's
    tests, ignoring staleness).  Other stale sketches of the template wait until a query wants them;
    if the smallest usable sketch is current, nothing is maintained.  With ``declined`` (a list),
    maintenance that the store's measurements say costs more than it saves (``worth``) is skipped
    and the reason appended: the query then runs plain; maintenance worth it only as a purchase of
    operator state buys it at once (``worth.buy_now``).  With ``answer``, a recapture of a sketch
    whose query is this very query (same SQL) also answers it (``MaintResult.answer``).
    ``measured=False``: rent or buy state on priors alone (``maintain_sketch``)."""


    spec = policy_spec(catalog.store)
    done = []
    versions = versions_now(catalog, query)
    good, _ = usable_sketches(catalog, query, versions, allow_stale=True)
    for sk in good[:1]:
        if all(versions.get(t) == v for t, v in sk.data_versions.items() if t in versions):
            continue
        buy = False
        if declined is not None:
            has_state = stored(catalog.store, sk.id)
            ev = evidence(catalog, sk, has_state)
            why = decline_reason(ev)
            if why:
                declined.append(f"{why} (sketch {sk.id})")
                continue
            buy = buy_now(ev)  # worth it only as a purchase: no rent first
        pol = _load(catalog.store, sk, spec)
        pol.on_query(time.time())
        res = maintain_sketch(catalog, sk.id, answer=answer and sk.sql == query.sql, buy=buy,
                              measured=measured)
        pol.on_maintained(time.time(), res.seconds, res.delta_rows)
        _save(catalog.store, sk, spec, pol)
        done.append(res)
    return done
