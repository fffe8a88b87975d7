"""An aggregation of a ``label_replace`` is one plan node (``PackPlan._agg_label_replace``: an ``_Agg`` over the
label_replace's input, grouped through the replacement) and gives exactly what the unfused nodes (an ``_Agg`` over a
``_Pass``, ``plan.FUSE_LABEL_REPLACE = False``: the definition) and the generic evaluator give.

* random growth: pods come and go (new names sort anywhere, rows left out and taken back), so the fused node's group
  keys are edited from the last build's (inserted and removed rows) or made afresh; after every call each rule of a
  long-lived fused plan equals a fresh unfused plan and the generic evaluator, bit for bit (including the cases the
  fusion leaves to the unfused nodes: an input label set holding the destination label, a selection over two
  families whose label sets may be equal);
* a recorded twin run: at every call of a no-op Online Boutique marathon the env's long-lived plan equals a fresh
  unfused plan, and the pack's pod-chain aggregations were fused and edited along the way.
"""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import sremarathon_env  # noqa: F401 - registers the environments
from sremarathon_env.alerts import PromQLEngine
from sremarathon_env.alerts import plan as P
from sremarathon_env.alerts.limits import QueryError
from sremarathon_env.alerts.plan import PackPlan
from sremarathon_env.registration import IDS
from sremarathon_env.telemetry.store import MetricStore

from .twin import noop_marathon_checked, same_result

RX = '"(.+)-[0-9]+"'
EXPRS = [
    f'sum by (s2) (label_replace(m, "s2", "$1", "pod", {RX}))',
    f'max by (s2, phase) (label_replace(m, "s2", "$1", "pod", {RX})) > 2',
    f'min without (pod) (label_replace(m{{phase="Running"}}, "s2", "x-$1", "pod", {RX}))',
    f'count by (s2) (label_replace(m, "s2", "$1", "pod", {RX}))',
    'group by (s2, svc) (label_replace(m, "s2", "$1", "pod", "nomatch(.*)"))',
    f'sum by (svc) (label_replace(m, "svc", "", "pod", {RX}))',   # (an empty replacement drops the label)
    f'max by (s2) (label_replace(increase(c_total[3m]), "s2", "$1", "pod", {RX}))',
    f'sum by (s2) (label_replace(increase(c_total[2m]) > 1, "s2", "$1", "pod", {RX}))',
    f'max by (s2) (label_replace((increase(c_total[2m]) > 0) and on (pod) (m == 1), "s2", "$1", "pod", {RX}))',
    f'max by (s2) (label_replace(m / on (pod, svc) group_left c_total, "s2", "$1", "pod", {RX})) > 0.1',
    f'sum by (s2) (label_replace(sum by (pod) (m), "s2", "$1", "pod", {RX}))',
    # not fused: the destination label is an input label (rows differing in it only collide)
    f'sum by (svc) (label_replace(m, "phase", "x", "pod", {RX}))',
    f'count by (svc) (label_replace(m, "svc", "$1", "pod", {RX}))',
    # not fused: two families of one name whose label sets may be equal (the generic evaluator merges them)
    f'count by (s2) (label_replace(d, "s2", "$1", "pod", {RX}))',
    f'sum(label_replace(scalar(sum(m)) * m, "s2", "$1", "pod", {RX}))',
    # fused until a row holding the destination label comes (its rows otherwise lack it: an empty value)
    f'sum by (tag) (label_replace(e, "tag", "$1", "pod", {RX}))',
]


def _generic(eng, node, times):
    try:
        return eng.evaluate(node, times)
    except QueryError as err:
        return err


