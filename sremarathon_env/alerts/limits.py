"""Query limits and the structured error every query failure becomes.

>>> QueryError("bad_data", "unclosed left parenthesis").to_dict()
{'status': 'error', 'errorType': 'bad_data', 'error': 'unclosed left parenthesis'}
>>> Limits().max_series
20000
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["bad_data", "too_expensive", "execution"]


class QueryError(Exception):
    """A query that cannot be answered: bad_data (parse/type errors), too_expensive, execution."""

    def __init__(self, kind: Kind, message: str):
        super().__init__(message)
        self.kind: Kind = kind
        self.message = message

    def to_dict(self) -> dict:
        """Shaped like the Prometheus HTTP API's error body."""
        return {"status": "error", "errorType": self.kind, "error": self.message}

    def __repr__(self) -> str:
        return f"QueryError({self.kind!r}, {self.message!r})"


@dataclass(frozen=True)
class Limits:
    """Bounds on one query. Defaults follow Prometheus's spirit, scaled to the twin."""

    max_series: int = 20000  #: series touched by all selectors of one query
    max_points: int = 500000  #: points returned (series x steps) by one query
    max_steps: int = 11000  #: evaluation steps of a range query (Prometheus: 11000)
    max_subquery_steps: int = 50000  #: inner steps of all subqueries of one query
    max_query_length: int = 10000  #: characters
    lookback_ms: int = 300000  #: staleness / lookback delta (5 minutes)
    #: True: a missing sample after a present one is a staleness marker (Prometheus scrape
    #: semantics: a series that disappears from a scrape goes stale at once). False: missing
    #: samples are gaps, and the last sample stays visible for the lookback delta.
    stale_on_gap: bool = True
