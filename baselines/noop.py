"""The no-op policy: never calls a tool. Its score is 0 by construction (no incident is ever
reported), and its run is the reference for the degradation figure.

>>> NoopPolicy().act(None) is None
True
"""

from __future__ import annotations

from typing import Any

from baselines.base import Policy


class NoopPolicy(Policy):
    name = "noop"

    def act(self, session: Any) -> None:
        return None
