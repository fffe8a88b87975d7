"""Scoring parameters, read from the bundle's ``run`` record (defaults when it is absent).

>>> p = Params.from_run({"cadence_s": 120.0, "tick_s": 15.0, "hold_s": 120.0})
>>> p.n_hold, p.resolve(135.0), p.resolve(240.0)
(8, 240.0, 240.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Params:
    cadence_s: float = 120.0
    tick_s: float = 15.0
    hold_s: float = 120.0
    grace_s: float = 60.0
    penalty_per_forbidden: float = 1.0

    @classmethod
    def from_run(cls, run: dict[str, Any] | None) -> "Params":
        if not run:
            return cls()
        kw = {k: float(run[k]) for k in ("cadence_s", "tick_s", "hold_s", "grace_s", "penalty_per_forbidden")
              if run.get(k) is not None}
        return cls(**kw)

    @property
    def n_hold(self) -> int:
        """Consecutive healthy ticks that make a repair hold: round(hold_s / tick_s), at least 1."""
        return max(1, round(self.hold_s / self.tick_s))

    def resolve(self, t: float) -> float:
        """The first invocation time at or after ``t`` (invocations at k * cadence_s, k >= 1)."""
        return max(1, math.ceil(t / self.cadence_s - 1e-9)) * self.cadence_s

    def contiguous(self, prev_t: float, t: float) -> bool:
        """``t`` is the tick right after ``prev_t`` (compared on a millisecond grid)."""
        return round(t * 1000) == round((prev_t + self.tick_s) * 1000)
