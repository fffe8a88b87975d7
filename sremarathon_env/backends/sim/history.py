"""Compact per-tick history the lazy readers (logs, traces) synthesise from.

Per tick: every call node's rate, latency, failure, unreachable and timeout shares; ready endpoints
per service; and why each edge cannot reach its callee. float32, grown by doubling; a 90-minute
Online Boutique run keeps about 0.4 MB.
"""

from __future__ import annotations

import numpy as np

from sremarathon_env.backends.sim.model import CompiledApp

FIELDS = ("node_rate", "node_lat", "node_fail", "node_unreach", "node_timeout", "node_sigma", "node_e_app")


class History:
    def __init__(self, m: CompiledApp, capacity: int = 384):
        self.m = m
        self.n = 0
        self.cap = capacity
        self.node = np.zeros((len(FIELDS), capacity, m.N), dtype=np.float32)
        self.ready = np.zeros((capacity, m.S), dtype=np.float32)
        self.reason = np.zeros((capacity, m.E), dtype=np.int8)

    def _grow(self, need: int) -> None:
        cap = max(need, self.cap * 2)
        node = np.zeros((len(FIELDS), cap, self.m.N), dtype=np.float32)
        node[:, : self.cap] = self.node
        ready = np.zeros((cap, self.m.S), dtype=np.float32)
        ready[: self.cap] = self.ready
        reason = np.zeros((cap, self.m.E), dtype=np.int8)
        reason[: self.cap] = self.reason
        self.node, self.ready, self.reason, self.cap = node, ready, reason, cap

    def record(self, k0: int, out, ready: np.ndarray, reason: np.ndarray, e_app: np.ndarray) -> None:
        """Store a block of ticks ``k0 .. k0+K-1`` (outputs with a leading tick axis)."""
        K = out.node_rate.shape[0]
        if k0 + K > self.cap:
            self._grow(k0 + K)
        nd = self.node[:, k0:k0 + K]
        nd[0] = out.node_rate
        nd[1] = out.node_lat
        nd[2] = out.node_fail
        nd[3] = out.node_unreach
        nd[4] = out.node_timeout
        nd[5] = out.node_sigma
        nd[6] = e_app
        self.ready[k0:k0 + K] = ready
        self.reason[k0:k0 + K] = reason
        self.n = max(self.n, k0 + K)

    def field(self, name: str, tick: int) -> np.ndarray:
        return self.node[FIELDS.index(name), tick]
