"""The compiled pack plan gives exactly the generic evaluator's results, on a marathon with faults.

The reference is an ``AlertEngine`` with explicit limits, which evaluates every rule through the
generic ``PromQLEngine`` path; the default engine uses the plan. Both watch the same store while a
faulted Online Boutique marathon runs (series sets grow as pods are replaced), and must agree on
every transition (values included, bit for bit), on ``history()`` and on ``active()``.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from sremarathon_env.alerts import AlertEngine, Limits, PromQLEngine, load_rule_pack
from sremarathon_env.alerts.plan import PackPlan
from sremarathon_env.telemetry.store import MetricStore


def _key(tr) -> tuple:
    return (tr.t, tr.alertname, tuple(sorted(tr.labels.items())), tr.state, tr.fingerprint, repr(tr.value))


def _digest(rows: list) -> str:
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 3])
def test_plan_matches_generic_over_faulted_marathon(seed):
    from sremarathon_env.marathon import Marathon, MarathonConfig

    m = Marathon(MarathonConfig(seed=seed, reference_run=False, injection_s=2400, observation_s=600))
    m.start()
    store = m.backend.store
    pack = load_rule_pack()
    fast = AlertEngine(pack, store)
    ref = AlertEngine(pack, store, limits=Limits(max_series=10**7, max_points=10**9))
    assert fast._plan is not None and ref._plan is None
    ref.steady_fast_path = False  # the reference also steps every alert tick by tick
    got, want = [], []
    while True:
        got += [_key(tr) for tr in fast.evaluate_until(m.now)]
        want += [_key(tr) for tr in ref.evaluate_until(m.now)]
        assert got == want, f"transitions differ by t={m.now}"
        m.invoke([])
        if not m.advance_to_next_invocation():
            break
    assert _digest(got) == _digest(want)
    assert {s for *_, s, _, _ in got} >= {"pending", "firing"}  # the run really raised alerts
    assert fast.history() == ref.history()
    assert fast.active() == ref.active()
    assert fast.errors == ref.errors
    assert fast._plan.builds > 1  # series sets grew during the run and the plan followed them
    assert fast._plan.kept > 0  # rules over unchanged families kept their nodes through rebuilds


def _present(vec) -> dict:
    """What a result says: each label set with a sample at some time -> (presence, values bit patterns where
    present). Rows that are never present carry no information (a plan may leave series without any sample
    in the evaluated windows out)."""
    out = {}
    for lb, v, p in zip(vec.labels, vec.v, vec.p):
        if p.any():
            assert lb not in out
            out[lb] = (p.tolist(), np.where(p, v, 0.0).view(np.int64).tolist())
    return out


def _counter_store(n_ticks: int) -> MetricStore:
    store = MetricStore(step_s=15.0)
    req = store.family("istio_requests_total", ("namespace", "destination_workload", "reporter", "response_code"))
    rows = req.rows([("ob", "cart", "destination", "200"), ("ob", "cart", "destination", "503"),
                     ("ob", "ads", "destination", "200")])
    rng = np.random.default_rng(7)
    acc = np.zeros(3)
    for k in range(n_ticks):
        acc += rng.integers(0, 20, size=3)
        if k == 30:
            acc[0] = 0.0  # a counter reset
        store.write(req, rows, k, acc.copy())
    return store


def test_plan_batches_range_functions_and_handles_growth():
    store = _counter_store(60)
    rules = load_rule_pack().rules
    plan = PackPlan(PromQLEngine(store), rules)
    generic = PromQLEngine(store)
    times = np.arange(40, 48, dtype=np.int64) * 15000
    out = plan.evaluate(times)
    for rule, vec in zip(rules, out):
        ref = generic.evaluate(rule.node, times)
        assert vec.labels == ref.labels, rule.name
        assert np.array_equal(vec.p, ref.p), rule.name
        assert np.array_equal(np.where(vec.p, vec.v, 0.0), np.where(ref.p, ref.v, 0.0)), rule.name
    assert plan.builds == 1
    plan.evaluate(times + 8 * 15000)
    assert plan.builds == 1  # same series sets: no rebuild
    fam = store.families("istio_requests_total")[0]
    store.write(fam, fam.rows([("ob", "ads", "destination", "503")]), 59, np.array([4.0]))
    out = plan.evaluate(times + 8 * 15000)
    assert plan.builds == 2
    names = [r.name for r in rules]
    ref = generic.evaluate(rules[names.index("ServiceErrorRateHigh")].node, times + 8 * 15000)
    assert out[names.index("ServiceErrorRateHigh")].labels == ref.labels


def test_plan_growth_redoes_label_work_for_new_rows_only_with_identical_results():
    """Series that appear between existing ones (pod churn): a long-lived plan extends its label work
    (sorted order, name drops, group keys, signatures, label_replace, duplicate checks) by the new
    rows only, and every result equals a plan built from scratch on the same store."""
    from types import SimpleNamespace

    from sremarathon_env.alerts.values import grown_from

    store = MetricStore(step_s=15.0)
    m = store.family("m_pod", ("pod", "svc", "phase"))
    s = store.family("m_svc", ("svc",))
    exprs = ['sum by (svc) (m_pod{phase="Running"})', 'max without (pod) (m_pod)', 'count(m_pod) by (phase)',
             'm_pod{phase="Running"} * on (svc) group_left m_svc', 'm_pod / 2 > 1',
             'label_replace(m_pod, "p2", "x-$1", "pod", "(.*)")', 'm_pod and on (pod) m_pod{phase="Running"}',
             'sum by (svc) (label_replace(m_pod, "svc", "$1", "pod", "(.)-.*"))']
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(exprs)]
    plan = PackPlan(eng, rules)
    rng = np.random.default_rng(3)
    store.write(s, s.rows([("a",), ("b",), ("c",)]), 0, np.array([1.0, 2.0, 3.0]))
    pods = ["m-5", "b-2", "q-9"]
    tick = 0
    sel = eng.compile('m_pod{phase="Running"}')
    ctx = eng.new_context(np.zeros(1, dtype=np.int64), 15000)
    for step in range(6):
        for pod in pods:
            svc = pod[0] if pod[0] in "abc" else "c"
            rows = m.rows([(pod, svc, "Running"), (pod, svc, "Pending")])
            store.write(m, rows, tick, rng.integers(0, 5, size=2).astype(float))
        tick += 1
        times = np.arange(max(tick - 3, 0), tick, dtype=np.int64) * 15000
        got = plan.evaluate(times)
        fresh = PackPlan(PromQLEngine(store), rules).evaluate(times)
        for e, a, b in zip(exprs, got, fresh):
            assert _present(a) == _present(b), e
        eng._select(sel, ctx)   # the generic selection follows the store too
        # new pods sort before, between and after the existing ones
        pods = [f"{c}-{step}" for c in ("0", "b", "z")]
    labels = eng._select(sel, ctx)[1]
    g = grown_from(labels)
    assert g is not None and len(g[1]) == 3 and len(labels) == len(g[0]) + 3
    assert [labels[p] for p in g[1]] == [lb for lb in labels if dict(lb)["pod"].endswith("-4")]


def test_plan_leaves_out_rows_without_samples_and_takes_them_back():
    """Pods come and go: a long-lived plan leaves out rows with no sample in any window it reads (they
    stop costing label work and evaluation), takes a row back when it is written again, drops its
    exclusions for a call earlier than they were decided for, and always says what the generic
    evaluator says (every present sample, bit for bit; absent(), count() and joins included)."""
    from types import SimpleNamespace

    store = MetricStore(step_s=15.0)
    up = store.family("up_pod", ("pod", "svc"))
    rs = store.family("restarts_total", ("pod", "svc"))
    info = store.family("svc_info", ("svc",))
    exprs = ['sum by (svc) (up_pod)', 'count(up_pod)', 'absent(up_pod{svc="gone"})',
             'sum by (svc) (increase(restarts_total[5m])) > 0', 'count_over_time(up_pod[2m])',
             'up_pod * on (svc) group_left svc_info', 'max by (svc) (rate(restarts_total[1m]))',
             'up_pod unless on (pod) restarts_total', 'absent_over_time(up_pod{svc="gone"}[3m])',
             'count by (svc) (up_pod offset 4m)']
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(exprs)]
    plan = PackPlan(eng, rules)
    generic = PromQLEngine(store)
    rng = np.random.default_rng(11)
    live = {f"{s}-{k}": s for s in ("a", "b", "gone") for k in range(2)}
    born = 0
    excluded_seen = revived = 0
    for tick in range(120):
        if tick % 9 == 4:  # a rollout: one pod replaced by a new one
            old = sorted(live)[int(rng.integers(len(live)))]
            svc = live.pop(old)
            born += 1
            live[f"{svc}-n{born}"] = svc
        if tick == 70:  # a pod left out long ago is written again
            back = next(lb[0] for lb in up._label_values if lb[0] not in live and plan._excl.get(id(up))
                        and up.row(lb) in set(plan._excl[id(up)].rows.tolist()))
            live[back] = back.split("-")[0]
            revived = 1
        keys = sorted(live.items())
        store.write(up, up.rows(keys), tick, rng.integers(0, 2, size=len(keys)).astype(float))
        store.write(rs, rs.rows(keys), tick, np.floor(tick / 7) + rng.integers(0, 2, size=len(keys)))
        if tick % 5 == 0:
            store.write(info, info.rows([("a",), ("b",)]), tick, np.array([1.0, 2.0]))
        if tick % 8 != 7:
            continue
        times = np.arange(tick - 7, tick + 1, dtype=np.int64) * 15000
        got = plan.evaluate(times)
        excluded_seen = max(excluded_seen, plan.excluded)
        if tick == 71:
            assert revived and plan.excluded < excluded_seen  # the written row came back
        for e, rule, vec in zip(exprs, rules, got):
            assert _present(vec) == _present(generic.evaluate(rule.node, times)), (e, tick)
    assert excluded_seen > 10 and plan.excluded < len(up) + len(rs)
    # a call earlier than the exclusions were decided for reads every row again
    early = np.arange(20, 28, dtype=np.int64) * 15000
    for e, rule, vec in zip(exprs, rules, plan.evaluate(early)):
        assert _present(vec) == _present(generic.evaluate(rule.node, early)), e
    assert plan.excluded == 0


def _fold(op: str, vals: list, pres: list):
    """A sum, count or group of one group at one time, row after row in input order (None where no member is
    present); an absent member adds 0.0 to a sum, as in the generic evaluator's sum."""
    if not any(pres):
        return None
    if op == "group":
        return 1.0
    acc = None
    for x, ok in zip(vals, pres):
        x = (float(x) if ok else 0.0) if op == "sum" else float(ok)
        acc = x if acc is None else acc + x
    return acc


