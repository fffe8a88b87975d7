"""A plan aggregation node keeps per-call helpers (the flat (group, time) cell of each element for sums and counts,
the group layout for the presence): one node evaluated over calls of different lengths gives, at each call, what
``add.at`` / ``logical_or.at`` over the group index of the rows gives (the row-after-row fold), bit for bit."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sremarathon_env.alerts.plan import _Agg
from sremarathon_env.alerts.vectorops import groups_of


def _bits(a: np.ndarray) -> list:
    return np.where(np.isnan(a), np.nan, a).view(np.int64).tolist()


def test_aggregation_node_over_calls_of_different_lengths():
    rng = np.random.default_rng(3)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324, 0.1])
    for case in range(200):
        G = int(rng.integers(2, 6))
        raw = rng.integers(0, G, size=int(rng.integers(G + 1, 25)))
        raw[:G] = rng.permutation(G)
        if rng.random() < 0.3:
            raw = np.sort(raw)
        labels = [(("g", f"g{int(x)}"), ("i", f"{i:03d}")) for i, x in enumerate(raw)]
        keys, gid = groups_of(labels, False, ("g",))
        n = len(raw)
        data = {}
        child = SimpleNamespace(value=lambda E: data["vp"])
        nodes = {op: _Agg(op, child, keys, gid) for op in ("sum", "count", "group")}
        for T in (8, 1, 8, 3, 5):
            v = np.where(rng.random((n, T)) < 0.5, special[rng.integers(len(special), size=(n, T))],
                         rng.normal(size=(n, T)))
            p = rng.random((n, T)) < 0.7
            data["vp"] = (v, p)
            want_p = np.zeros((len(keys), T), bool)
            np.logical_or.at(want_p, gid, p)
            want = {"sum": np.full((len(keys), T), -0.0), "count": np.zeros((len(keys), T))}
            with np.errstate(all="ignore"):
                np.add.at(want["sum"], gid, np.where(p, v, 0.0))
                np.add.at(want["count"], gid, p.astype(np.float64))
                for op, node in nodes.items():
                    got_v, got_p = node.compute(SimpleNamespace(T=T))
                    assert np.array_equal(got_p, want_p), (case, op, T)
                    if op in want:
                        assert _bits(got_v) == _bits(want[op]), (case, op, T)
