"""Scoring: pure functions from a verified bundle to a `ScoreReport` (no backend, clock or randomness).

The definitions, with worked examples, are in scoring/README.md. `score` is the batch scorer;
`IncrementalScorer` gives the same Marathon-Score record by record (the env's reward).

>>> from sremarathon_env.bundle import Recorder
>>> rec = Recorder(None)
>>> _ = rec.append("schedule", 0.0, {"faults": []})
>>> score(rec.records).marathon_score
0.0
"""

from __future__ import annotations

import os

from .batch import score
from .incremental import IncrementalScorer
from .params import Params
from .report import OUTCOMES, Degradation, FaultScore, ScoreReport, StageShares, Usage


def score_bundle(path: str | os.PathLike) -> ScoreReport:
    """Read and verify a bundle directory (raises `BundleError` if it does not verify), then score it."""
    from sremarathon_env.bundle import read_bundle

    b = read_bundle(path)
    report = score(b.records, complete=b.complete)
    report.digest = b.digest
    return report


__all__ = ["score", "score_bundle", "IncrementalScorer", "Params", "ScoreReport", "FaultScore", "StageShares",
           "Degradation", "Usage", "OUTCOMES"]
