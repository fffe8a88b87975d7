"""Build-time details held to their definitions.

* A build selects each selector key once (``_selection`` keeps ``_select_now``'s result for the build); outside a
  build every call selects afresh (a store grown since the last build shows its new rows).
* A vector match's row maps: the one side has one row per signature, so its group k is row k and the rows taken are
  the pairs' groups (the former ``firsts[pairs_o]``); the many side's rows ascend, so all of them is every row in
  order (the former identity test).
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np

from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.alerts import plan as P
from sremarathon_env.alerts.values import Vec
from sremarathon_env.alerts.vectorops import _sig_index
from sremarathon_env.telemetry.store import MetricStore

from .test_plan_growth import EXPRS


def _store():
    store = MetricStore(step_s=15.0)
    m = store.family("m", ("pod", "svc", "phase"))
    c = store.family("c_total", ("pod", "svc"))
    i = store.family("info", ("svc", "team"))
    return store, m, c, i


def _grow(store, fams, rng, k):
    m, c, i = fams
    for _ in range(int(rng.integers(0, 4))):
        pod = f"p{int(rng.integers(40))}"
        svc = str(rng.choice(["a", "b", "c"]))
        m.row((pod, svc, str(rng.choice(["Running", "Pending"]))))
        c.row((pod, svc))
    for svc in "abc":
        i.row((svc, "t-" + svc))
    for f in (m, c, i):
        store.write(f, np.arange(len(f)), k, rng.random(len(f)) * 5 + k)
    store.n_ticks = k + 1


def test_one_selection_per_key_and_build_and_fresh_ones_outside(monkeypatch):
    rng = np.random.default_rng(4)
    store, *fams = _store()
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(EXPRS)]
    plan = P.PackPlan(eng, rules)
    calls = Counter()
    real = P.PackPlan._select_now

    def counting(self, sel):
        calls[(self.builds, sel.key)] += 1
        return real(self, sel)
    monkeypatch.setattr(P.PackPlan, "_select_now", counting)
    sels = {s.key: s for r in rules for s in P._selectors(r.node)}
    for k in range(30):
        _grow(store, fams, rng, k)
        if k % 3 == 2:
            with np.errstate(all="ignore"):
                plan.evaluate(np.arange(k - 2, k + 1, dtype=np.int64) * 15000)
            assert plan._sel_now is None
            inside = [n for (b, _), n in calls.items() if b == plan.builds]
            assert inside and max(inside) == 1
            calls.clear()
        if not plan.builds:
            continue
        # outside a build: a fresh selection, equal to the generic one (less left-out rows: none here)
        for key, sel in sels.items():
            got = plan._selection(sel)[1]
            assert got == eng._select(sel, plan._dummy)[1], key
        assert all(n == 1 for n in calls.values())
        calls.clear()


def test_vector_match_row_maps_equal_their_former_definitions():
    rng = np.random.default_rng(6)
    store, *fams = _store()
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(EXPRS)]
    rules += [SimpleNamespace(name=f"x{i}", node=eng.compile(e)) for i, e in enumerate([
        'c_total / on (pod, svc) m', 'm * on (svc) group_left (team) info', 'info * on (svc) group_right m',
        'c_total - ignoring (phase) m{phase="Running"}', 'm > on (pod) c_total'])]
    plan = P.PackPlan(eng, rules)
    seen = 0
    for k in range(30):
        _grow(store, fams, rng, k)
        if k % 3:
            continue
        with np.errstate(all="ignore"):
            plan.evaluate(np.arange(max(0, k - 2), k + 1, dtype=np.int64) * 15000)
        for node in plan._cache.values():
            if not isinstance(node, P._VecVec):
                continue
            seen += 1
            many, one = (node.rhs, node.lhs) if node.swap else (node.lhs, node.rhs)
            key = next(kk for kk, v in plan._cache.items() if v is node)[0]
            bnode = next(r.node for r in rules for r in [r] if key in r.node.key)
            b = _find(bnode, key)
            one_idx = _sig_index(Vec(one.labels, None, None), b.on, b.match_labels)
            firsts = np.fromiter((rows[0] for rows in one_idx.values()), dtype=np.intp, count=len(one_idx))
            drop = b.op in P.ARITH_FUNCS or b.return_bool
            pm, po, _ = P.memo(("vv", drop, b.card, b.on, b.match_labels, b.include), (many.labels, one.labels),
                                lambda: None)
            mi_def, oi_def = np.asarray(pm, dtype=np.intp), firsts[np.asarray(po, dtype=np.intp)]
            mi = np.arange(len(many.labels)) if node.mi is None else node.mi
            oi = np.arange(len(one.labels)) if node.oi is None else node.oi
            assert np.array_equal(mi, mi_def) and np.array_equal(oi, oi_def)
            assert (node.mi is None) == P._is_identity(mi_def, len(many.labels))
    assert seen > 20


def _find(node, key):
    if node.key == key:
        return node
    for f in ("expr", "lhs", "rhs", "param"):
        c = getattr(node, f, None)
        if c is not None and hasattr(c, "key"):
            got = _find(c, key)
            if got is not None:
                return got
    for a in getattr(node, "args", ()) or ():
        got = _find(a, key)
        if got is not None:
            return got
    return None


def _reference_roots_and_kernel(plan, records_before, rebuilt_now) -> tuple:
    """The build's roots and kernel range nodes by their definition, rule by rule: a kept rule (a record before the
    build, not rebuilt) gives its record's root and kernel range nodes, a rebuilt one what its walk recorded; the
    kernel range nodes in rule order, each once (its first rule's place)."""
    roots, kernel = [], {}
    for i, before in enumerate(records_before):
        rec = before if i not in rebuilt_now else plan._records[i]
        roots.append(rec[0])
        kernel.update(rec[2])
    return roots, list(kernel)


def test_a_build_takes_kept_rules_in_rule_order_as_their_definition(monkeypatch):
    """Twin runs with faults and deploys (OB, TT): after each build, every rule's root and the order of the kernel
    range nodes equal the rule-by-rule definition (``_build_rules`` takes the kept rules between two rebuilt ones
    as one run); checked at builds where every rule has a record."""
    from apps import load_app
    from faults.effects import Effect
    from sremarathon_env.alerts import load_rule_pack
    from sremarathon_env.backends.sim import SimBackend

    real = P.PackPlan._build_rules
    checked = []

    def build(self, t_min=0):
        before = list(self._records)
        objs = list(map(id, before))
        real(self, t_min)
        if any(r is None for r in before) or any(r is None for r in self._records):
            return
        rebuilt = {i for i, r in enumerate(self._records) if id(r) != objs[i]}
        roots, kernel = _reference_roots_and_kernel(self, before, rebuilt)
        assert all(map(P.is_, roots, self._roots)) and len(roots) == len(self._roots)
        assert kernel == list(self._kernel_nodes)
        checked.append(len(rebuilt))

    monkeypatch.setattr(P.PackPlan, "_build_rules", build)
    for app, seed in (("online-boutique", 2), ("train-ticket", 1)):
        svcs = [s.name for s in load_app(app).services]
        sim = SimBackend(app, seed=seed)
        plan = P.PackPlan(PromQLEngine(sim.store), load_rule_pack().rules)
        for k in range(1, 13):
            if k == 2:
                sim.apply_effect(Effect(kind="crash", service=svcs[2]))
            if k in (4, 7):
                sim.deploy(svcs[3], image_tag=f"t{k}", message="bump", author="dev")
            sim.advance_to(k * 120.0)
            plan.evaluate((np.arange(8, dtype=np.int64) - 7) * 15000 + k * 120000)
    assert len(checked) >= 4 and any(0 < c < len(load_rule_pack().rules) for c in checked)
