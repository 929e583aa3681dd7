"""When to maintain a sketch: eager, lazy, batched and arrival-aware policies (pure decision logic).

A policy is told about the events of one sketch and answers "maintain now?":

* `on_update(now, n_tuples)`: an update batch touching the sketch's tables was committed;
* `on_query(now)`: a query wants to use the sketch. A stale sketch is never used, so this is True
  whenever updates are pending, for every policy (only *when else* to maintain differs);
* `tick(now)`: a timer (for time-based batching);
* `on_maintained(now, duration, n_tuples)`: maintenance ran (resets the pending counters; the
  arrival-aware policy also learns the cost of a run from it).

Policies: `Eager` (after every update), `Lazy` (only on use; IMP's default, it batches deltas and
skips unused sketches), `Batched(n_batches, seconds)` (after N pending update batches or T seconds
since the first pending one, seed 003's count/time triggers), and `ArrivalAware`, which picks
eager or lazy from the observed arrival pattern with the cost model below.

Cost model of `ArrivalAware` (minimise the expected maintenance delay a query sees)
--------------------------------------------------------------------------------
Observed: update batches arrive at rate lu (1 / mean gap between updates), each with s delta
tuples on average; queries arrive at rate lq. A maintenance run over n delta tuples takes
c(n) = a + b*n seconds (a: fixed cost per run - state load, job launch, join round trips; b: cost
per delta tuple), fitted from observed runs by least squares (defaults until enough runs).
Arrivals are modelled as Poisson processes.

* Eager: each update starts a run of d = a + b*s seconds off the query path; a query waits only
  for the work still queued when it arrives. Runs form an M/D/1 queue with load rho = lu*d; by
  PASTA and Pollaczek-Khinchine the expected unfinished work a query finds is
      W_eager = lu * d^2 / (2 * (1 - rho))       (infinite if rho >= 1: eager cannot keep up)
* Lazy: a query first maintains everything that arrived since the previous query. With an
  exponential gap between queries, the number N of update batches in it has
  E[N] = lu/lq and P(N >= 1) = lu/(lu + lq), so
      W_lazy = a * lu/(lu + lq) + b * s * lu/lq
Eager is chosen iff W_eager < W_lazy - tolerance; ties go to lazy, which does less total work
(at most one run per query instead of one per update). With fewer than `min_obs` observed gaps
of either kind the policy stays lazy.

Worked example (also a test): a = 0.5 s, b = 1 ms/tuple, s = 100 -> d = 0.6 s.
* updates every 10 s (lu = 0.1), queries every 2 s (lq = 0.5): rho = 0.06,
  W_eager = 0.1*0.36/(2*0.94) = 0.0191 s, W_lazy = 0.5*0.1/0.6 + 0.1*0.1/0.5 = 0.1033 s -> eager;
* updates every 0.5 s (lu = 2), same queries: rho = 1.2 -> W_eager = inf,
  W_lazy = 0.5*2/2.5 + 0.1*2/0.5 = 0.8 s -> lazy;
* a = 2 s, b = 0, s = 1 (d = 2 s), updates every 2.5 s (lu = 0.4), queries every 100 s
  (lq = 0.01): rho = 0.8, W_eager = 0.4*4/(2*0.2) = 4.0 s, W_lazy = 2*0.4/0.41 = 1.95 s -> lazy.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Optional

EAGER = "eager"
LAZY = "lazy"


class Policy:
    """Common bookkeeping: pending update batches/tuples since the last maintenance."""

    name = "policy"

    def __init__(self):
        self.pending_batches = 0
        self.pending_tuples = 0
        self.first_pending_at: Optional[float] = None

    def _note_update(self, now: float, n_tuples: int) -> None:
        if self.pending_batches == 0:
            self.first_pending_at = now
        self.pending_batches += 1
        self.pending_tuples += n_tuples

    def on_update(self, now: float, n_tuples: int) -> bool:
        """Record an update batch; True if the sketch should be maintained right away."""
        self._note_update(now, n_tuples)
        return False

    def on_query(self, now: float) -> bool:
        """A query wants the sketch: True if it must be maintained first (it is stale)."""
        return self.pending_batches > 0

    def tick(self, now: float) -> bool:
        """Timer check (only time-based policies ever say yes)."""
        return False

    def on_maintained(self, now: float, duration: Optional[float] = None, n_tuples: Optional[int] = None) -> None:
        self.pending_batches = 0
        self.pending_tuples = 0
        self.first_pending_at = None

    def steps_per_use(self, updates_per_use: float) -> float:
        """Maintenance steps a used sketch pays per use, for the cost model: the catch-up before a use
        (``hooks.before_use``) takes every waiting batch in one step, so at most one per use, and
        only uses that meet a new batch pay one."""
        return min(1.0, max(0.0, updates_per_use))


class Eager(Policy):
    name = EAGER

    def on_update(self, now: float, n_tuples: int) -> bool:
        self._note_update(now, n_tuples)
        return True

    def steps_per_use(self, updates_per_use: float) -> float:
        """One step per batch."""
        return max(0.0, updates_per_use)


class Lazy(Policy):
    name = LAZY


class Batched(Policy):
    """Maintain after `n_batches` pending update batches or `seconds` after the first pending one."""

    name = "batched"

    def __init__(self, n_batches: Optional[int] = None, seconds: Optional[float] = None):
        super().__init__()
        if n_batches is None and seconds is None:
            raise ValueError("batched policy needs n_batches or seconds")
        if n_batches is not None and n_batches < 1:
            raise ValueError("n_batches must be >= 1")
        self.n_batches = n_batches
        self.seconds = seconds

    def _due(self, now: float) -> bool:
        if self.pending_batches == 0:
            return False
        if self.n_batches is not None and self.pending_batches >= self.n_batches:
            return True
        return self.seconds is not None and now - self.first_pending_at >= self.seconds

    def on_update(self, now: float, n_tuples: int) -> bool:
        self._note_update(now, n_tuples)
        return self._due(now)

    def tick(self, now: float) -> bool:
        return self._due(now)

    def steps_per_use(self, updates_per_use: float) -> float:
        """One step per ``n_batches`` batches plus the catch-up before a use, never more than eager
        (a time limit alone is charged as eager)."""
        u = max(0.0, updates_per_use)
        if self.n_batches is None:
            return u
        return min(u, u / self.n_batches + min(1.0, u))


def expected_query_latency(lu: float, lq: float, s: float, a: float, b: float) -> dict[str, float]:
    """Expected maintenance delay per query under eager and lazy maintenance (see module doc)."""
    if lu <= 0:
        return {EAGER: 0.0, LAZY: 0.0}
    d = a + b * s
    rho = lu * d
    eager = math.inf if rho >= 1 else lu * d * d / (2 * (1 - rho))
    lazy = a * lu / (lu + lq) + (b * s * lu / lq if lq > 0 else math.inf)
    return {EAGER: eager, LAZY: lazy}


def _mean_rate(times: deque) -> Optional[float]:
    if len(times) < 2:
        return None
    span = times[-1] - times[0]
    return (len(times) - 1) / span if span > 0 else math.inf


class ArrivalAware(Policy):
    """Eager or lazy, whichever the cost model predicts gives queries the smaller delay."""

    name = "arrival-aware"

    def __init__(self, fixed_cost: float = 0.5, per_tuple_cost: float = 1e-4, window: int = 50,
                 tolerance: float = 0.0, min_obs: int = 2):
        super().__init__()
        self.a, self.b = fixed_cost, per_tuple_cost
        self.window, self.tolerance, self.min_obs = window, tolerance, min_obs
        self.update_times: deque = deque(maxlen=window + 1)
        self.update_sizes: deque = deque(maxlen=window)
        self.query_times: deque = deque(maxlen=window + 1)
        self.runs: deque = deque(maxlen=window)  # (n_tuples, duration)

    # ----- observations -----
    def on_update(self, now: float, n_tuples: int) -> bool:
        self._note_update(now, n_tuples)
        self.update_times.append(now)
        self.update_sizes.append(n_tuples)
        return self.mode() == EAGER

    def on_query(self, now: float) -> bool:
        self.query_times.append(now)
        return self.pending_batches > 0

    def on_maintained(self, now: float, duration: Optional[float] = None, n_tuples: Optional[int] = None) -> None:
        if duration is not None:
            self.runs.append((self.pending_tuples if n_tuples is None else n_tuples, duration))
            self._fit()
        super().on_maintained(now, duration, n_tuples)

    def _fit(self) -> None:
        """Least-squares c(n) = a + b*n over the observed runs (b kept if all n are equal)."""
        ns = [n for n, _ in self.runs]
        ds = [d for _, d in self.runs]
        mn, md = sum(ns) / len(ns), sum(ds) / len(ds)
        var = sum((n - mn) ** 2 for n in ns)
        if len(ns) >= 2 and var > 0:
            b = sum((n - mn) * (d - md) for n, d in zip(ns, ds)) / var
            self.b = max(b, 0.0)
        self.a = max(md - self.b * mn, 0.0)

    # ----- decision -----
    def rates(self) -> Optional[tuple[float, float, float]]:
        """(update rate, query rate, mean tuples per update) or None while too little is known."""
        if len(self.update_times) < self.min_obs + 1 or len(self.query_times) < self.min_obs + 1:
            return None
        lu, lq = _mean_rate(self.update_times), _mean_rate(self.query_times)
        s = sum(self.update_sizes) / len(self.update_sizes)
        return lu, lq, s

    def expected(self) -> Optional[dict[str, float]]:
        r = self.rates()
        return None if r is None else expected_query_latency(r[0], r[1], r[2], self.a, self.b)

    def mode(self) -> str:
        w = self.expected()
        if w is None:
            return LAZY
        return EAGER if w[EAGER] < w[LAZY] - self.tolerance else LAZY

    def steps_per_use(self, updates_per_use: float) -> float:
        """Charged as eager: the policy may turn eager once it has seen the arrivals."""
        return max(0.0, updates_per_use)


def make_policy(spec: str) -> Policy:
    """Parse 'eager', 'lazy', 'arrival', 'batched:N', 'batched:Ts' or 'batched:N,Ts'."""
    spec = spec.strip().lower()
    if spec == EAGER:
        return Eager()
    if spec == LAZY:
        return Lazy()
    if spec in ("arrival", "arrival-aware", "auto"):
        return ArrivalAware()
    if spec.startswith("batched:"):
        n, t = None, None
        for part in spec[len("batched:"):].split(","):
            part = part.strip()
            if part.endswith("s"):
                t = float(part[:-1])
            elif part:
                n = int(part)
        return Batched(n, t)
    raise ValueError(f"unknown maintenance policy {spec!r} (eager, lazy, arrival, batched:N[,Ts])")