def _unfused_plan(store, rules, monkeypatch):
    """A fresh plan whose build makes every aggregation of a label_replace over a ``_Pass`` (the definition)."""
    with monkeypatch.context() as mp:
        mp.setattr(P, "FUSE_LABEL_REPLACE", False)
        plan = PackPlan(PromQLEngine(store), rules)
        plan.evaluate(np.zeros(1, dtype=np.int64))   # (builds it)
    return plan


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_fused_aggregations_equal_unfused_and_generic_under_growth(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    store = MetricStore(step_s=15.0)
    m = store.family("m", ("pod", "svc", "phase"))
    c = store.family("c_total", ("pod", "svc"))
    d1 = store.family("d", ("pod", "x"))
    d2 = store.family("d", ("pod",))   # (pod=p) in d2 equals (pod=p, x="") in d1
    ef = store.family("e", ("pod", "tag"))
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(EXPRS)]
    plan = PackPlan(eng, rules)
    generic = PromQLEngine(store)
    live: dict = {}
    silent: dict = {}
    counts: dict = {}
    for tick in range(160):
        for _ in range(int(rng.integers(0, 4)) if tick % 3 == 0 else 0):
            name = "".join(rng.choice(list("abqz"), size=2)) + "-" + str(int(rng.integers(100)))
            live[name] = str(rng.choice(["a", "b", "c"]))
        if live and rng.random() < 0.25:
            gone = sorted(live)[int(rng.integers(len(live)))]
            silent[gone] = live.pop(gone)
        if silent and rng.random() < 0.05:
            back = sorted(silent)[int(rng.integers(len(silent)))]
            live[back] = silent.pop(back)
        keys = sorted(live.items())
        if keys:
            phases = [("Running", "Pending")[int(rng.integers(2))] for _ in keys]
            store.write(m, m.rows([(p, s, ph) for (p, s), ph in zip(keys, phases)]), tick,
                        rng.integers(0, 5, size=len(keys)).astype(float))
            for p, _ in keys:
                counts[p] = counts.get(p, 0.0) + float(rng.integers(0, 3))
            store.write(c, c.rows(keys), tick, np.array([counts[p] for p, _ in keys]))
            tags = ["t" if tick > 80 and rng.random() < 0.02 else "" for _ in keys]
            store.write(ef, ef.rows([(p, t) for (p, _), t in zip(keys, tags)]), tick, np.ones(len(keys)))
            few = keys[: int(rng.integers(0, 3))]
            if few:
                store.write(d1, d1.rows([(p, ("", "y")[i % 2]) for i, (p, _) in enumerate(few)]), tick,
                            np.ones(len(few)))
                if tick % 5 == 0:
                    store.write(d2, d2.rows([(p,) for p, _ in few[:1]]), tick, np.ones(1))
        if tick % 4 != 3:
            continue
        times = np.arange(max(tick - 7, 0), tick + 1, dtype=np.int64) * 15000
        got = plan.evaluate(times)
        fresh = _unfused_plan(store, rules, monkeypatch).evaluate(times)
        for e, rule, a, b in zip(EXPRS, rules, got, fresh):
            assert same_result(a, b), (e, tick)
            assert same_result(a, _generic(generic, rule.node, times)), (e, tick)
    # (both ways of making the group keys were taken, and the left-to-the-unfused cases were met)
    assert plan.fused_made > 60 and plan.fused_edited > 30, (plan.fused_made, plan.fused_edited)
    assert plan.fused_made - plan.fused_edited > 10
    assert plan.excluded > 0


def test_fusion_makes_no_pass_node_and_leaves_duplicates_to_the_unfused_nodes(monkeypatch):
    """The fused rules' roots aggregate the label_replace's input directly; where the destination label is an input
    label, the unfused ``_Agg`` over a ``_Pass`` (or a generic node) is made, as without fusion."""
    store = MetricStore(step_s=15.0)
    m = store.family("m", ("pod", "svc", "phase"))
    store.write(m, m.rows([("a-1", "x", "Running"), ("a-2", "x", "Running"), ("b-1", "y", "Pending")]), 0,
                np.array([1.0, 2.0, 3.0]))
    eng = PromQLEngine(store)
    exprs = [f'sum by (s2) (label_replace(m, "s2", "$1", "pod", {RX}))',
             f'sum by (svc) (label_replace(m, "svc", "$1", "pod", {RX}))']
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(exprs)]
    plan = PackPlan(eng, rules)
    out = plan.evaluate(np.zeros(1, dtype=np.int64))
    fused, unfused = plan._roots
    assert type(fused) is P._Agg and type(fused.child) is P._Sel
    assert type(unfused) is P._Agg and type(unfused.child) is P._Pass
    assert dict(zip(out[0].labels, out[0].v[:, 0].tolist())) == {(("s2", "a"),): 3.0, (("s2", "b"),): 3.0}
    ref = _unfused_plan(store, rules, monkeypatch)
    assert type(ref._roots[0].child) is P._Pass
    assert all(same_result(a, b) for a, b in zip(out, ref.evaluate(np.zeros(1, dtype=np.int64))))