def _bits(x) -> int:
    return int(np.array([x], dtype=np.float64).view(np.int64)[0])


def test_aggregation_layout_matches_its_definition():
    """_Agg._layout (max / min): the stable order by group (None when already sorted) and the group starts, for
    random group indexes numbered by first appearance."""
    from sremarathon_env.alerts.plan import _Agg

    rng = np.random.default_rng(12)
    for _ in range(400):
        G = int(rng.integers(1, 6))
        raw = rng.integers(0, G, size=int(rng.integers(G, 25)))
        raw[:G] = rng.permutation(G)
        if rng.random() < 0.4:
            raw = np.sort(raw)
        firsts = [int(np.flatnonzero(raw == g)[0]) for g in range(G)]
        rank = {g: r for r, g in enumerate(sorted(range(G), key=firsts.__getitem__))}
        gid = np.array([rank[int(x)] for x in raw], dtype=np.intp)
        n = len(gid)
        order, starts = _Agg._layout(G, gid)
        want_order = sorted(range(n), key=lambda i: gid[i])
        assert (order is None) == (want_order == list(range(n)))
        assert order is None or order.tolist() == want_order
        sizes = [int((gid == g).sum()) for g in range(G)]
        assert starts.tolist() == [sum(sizes[:g]) for g in range(G)]


