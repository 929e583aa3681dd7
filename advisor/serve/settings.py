"""What a caller of the advise path chooses: the strategy, the estimator's knobs and which stages run.

>>> s = AdviseSettings(strategy="cb-opt-gb")
>>> s.strategy, s.advise, s.use
('CB-OPT-GB', True, True)
>>> AdviseSettings(use=False).plain
True
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.errors import BadInput
from advisor.selection.strategies import strategy_draw, unknown_strategy


@dataclass(frozen=True)
class AdviseSettings:
    """``use``: reuse stored sketches at all (False: a plain run); ``advise``: without a usable
    stored sketch, estimate and decide whether to capture one (False: reuse only);
    ``build_layouts``: a decision may build the clustered layout a sketch needs to skip.
    ``measured_costs``: weigh the store's measured costs (False: the cost model's priors only);
    ``measure_recapture``: after each incremental maintenance step also recapture (not stored) and
    compare, for the replay's report; ``uses``: how many more times the caller expects the query
    to run (default: the cost model's prior plus the template's history); ``copy_budget_mb``: the
    disk the copies the advisor builds may take (None: no limit; ``advisor.selection.copy_budget``)."""

    strategy: str = "CB-OPT-GB"
    sample_rate: float = 0.05
    fragments: int | None = None
    method: str = "bootstrap"
    seed: int = 0
    measured_costs: bool = True
    measure_recapture: bool = False
    use: bool = True
    advise: bool = True
    build_layouts: bool = True
    uses: float | None = None
    copy_budget_mb: float | None = None

    def __post_init__(self):
        got = strategy_draw(self.strategy)
        if got is None:
            raise BadInput(unknown_strategy(self.strategy))
        object.__setattr__(self, "strategy", self.strategy.strip().upper())
        if not 0 < self.sample_rate <= 1:
            raise BadInput(f"the sample rate must be in (0, 1], got {self.sample_rate}")
        if self.method not in ("bootstrap", "clt", "exact"):
            raise BadInput(f"unknown method {self.method!r} (choose from: bootstrap, clt, exact)")
        if self.copy_budget_mb is not None and not self.copy_budget_mb >= 0:
            raise BadInput(f"the copy budget must be >= 0 MB, got {self.copy_budget_mb}")
        if self.uses is not None and not self.uses > 0:
            raise BadInput(f"the expected uses must be positive, got {self.uses}")

    @property
    def plain(self) -> bool:
        """Whether no sketch is ever used (``--no-use`` or strategy NO-PS)."""
        return not self.use or self.strategy == "NO-PS"
