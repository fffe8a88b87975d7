"""The plan's ``and`` / ``unless`` node (right rows' presence reduced per matching signature into a buffer with a
False row for left rows without a match) gives what the generic evaluator's ``set_op`` gives: random label sets with
shared and missing signatures, ``on`` / ``ignoring``, right rows grouped in order or not, an empty right side."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.alerts import syntax as S
from sremarathon_env.alerts.plan import PackPlan
from sremarathon_env.alerts.values import Vec
from sremarathon_env.alerts.vectorops import set_op
from sremarathon_env.telemetry.store import MetricStore


def test_and_unless_equal_the_generic_set_operation():
    rng = np.random.default_rng(4)
    plan = PackPlan(PromQLEngine(MetricStore(step_s=15.0)), [])
    for case in range(300):
        T = int(rng.integers(1, 9))

        def side(n):
            labels = sorted({(("a", f"a{int(rng.integers(4))}"), ("b", f"b{int(rng.integers(3))}"),
                              ("i", f"{int(rng.integers(50))}")) for _ in range(n)})
            v = rng.normal(size=(len(labels), T))
            return labels, v, rng.random((len(labels), T)) < 0.6

        ll, lv, lp = side(int(rng.integers(1, 10)))
        rl, rv, rp = side(int(rng.integers(0, 10)))
        on = bool(rng.random() < 0.5)
        names = ("a",) if rng.random() < 0.5 else ("a", "b")
        for op in ("and", "unless"):
            node = SimpleNamespace(op=op, on=on, match_labels=names)
            lhs = SimpleNamespace(labels=ll, value=lambda E, lv=lv, lp=lp: (lv, lp))
            rhs = SimpleNamespace(labels=rl, value=lambda E, rv=rv, rp=rp: (rv, rp))
            got_v, got_p = plan._set_op(node, lhs, rhs).compute(SimpleNamespace(T=T))
            want = set_op(op, Vec(ll, lv, lp), Vec(rl, rv, rp), on, names)
            assert want.labels == ll and got_v is lv, (case, op)
            assert np.array_equal(got_p, want.p), (case, op)
