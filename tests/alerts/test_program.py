"""The compiled plan program (``program.py``) gives the numpy plan nodes' results bit for bit: every rule's values
(signed zeros, infinities, NaN positions) and presence, on random stores with special values for each lowered
operation (aggregations of every layout, vector-scalar and vector-vector operators incl. ``%``, filters and
``bool``, ``and`` / ``unless``, numpy nodes between lowered ones), on growing stores (rebuilds, lowering reuse),
and on twin runs of the three apps with faults. Where numpy has no single answer (max / min of 0.0 and -0.0) or
a numpy node raises, the call runs the numpy path."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sremarathon_env.alerts import PromQLEngine, compiled, load_rule_pack
from sremarathon_env.alerts import plan as PL
from sremarathon_env.alerts.program import BINOPS, lower
from sremarathon_env.alerts.values import Vec
from sremarathon_env.telemetry.store import MetricStore

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _numba_on(monkeypatch):
    """The compiled kernels on, and every call of a build by its program (``LOWER_AFTER`` 0)."""
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    monkeypatch.setattr(PL, "LOWER_AFTER", 0)
    assert compiled.warm() is not None
    yield


def test_a_build_is_lowered_after_its_first_calls(monkeypatch):
    monkeypatch.setattr(PL, "LOWER_AFTER", 2)
    exprs = [e for e in EXPRS if not any(w in e for w in ("max", "min", "histogram"))]   # (no stops)
    rng = np.random.default_rng(4)
    store, fams, _, _, plan = _random_plan(rng, exprs, 12, 12)
    times = np.arange(4, 12, dtype=np.int64) * 15000
    assert [_both(plan, times, exprs) for _ in range(4)] == [0, 0, 1, 1]
    _write(rng, store, fams, 12, 9, False)   # new series: a rebuild
    assert [_both(plan, times + 15000, exprs) for _ in range(4)] == [0, 0, 1, 1]
    assert plan.builds == 2


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isnan(a), np.nan, a).view(np.int64)


def _same(x, y, what) -> None:
    assert type(x) is type(y), what
    if not isinstance(x, Vec):
        assert str(x) == str(y), what
        return
    assert x.labels == y.labels, what
    assert x.v.shape == y.v.shape and x.p.shape == y.p.shape, what
    assert np.array_equal(x.p, y.p), what
    assert np.array_equal(_bits(x.v), _bits(y.v)), (what, x.v, y.v)


def _both(plan, times, names, what=""):
    """The call by the program and by the numpy nodes (same plan, same build), compared; the program's count."""
    before = plan.program_calls
    PL.PROGRAM = True
    try:
        got = plan.evaluate(times)
    finally:
        PL.PROGRAM = False
    try:
        want = plan.evaluate(times)
    finally:
        PL.PROGRAM = True
    for name, x, y in zip(names, got, want):
        _same(x, y, (what, name))
    return plan.program_calls - before


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324, 0.1, 3.0, -7.5, 1.0])


def _vals(rng, n, zero_ties: bool) -> np.ndarray:
    v = np.where(rng.random(n) < 0.5, SPECIAL[rng.integers(len(SPECIAL), size=n)], rng.normal(0, 3, n).round(1))
    if not zero_ties:
        v[v == 0] = 0.0    # no -0.0: max / min never meet 0.0 against -0.0
    return v