def test_group_keys_are_edited_only_from_the_last_fused_build(monkeypatch):
    """A fused node's rows that were made from other rows than its last build's (its selection went empty in between,
    the node was an ``_Empty``) take their group keys afresh."""
    store = MetricStore(step_s=15.0)
    m = store.family("m", ("pod", "svc"))
    eng = PromQLEngine(store)
    expr = f'sum by (s2) (label_replace(m{{svc="x"}}, "s2", "$1", "pod", {RX}))'
    rules = [SimpleNamespace(name="r", node=eng.compile(expr))]
    plan = PackPlan(eng, rules)
    for tick, rows in [(0, [("a-1", "x")]), (40, [("b-1", "y")]), (41, [("b-1", "y"), ("c-1", "x")]),
                       (42, [("b-1", "y"), ("c-1", "x"), ("d-1", "x")])]:
        store.write(m, m.rows(rows), tick, np.arange(1.0, len(rows) + 1))
        times = np.array([tick * 15000], dtype=np.int64)
        got = plan.evaluate(times)
        assert same_result(got[0], _unfused_plan(store, rules, monkeypatch).evaluate(times)[0]), tick
        assert same_result(got[0], _generic(PromQLEngine(store), rules[0].node, times)), tick
    assert plan.excluded == 1 and plan.builds == 4
    assert plan.fused_made == 3 and plan.fused_edited == 1, (plan.fused_made, plan.fused_edited)


def test_twin_marathon_fused_plan_equals_unfused_fresh_plan(monkeypatch):
    """A recorded twin run: every call of a no-op Online Boutique marathon, the env's long-lived (fused) plan against
    a fresh unfused plan on that call's store."""
    app = "online-boutique"
    env = gym.make(dict(IDS)[app]).unwrapped
    env.reset(seed=3)
    main = env.marathon.alert_engine._plan
    made0, edited0 = main.fused_made, main.fused_edited
    assert noop_marathon_checked(env, monkeypatch, fuse_fresh=False) >= 20
    assert main.fused_made - made0 > 50 and main.fused_edited - edited0 > 30, (main.fused_made, main.fused_edited)


@pytest.mark.parametrize("seed", [0, 1])
def test_lr_projection_keys_equal_whole_label_set_keys(seed):
    """``plan._lr_projection``: the group key of a label set replaced equals that of its projection replaced, and the
    two hold the destination label alike, for random label sets, ``by`` and ``without`` groupings and source and
    destination labels among the grouping, the set's names, ``__name__`` or new ones (``_lr_keys`` looks keys up by
    projection)."""
    from sremarathon_env.alerts.vectorops import group_key
    rng = np.random.default_rng(seed)
    names = ["__name__", "a", "b", "pod", "s2", "svc"]
    rx, repl = "(.+)-[0-9]+", "$1"
    for _ in range(400):
        lbs = []
        for _ in range(5):
            # (plain str: numpy's strings would enter the process's label-pair table and be handed to later tests)
            chosen = sorted(set(map(str, rng.choice(names, size=int(rng.integers(0, len(names) + 1))))))
            vals = ["", "x", "p-1", "q-22", "r-"]
            lbs.append(tuple((n, str(rng.choice(vals[1:]))) for n in chosen))
        without = bool(rng.integers(2))
        grouping = tuple(sorted(set(map(str, rng.choice(names[1:], size=int(rng.integers(0, 4)))))))
        src, dst = (str(x) for x in rng.choice(names + ["new"], size=2))
        key = group_key(without, grouping)
        proj = P._lr_projection(without, grouping, src, dst)
        whole = PromQLEngine._label_replace(lbs, dst, repl, src, rx)
        projected = PromQLEngine._label_replace([proj(lb) for lb in lbs], dst, repl, src, rx)
        for lb, w, pj in zip(lbs, whole, projected):
            assert key(w) == key(pj), (lb, without, grouping, src, dst)
            assert (dst in dict(lb)) == (dst in dict(proj(lb)))