def test_aggregation_equals_the_generic_one_and_a_row_after_row_fold():
    """_Agg (ufunc.at over the group index for sums and counts, reduceat in group order for max / min, the singleton
    and one-group shortcuts) gives what the generic evaluator's ``aggregate`` gives, bit for bit (signed zeros,
    infinities, extremes, absent members, groups numbered by first appearance), and a sum / count / group is the
    fold of the present members in input order; a NaN result is a NaN (which of two NaN operands numpy returns
    differs between its loops, and by shape within one: no result shows a payload)."""
    from types import SimpleNamespace

    from sremarathon_env.alerts.plan import _Agg
    from sremarathon_env.alerts.values import Vec
    from sremarathon_env.alerts.vectorops import aggregate, groups_of

    def same(a, b) -> bool:
        return (a != a and b != b) or _bits(a) == _bits(b)

    rng = np.random.default_rng(12)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, np.nan, 1e308, -1e308, 5e-324, 0.1, -2.5])
    special[5] = np.frombuffer(np.int64(-2251799813685247).tobytes(), dtype=np.float64)[0]   # another NaN payload
    for case in range(400):
        G = int(rng.integers(1, 7))
        raw = rng.integers(0, G, size=int(rng.integers(G, 30)))
        raw[:G] = rng.permutation(G)
        if rng.random() < 0.3:
            raw = np.sort(raw)
        if rng.random() < 0.15:
            raw = rng.permutation(G)   # singletons
        n, T = len(raw), int(rng.integers(1, 10))
        labels = [(("g", f"g{int(x)}"), ("i", f"{i:03d}")) for i, x in enumerate(raw)]
        keys, gid = groups_of(labels, False, ("g",))
        v = np.where(rng.random((n, T)) < 0.5, special[rng.integers(len(special), size=(n, T))], rng.normal(size=(n, T)))
        p = rng.random((n, T)) < 0.8
        child = SimpleNamespace(value=lambda E, v=v, p=p: (v, p))
        for op in ("sum", "count", "group", "max", "min"):
            with np.errstate(all="ignore"):   # overflow and inf - inf are part of the point (plans evaluate so too)
                got_v, got_p = _Agg(op, child, keys, gid).compute(SimpleNamespace(T=T))
                want = aggregate(op, Vec(labels, v, p), None, False, ("g",))
            assert want.labels == keys and np.array_equal(got_p, want.p), (case, op)
            for g in range(len(keys)):
                rows = np.flatnonzero(gid == g)
                for t in range(T):
                    if not got_p[g, t]:
                        continue
                    assert same(got_v[g, t], want.v[g, t]), (case, op, g, t, got_v[g, t], want.v[g, t])
                    if op != "max" and op != "min":
                        assert same(got_v[g, t], _fold(op, v[rows, t].tolist(), p[rows, t].tolist())), (case, op, g, t)