EXPRS = [
    # aggregations: groups, one group, singletons (in and out of row order)
    "sum by (g) (a)", "count by (g) (a)", "group by (g) (a)", "max by (g) (a)", "min by (g) (a)",
    "sum(a)", "count(a)", "group(a)", "max(a)", "min(a)", "sum without (i) (a)", "max without (g) (a)",
    "sum by (h, i, g) (a)", "count by (i, h) (a)", "max by (h, i) (a)", "min by (i, g, h) (a)", "group by (h, i) (a)",
    "sum by (g) (rate(c_total[2m]))", "max by (h) (increase(c_total[5m]))", "min by (g) (c_total)",
    # vector and scalar, both sides, bool, filters
    "a + 1", "2 - a", "a * -1", "a / 0", "0 / a", "a % 3", "-7.5 % a", "a % 0", "a > 0", "0 < a", "a >= 1",
    "a <= -0", "a == 0", "a != 3", "a > bool 0", "1 == bool a", "a != bool 0.1", "a < bool 3",
    "a > scalar(sum(b))", "scalar(b{g=\"g1\"}) - a", "a ^ 2", "2 ^ a",
    # vector and vector: one-to-one, many-to-one, one-to-many, filters, bool
    "sum by (g) (a) - b", "b / sum by (g) (a)", "sum by (g) (a) % b", "b != sum by (g) (a)",
    "a / on (g) group_left b", "b - on (g) group_right a", "a > on (g) group_left b",
    "a >= bool on (g) group_left b", "b < on (g) group_right a", "a % on (g) group_left b",
    "a atan2 on (g) group_left b",
    # and / unless, matched, unmatched, nothing on the right
    "a and on (g) b", "a unless on (g) b", "a and on (g) b > 1", "a unless on (h) d", "a and d", "a unless nothing_here",
    "a and on (g) nothing_here",
    # chains through numpy nodes and passes
    "max by (g) (a / on (g) group_left b) > 0.5", "sum by (g) (label_replace(a, \"g\", \"$1\", \"h\", \"(.*)\")) * 2",
    "histogram_quantile(0.9, sum by (le, g) (rate(hb_bucket[5m]))) > 0.1",
    "histogram_quantile(0.5, sum by (le) (rate(hb_bucket[5m]))) * on () group_left sum(b)",
    "histogram_quantile(1.5, sum by (le) (rate(hb_bucket[5m])))", "histogram_quantile(0.3, hb_bucket)",
    "histogram_quantile(0.7, hs_bucket - 1)", "histogram_quantile(0.2, hs_bucket * -1)",
    "histogram_quantile(0.6, hs_bucket / 0)", "histogram_quantile(1, hs_bucket)", "histogram_quantile(0, hs_bucket)",
    "max_over_time(a[2m]) - min_over_time(a[3m])", "count(max_over_time(a[1m]) > 0) + 1",
    # (max / min_over_time are kernel rows; the range groups' numpy steps: avg / sum_over_time)
    "avg_over_time(a[2m]) - sum_over_time(a[3m])", "count(avg_over_time(a[1m]) > 0) + 1",
    "sum by (g) (a) / count by (g) (a) > bool 0",
]


def _random_store(rng, n_ticks: int, zero_ties: bool):
    store = MetricStore(step_s=15.0, capacity=8)
    a = store.family("a", ("i", "g", "h"))
    b = store.family("b", ("g",))
    c = store.family("c_total", ("i", "g", "h"))
    d = store.family("d", ("h",))
    hb = store.family("hb_bucket", ("g", "le"))
    hs = store.family("hs_bucket", ("g", "le"))
    return store, (a, b, c, d, hb, hs)


def _write(rng, store, fams, tick, n_a, zero_ties):
    a, b, c, d, hb, hs = fams
    keys = [(f"i{k:02d}", f"g{int(x)}", f"h{int(y)}") for k, (x, y) in
            enumerate(zip(rng.permutation(n_a) % 3, rng.permutation(n_a) % 4))]
    # (row order differs from label order: selections are permuted)
    keys = keys[::-1] if tick % 2 else keys
    keys = list(dict.fromkeys(keys))
    store.write(a, a.rows(keys), tick, _vals(rng, len(keys), zero_ties))
    store.write(c, c.rows(keys), tick, np.floor(tick / 3) + rng.integers(0, 3, size=len(keys)).astype(float))
    store.write(b, b.rows([("g0",), ("g1",), ("g2",)]), tick, _vals(rng, 3, zero_ties))
    store.write(d, d.rows([("h1",), ("h3",)]), tick, rng.integers(0, 2, size=2).astype(float))
    les = ["0.1", "0.5", "1", "+Inf"]
    for g in ("g0", "g1"):
        cum = np.cumsum(rng.integers(0, 5, size=len(les))).astype(float) + tick * 4
        if rng.random() < 0.03:
            cum[int(rng.integers(len(les)))] = np.nan   # a bucket missing: partly present groups
        store.write(hb, hb.rows([(g, le) for le in les]), tick, cum)
        # special counts (le 0: the first bucket's bound is not positive), all present
        vals = np.cumsum(rng.integers(0, 3, size=4)).astype(float) if rng.random() < 0.5 else _vals(rng, 4, zero_ties)
        vals[np.isnan(vals)] = 2.0
        store.write(hs, hs.rows([(g, le) for le in ("0", "0.5", "1", "+Inf")]), tick, vals)


