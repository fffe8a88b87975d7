"""The plan's series-set signature (read per call) and its per-name signatures (read per rebuild) take the families
the plan reads from a list kept while the store's family count stands. Held to their definitions (every family of
every read name, through the store's public reads) on random growth: new families of read and unread names, rows
appended to any of them, calls in between; the signature changes exactly when the definition's does."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.alerts.plan import PackPlan
from sremarathon_env.telemetry.store import MetricStore


def _defined_sig(plan) -> tuple:
    store = plan.store
    names = store.names() if plan._all_families else plan._names
    return tuple((id(f), len(f)) for n in names for f in store.families(n))


def _defined_name_sigs(plan) -> dict:
    store = plan.store
    names = store.names() if plan._all_families else plan._names
    ex = plan._excl
    return {n: tuple((id(f), len(f), ex[id(f)].version if id(f) in ex else 0) for f in store.families(n))
            for n in names}


def _rules(eng, exprs):
    return [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(exprs)]


@pytest.mark.parametrize("exprs", [
    ['sum by (svc) (m) > 1', 'rate(c_total[1m])', 'x'],
    ['{svc="a"}', 'm'],   # a name-less selector: every family of the store is read
])
@pytest.mark.parametrize("seed", [0, 1])
def test_signatures_equal_their_definitions_under_growth(exprs, seed):
    rng = np.random.default_rng(seed)
    store = MetricStore(step_s=15.0)
    eng = PromQLEngine(store)
    plan = PackPlan(eng, _rules(eng, exprs))
    shapes = [("m", ("pod", "svc")), ("m", ("pod",)), ("c_total", ("pod", "svc")), ("x", ("a",)),
              ("unread", ("pod",)), ("other_total", ("svc",))]
    fams = []
    prev_sig, prev_def = plan.signature(), _defined_sig(plan)
    changes = 0
    for step in range(300):
        r = rng.random()
        if r < 0.08 or not fams:
            name, lnames = shapes[int(rng.integers(len(shapes)))]
            fams.append(store.family(name, lnames))
        elif r < 0.6:
            f = fams[int(rng.integers(len(fams)))]
            f.row(tuple(f"v{int(rng.integers(60))}" for _ in f.label_names))
        elif r < 0.7:
            times = np.arange(1, 3, dtype=np.int64) * 15000
            with np.errstate(all="ignore"):
                plan.evaluate(times)
        sig, want = plan.signature(), _defined_sig(plan)
        assert (sig != prev_sig) == (want != prev_def), step
        changes += want != prev_def
        prev_sig, prev_def = sig, want
        assert plan._name_sigs() == _defined_name_sigs(plan)
    assert changes > 50