def _random_plan(rng, exprs, n_ticks: int, written: int = 0, zero_ties: bool = False):
    """(store, families, engine, rules, plan) of ``exprs`` over a random store, its first ``written`` ticks written
    (6 series of ``a`` each)."""
    store, fams = _random_store(rng, n_ticks, zero_ties)
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{k}", node=eng.compile(e)) for k, e in enumerate(exprs)]
    plan = PL.PackPlan(eng, rules)
    for tick in range(written):
        _write(rng, store, fams, tick, 6, zero_ties)
    return store, fams, eng, rules, plan


@pytest.mark.parametrize("zero_ties,compact", [(False, False), (True, False), (False, True)])
def test_program_equals_numpy_nodes_on_random_stores(zero_ties, compact, monkeypatch):
    """(compact: the lowerer starts again at nearly every rebuild; else it keeps unchanged nodes' rows)"""
    from sremarathon_env.alerts import program

    if compact:
        monkeypatch.setattr(program, "COMPACT_MIN", 1)
        monkeypatch.setattr(program, "COMPACT_FACTOR", 1)
    rng = np.random.default_rng(5 + zero_ties)
    ran = calls = 0
    for case in range(4):
        store, fams, _, _, plan = _random_plan(rng, EXPRS, 40, zero_ties=zero_ties)
        n_a = 5
        for tick in range(40):
            if tick % 7 == 3:
                n_a += int(rng.integers(1, 4))    # new series: a rebuild
            _write(rng, store, fams, tick, n_a, zero_ties)
            if tick < 2:
                continue
            T = int(rng.integers(1, 9))
            times = np.arange(tick - T + 1, tick + 1, dtype=np.int64) * 15000 + int(rng.integers(0, 15000))
            ran += _both(plan, times, EXPRS, (zero_ties, case, tick))
            calls += 1
        assert plan.builds >= 5
    # (a / b makes -0.0 next to 0.0 under a max now and then even without -0.0 in the store, and a histogram bucket
    # is missing now and then: the numpy path)
    assert (0 if zero_ties else calls // 3) < ran < calls


def test_arena_taken_again_gives_the_fresh_arena_results(monkeypatch):
    """The plan's arena (``program.Arena``) is taken again at every call: filled with garbage before each call
    (random bits, NaN, True presence) the results are still the numpy nodes' bits (every arena cell read is written
    in the call first), and the results of earlier calls, kept by the caller, do not change at later calls (they are
    copies of the roots' rows, not views of the arena). A stopped call drops the buffers."""
    rng = np.random.default_rng(11)
    store, fams, _, _, plan = _random_plan(rng, EXPRS, 40)
    kept = []
    n_a = 5
    for tick in range(40):
        if tick % 9 == 4:
            n_a += 1
        _write(rng, store, fams, tick, n_a, False)
        if tick < 2:
            continue
        ar = plan._arena
        if ar is not None and ar.v is not None:
            ar.v[:] = rng.normal(0, 1e6, ar.v.size)
            ar.v[rng.random(ar.v.size) < 0.3] = np.nan
            ar.v.view(np.int64)[rng.random(ar.v.size) < 0.1] = -1   # (a NaN payload)
            ar.p[:] = rng.random(ar.p.size) < 0.5
            if ar.kv is not None:
                ar.kv[:] = np.nan
                ar.kp[:] = True
        T = int(rng.integers(1, 9))
        times = np.arange(tick - T + 1, tick + 1, dtype=np.int64) * 15000
        before = plan.program_calls
        got = plan.evaluate(times)
        if plan.program_calls == before:
            assert plan._arena.v is None   # (stopped: dropped)
        kept.append([(x, None if not isinstance(x, Vec) else (x.v.copy(), x.p.copy())) for x in got])
        PL.PROGRAM = False
        try:
            want = plan.evaluate(times)
        finally:
            PL.PROGRAM = True
        for name, x, y in zip(EXPRS, got, want):
            _same(x, y, (tick, name))
    assert plan.program_calls > 10 and plan.builds >= 3
    for res in kept:
        for x, c in res:
            if c is not None:
                assert np.array_equal(_bits(x.v), _bits(c[0])) and np.array_equal(x.p, c[1])


def test_program_stops_at_max_min_of_signed_zeros():
    """0.0 against -0.0 in a max / min (numpy's loops keep either): the call is the numpy path's; without such a
    pair, the program's."""
    store = MetricStore(step_s=15.0)
    a = store.family("a", ("i", "g"))
    exprs = ["max(a)", "min by (g) (a)", "sum(a)"]
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{k}", node=eng.compile(e)) for k, e in enumerate(exprs)]
    plan = PL.PackPlan(eng, rules)
    rows = a.rows([("1", "x"), ("2", "x"), ("3", "y")])
    for tick, vals in enumerate(([1.0, 0.0, -0.0], [0.0, -0.0, 1.0], [-0.0, 0.0, 1.0], [2.0, 0.0, -0.0])):
        store.write(a, rows, tick, np.array(vals))
        ran = _both(plan, np.array([tick * 15000], dtype=np.int64), exprs, tick)
        assert ran == (tick in (0, 3)), tick


def test_program_lowers_every_common_node_type():
    """Of the random store's plan, only the node types without a lowering are numpy steps."""
    rng = np.random.default_rng(1)
    _, _, _, _, plan = _random_plan(rng, EXPRS, 10, 10)
    plan.evaluate(np.arange(2, 10, dtype=np.int64) * 15000)
    prog = lower(plan)
    kinds = {type(st[0]).__name__ + (":" + st[0].op if hasattr(st[0], "op") else "")
             for _, _, st in prog.schedule if st is not None}
    assert kinds == {"_HistQuantile", "_Generic", "_Range", "_VecScalar:^", "_VecVec:atan2"}, kinds
    ops = set(prog.ins[:, 0].tolist())
    assert ops == {0, 1, 2, 3, 4, 5, 6, 7, 8}, ops


@pytest.mark.parametrize("op", sorted(BINOPS))
def test_binop_equals_numpy_ufunc(op):
    """``compiled.binop`` on every pair of special values (and random ones) is the numpy ufunc's result."""
    from sremarathon_env.alerts.vectorops import ARITH_FUNCS, CMP_FUNCS

    nb = compiled.warm()
    rng = np.random.default_rng(2)
    xs = np.concatenate([SPECIAL, -SPECIAL, rng.normal(0, 1e3, 60), rng.integers(-9, 9, 40).astype(float)])
    code = BINOPS[op]
    ins = np.zeros((1, compiled.PROGRAM_FIELDS), np.int64)
    n = len(xs)
    with np.errstate(all="ignore"):
        want = (ARITH_FUNCS[op](xs[:, None], xs[None, :]) if op in ARITH_FUNCS
                else CMP_FUNCS[op](xs[:, None], xs[None, :]).astype(np.float64))
    # one vector-scalar instruction per right operand: V rows 0..n-1 the left values, row n the right scalar
    for k in range(n):
        V = np.zeros((2 * n + 1, 1))
        V[:n, 0] = xs
        V[2 * n, 0] = xs[k]
        P = np.ones((n, 1), bool)
        ins[0] = [3, code, n, n, 0, 0, 0, n, 2 * n, 0, 0, 0, 0, 0, 2 if code >= 10 else 0, 0]
        assert nb.program(ins, np.zeros(0, np.int64), np.ones(1), 0, 1, V, P, np.zeros(0, np.intp),
                          np.zeros((0, 2), np.intp), np.zeros((0, 1), np.int64), np.zeros((0, 1), bool),
                          np.zeros((0, 1)), np.zeros((0, 1), bool)) == -1
        assert np.array_equal(_bits(V[n:2 * n, 0]), _bits(want[:, k])), (op, xs[k])


def test_program_stops_where_a_numpy_node_raises(monkeypatch):
    """A numpy step that raises: the call is the numpy path's (the rule then takes the generic evaluator)."""
    exprs = [e for e in EXPRS if not any(w in e for w in ("max", "min", "histogram"))]
    exprs += ["histogram_quantile(1.5, sum by (le) (rate(hb_bucket[5m]))) > 0"]   # (a numpy step: q > 1)
    rng = np.random.default_rng(4)
    store, _, _, rules, plan = _random_plan(rng, exprs, 12, 12)
    times = np.arange(4, 12, dtype=np.int64) * 15000
    assert _both(plan, times, exprs) == 1

    def boom(self, E):
        raise RuntimeError("boom")

    monkeypatch.setattr(PL._HistQuantile, "compute", boom)
    assert _both(plan, times, exprs) == 0
    fresh = PromQLEngine(store)
    out = plan.evaluate(times)
    _same(out[-1], fresh.evaluate(rules[-1].node, times), "generic")


def test_program_off_without_compiled_kernels(monkeypatch):
    rng = np.random.default_rng(4)
    _, _, _, _, plan = _random_plan(rng, EXPRS, 12, 12)
    monkeypatch.setenv("SREMARATHON_NUMBA", "0")
    plan.evaluate(np.arange(4, 12, dtype=np.int64) * 15000)
    assert plan.program_calls == 0 and plan._prog is None


def _twin(app: str, seed: int):
    from faults.effects import Effect
    from apps import load_app
    from sremarathon_env.backends.sim import SimBackend

    svcs = [s.name for s in load_app(app).services]
    sim = SimBackend(app, seed=seed)
    plan = PL.PackPlan(PromQLEngine(sim.store), load_rule_pack().rules)
    names = [r.name for r in load_rule_pack().rules]
    effects = {1: Effect(kind="error_rate", service=svcs[1], rate=0.6), 3: Effect(kind="crash", service=svcs[2]),
               5: Effect(kind="latency", service=svcs[3], ms=1500), 7: Effect(kind="not_ready", service=svcs[1])}
    held = []
    ran = 0
    for k in range(1, 13):
        if k in effects:
            held.append(sim.apply_effect(effects[k]))
        if k == 9:
            sim.remove_effect(held.pop(0))
        if k == 10:
            sim.deploy(svcs[4], image_tag="bad", message="bump", author="dev")
        sim.advance_to(k * 120.0)
        times = (np.arange(8, dtype=np.int64) - 7) * 15000 + k * 120000
        ran += _both(plan, times, names, (app, seed, k))
    return ran, plan


@pytest.mark.parametrize("app,seed", [("online-boutique", 1), ("online-boutique", 7), ("train-ticket", 3),
                                      ("astronomy-shop", 2), ("astronomy-shop", 5)])
def test_program_equals_numpy_nodes_on_twin_runs_with_faults(app, seed):
    ran, plan = _twin(app, seed)
    assert ran >= 10 and plan.builds >= 2


def test_program_on_recorded_faulted_run():
    from tests.alerts.twin import END_S, faulted_run

    sim = faulted_run(2)
    plan = PL.PackPlan(PromQLEngine(sim.store), load_rule_pack().rules)
    names = [r.name for r in load_rule_pack().rules]
    ran = 0
    for end in range(120, int(END_S) + 1, 120):
        times = (np.arange(8, dtype=np.int64) - 7) * 15000 + end * 1000
        ran += _both(plan, times, names, end)
    assert ran >= 15


def test_programs_and_their_lowerer_leave_no_cyclic_garbage():
    """Lowered nodes keep their lowering (``_lw``: ints, bytes, their children's lowerings; never themselves), the
    plan keeps its lowerer and program: a dropped plan and the nodes a rebuild replaces are freed by reference
    counting (the plan's refcount test, with every build lowered)."""
    import gc

    from tests.alerts.test_plan_refcount import _collector_off, _grow

    rules = load_rule_pack().rules
    rng = np.random.default_rng(3)
    with _collector_off():
        for attempt in range(3):
            store = MetricStore(step_s=15.0)
            plan = PL.PackPlan(PromQLEngine(store), rules)
            for k in range(40):
                _grow(store, rng, k)
                if k % 4 == 3:
                    with np.errstate(all="ignore"):
                        plan.evaluate(np.arange(k - 3, k + 1, dtype=np.int64) * 15000)
                    if attempt:
                        assert gc.collect() == 0, (attempt, k)
            assert plan.program_calls >= 5 and plan.builds > 3
            del plan
            found = gc.collect()
            if attempt:
                assert found == 0, attempt


def test_kids_and_fields_per_type_equal_their_definitions():
    """``visit`` takes a node's children and fields from its type's ``_KIDS_FIELDS`` entry in one call: the same
    objects as ``kid_nodes`` and ``_fields`` give, for every node of plans over a growing store and a faulted twin
    run (the pack and other expressions), and ``_Cant`` alike for a node the program cannot take."""
    from sremarathon_env.alerts import program as PR
    from tests.alerts.test_plan_empty import OTHER
    from tests.alerts.test_plan_refcount import _grow
    from tests.alerts.twin import faulted_run

    def check(plan, seen):
        lw = PR._Lowerer()
        lw.kernel = plan._kernel
        stack = [r for r in plan._roots if r is not None]
        while stack:
            node = stack.pop()
            cls = type(node)
            if cls is PL._Pass:
                stack.append(node.child)
                continue
            if cls is PL._Empty or id(node) in seen:
                continue
            seen[id(node)] = cls
            try:
                kn = lw.kid_nodes(node, cls)
            except PR._Cant:
                with pytest.raises(PR._Cant):
                    if cls not in PR._KIDS_FIELDS:
                        raise PR._Cant(cls.__name__)
                    PR._KIDS_FIELDS[cls](lw, node)
                continue
            kn2, fields2 = PR._KIDS_FIELDS[cls](lw, node)
            fields = PR._fields(node, cls)
            assert len(kn) == len(kn2) and all(a is b for a, b in zip(kn, kn2)), cls
            assert len(fields) == len(fields2) and all(a is b for a, b in zip(fields, fields2)), cls
            stack.extend(kn)

    eng = PromQLEngine(MetricStore(step_s=15.0))
    rules = list(load_rule_pack().rules) + [SimpleNamespace(name=f"x{i}", node=eng.compile(e))
                                           for i, e in enumerate(OTHER)]
    seen: dict = {}
    store = MetricStore(step_s=15.0)
    plan = PL.PackPlan(PromQLEngine(store), rules)
    rng = np.random.default_rng(5)
    for k in range(24):
        _grow(store, rng, k)
        with np.errstate(all="ignore"):
            plan.evaluate(np.arange(max(0, k - 3), k + 1, dtype=np.int64) * 15000)
        check(plan, seen)
    twin = PL.PackPlan(PromQLEngine(faulted_run(2).store), rules)
    for end in (600, 1200, 2400):
        with np.errstate(all="ignore"):
            twin.evaluate((np.arange(8, dtype=np.int64) - 7) * 15000 + end * 1000)
        check(twin, seen)
    types = set(seen.values())
    assert {PL._Agg, PL._Sel, PL._VecScalar, PL._VecVec, PL._Const, PL._Range, PL._Generic} <= types


def test_root_rows_are_each_roots_arena_rows_in_rule_order():
    """``Program._root_rows`` (one ``repeat`` plus a running index) against its definition, row by row."""
    from sremarathon_env.alerts.program import Program

    rng = np.random.default_rng(3)
    for _ in range(300):
        outs = [None if rng.random() < 0.2 else tuple(int(x) for x in rng.integers(0, 1000, 2)) + (int(rng.integers(0, 30)),)
                for _ in range(int(rng.integers(0, 10)))]
        p = Program()
        p.outs = outs
        vi, pi, spans = p._root_rows()
        v2, p2, s2 = [], [], []
        for o in outs:
            if o is None:
                s2.append(None)
                continue
            a = len(v2)
            v2.extend(range(o[0], o[0] + o[2]))
            p2.extend(range(o[1], o[1] + o[2]))
            s2.append((a, len(v2)))
        assert vi.tolist() == v2 and pi.tolist() == p2 and spans == s2 and vi.dtype == pi.dtype == np.intp


def test_released_arenas_serve_the_next_plans_and_change_no_result(monkeypatch):
    """An engine's release gives its plan's arena buffers to the next plans (``program._ARENA_POOL``, bounded): the
    next plan's calls take them (holding the earlier plan's values) and still give the numpy nodes' bits; the released
    plan, used again, takes buffers afresh and agrees too."""
    from sremarathon_env.alerts import program

    monkeypatch.setattr(program, "_ARENA_POOL", {"v": [], "p": [], "kv": [], "kp": []})
    exprs = [e for e in EXPRS if not any(w in e for w in ("max", "min", "histogram"))]   # (no stops)
    rng = np.random.default_rng(12)
    first = _random_plan(rng, exprs, 30, 20)
    times = np.arange(12, 20, dtype=np.int64) * 15000
    assert _both(first[4], times, exprs) == 1
    held = {k: getattr(first[4]._arena, k) for k in ("v", "p", "kv", "kp")}
    assert all(b is not None for b in held.values())
    first[4]._arena.release()
    assert first[4]._arena.v is None and all(len(program._ARENA_POOL[k]) == 1 for k in held)
    second = _random_plan(rng, exprs, 30, 24)
    ran = _both(second[4], np.arange(20, 24, dtype=np.int64) * 15000, exprs)   # (4 times: fits the pooled ones)
    ar = second[4]._arena
    assert ran == 1 and ar.v is held["v"] and ar.p is held["p"]   # (the pooled buffers were taken)
    assert _both(first[4], times, exprs) == 1   # the released plan again: fresh buffers, same results
    assert first[4]._arena.v is not held["v"]
    for _ in range(3):
        first[4]._arena.release()
        second[4]._arena.release()
    assert all(len(program._ARENA_POOL[k]) <= program.ARENA_POOL_MAX for k in held)


@pytest.mark.parametrize("app,seed", [("online-boutique", 2), ("train-ticket", 4)])
def test_a_lowering_walks_the_changed_rules_and_equals_a_walk_of_all(app, seed, monkeypatch):
    """At each build of a twin run with faults and deploys, the lowering walks exactly the rules whose root or record
    is another object than at the last lowering, or whose record is None (the others' packed rows and arena rows are
    taken again), and its program equals, row for row, the program of a walk of every rule (a kept rule's nodes are
    the same objects with the same fields: each gives its kept lowering)."""
    from faults.effects import Effect
    from apps import load_app
    from sremarathon_env.alerts import program as PR
    from sremarathon_env.backends.sim import SimBackend

    svcs = [s.name for s in load_app(app).services]
    sim = SimBackend(app, seed=seed)
    plan = PL.PackPlan(PromQLEngine(sim.store), load_rule_pack().rules)
    tops = []
    real_visit = PR._Lowerer.visit
    depth = [0]

    def visit(self, node, was=None):
        if depth[0] == 0:
            tops.append(node)
        depth[0] += 1
        try:
            return real_visit(self, node, was)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(PR._Lowerer, "visit", visit)
    last = None
    lowered = partial = 0
    for k in range(1, 15):
        if k == 2:
            sim.apply_effect(Effect(kind="crash", service=svcs[2]))
        if k in (4, 5, 9):
            sim.deploy(svcs[3 + k % 3], image_tag=f"t{k}", message="bump", author="dev")
        sim.advance_to(k * 120.0)
        tops.clear()
        plan.evaluate((np.arange(8, dtype=np.int64) - 7) * 15000 + k * 120000)
        prog = plan._prog[2]
        assert prog is not None
        roots, records = list(plan._roots), list(plan._records)
        if last is not None and tops:
            lowered += 1
            want = [r for i, r in enumerate(roots) if (r is not last[0][i] or records[i] is not last[1][i]
                                                     or records[i] is None) and r is not None and r.labels]
            assert [id(x) for x in tops] == [id(x) for x in want], k
            partial += len(want) < sum(1 for r in roots if r is not None and r.labels)
            lw = plan._lowerer
            lw.last = None   # (a walk of every rule, over the same nodes' kept lowerings)
            n_k, n_s = len(lw.kslots), len(lw.sslots)
            full = lw.lower(plan)
            assert np.array_equal(full.ins, prog.ins) and full.outs == prog.outs, k
            assert (len(lw.kslots), len(lw.sslots)) == (n_k, n_s), k   # (no node lowered afresh)
        last = (roots, records)
    assert lowered >= 3 and partial >= 3


def test_a_new_aggregation_takes_the_arena_rows_of_the_one_it_replaces(monkeypatch):
    """A rebuild makes a new aggregation where its input grew; under a kept parent (the same comparison or match
    at the same place) it takes the arena rows of the aggregation it replaces when it has as many groups, so the
    parent's instruction row is taken again (``_Lowerer.visit`` / ``make``). Pods and, now and then, services come:
    at every call the program equals the numpy nodes, also for the rules of a family that never changes, whose
    rows were handed out after the aggregations' (an aggregation with more groups in the old rows would overwrite
    them); the old rows are taken where the group count holds and not where it grew."""
    from sremarathon_env.alerts import program as PR

    taken = [0, 0]   # (aggregations made on their predecessor's rows, made on new rows)
    real_make = PR._Lowerer.make

    def make(self, node, cls, kids):
        nv = self.nv
        out = real_make(self, node, cls, kids)
        if cls is PL._Agg:
            taken[out[0][0] >= nv] += 1
        return out

    monkeypatch.setattr(PR._Lowerer, "make", make)
    rng = np.random.default_rng(3)
    store = MetricStore(step_s=15.0, capacity=8)
    p = store.family("p", ("pod", "svc"))
    q = store.family("q", ("k",))
    exprs = ["sum by (svc) (p) > 0", "q * 2", "max by (svc) (p) - 1", "q + 1",
             "count by (svc) (p) / count by (svc) (p > 1)", "q - 3",
             'sum by (s2) (label_replace(p, "s2", "$1", "svc", "(.*)")) >= 1', "-q"]
    eng = PromQLEngine(store)
    rules = [SimpleNamespace(name=f"r{k}", node=eng.compile(e)) for k, e in enumerate(exprs)]
    plan = PL.PackPlan(eng, rules)
    pods: list = []
    n_svc = 2
    for tick in range(60):
        if tick % 3 == 0:
            if tick % 12 == 6:
                n_svc += 1
            pods.append((f"p{len(pods):03d}", f"s{int(rng.integers(n_svc))}"))
        store.write(p, p.rows(pods), tick, rng.integers(0, 4, size=len(pods)).astype(float))
        store.write(q, q.rows([("x",), ("y",), ("z",)]), tick, rng.normal(0, 2, 3).round(1))
        if tick < 2:
            continue
        times = np.arange(tick - 3, tick + 1, dtype=np.int64) * 15000
        assert _both(plan, times, exprs, tick) > 0
    assert plan.builds > 15 and taken[0] > 20 and taken[1] > 10, (plan.builds, taken)
