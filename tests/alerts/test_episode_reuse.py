"""What the alert engine reuses from one episode to the next gives exactly a from-scratch result."""

from __future__ import annotations

import numpy as np

from sremarathon_env.alerts import tape as tape_mod


def test_tape_arrays_without_huge_page_advice_restore_the_switch():
    """The tape's arrays are plain uninitialised arrays of the asked shape and dtype; numpy's huge-page switch
    is what it was before (also where it was off)."""
    flip = tape_mod._SET_MADVISE_HUGEPAGE
    for dt in (np.float64, np.int64):
        a = tape_mod._empty_small_pages((700, 513), dt)
        assert a.shape == (700, 513) and a.dtype == dt and a.flags.c_contiguous and a.flags.writeable
        a[:, :3] = 1
        assert (a[:, :3] == 1).all()
    if flip is None:
        return
    before = flip(True)
    try:
        tape_mod._empty_small_pages((1024, 1024), np.float64)
        assert flip(False) is True          # restored to on
        tape_mod._empty_small_pages((1024, 1024), np.float64)
        assert flip(before) is False        # restored to off
    finally:
        flip(before)


def _module_caches():
    from sremarathon_env.alerts import engine as EN
    from sremarathon_env.alerts import plan as P
    from sremarathon_env.alerts import values as VA
    return [(VA, "_MEMO"), (VA, "_MEMO_OLD"), (VA, "_MEMO_HELD"), (VA, "_MEMO_HELD_OLD"), (VA, "_GROWN"), (VA, "_PER_LB"), (P, "_AGG_LAYOUT"),
            (EN, "_ROW_ITEMS"), (EN, "_ROW_ITEMS_OLD"), (P, "_FAM_CONTENT"), (P, "_SHARED_SEL")]


def _clear_module_caches():
    from sremarathon_env.alerts import engine as EN
    for mod, name in _module_caches():
        getattr(mod, name).clear()
    EN._ROW_ITEMS_COUNT[0] = 0
    from sremarathon_env.alerts import plan as P
    P._SHARED_ITEMS[0] = 0


def _save_module_caches():
    from sremarathon_env.alerts import engine as EN
    from sremarathon_env.alerts import plan as P
    return [dict(getattr(mod, name)) for mod, name in _module_caches()], EN._ROW_ITEMS_COUNT[0], P._SHARED_ITEMS[0]


def _restore_module_caches(saved):
    from sremarathon_env.alerts import engine as EN
    from sremarathon_env.alerts import plan as P
    for (mod, name), d in zip(_module_caches(), saved[0]):
        getattr(mod, name).clear()
        getattr(mod, name).update(d)
    EN._ROW_ITEMS_COUNT[0], P._SHARED_ITEMS[0] = saved[1], saved[2]


def _store(pods, extra_empty=False):
    from sremarathon_env.telemetry.store import MetricStore
    store = MetricStore(step_s=15.0)
    fam = store.family("kube_pod_info", ("namespace", "pod", "node", "created_by"))
    fam.rows([("ns", p, f"node-{i % 3}", "" if extra_empty and i % 2 else "rs") for i, p in enumerate(pods)])
    return store, fam


def test_row_items_shared_across_engines_equal_a_fresh_computation(monkeypatch):
    """Rows a new store has in common with an earlier one take the earlier items (equal content, shared
    objects); through generation turnovers every item equals the one an engine with empty caches makes."""
    from sremarathon_env.alerts import engine as EN
    from sremarathon_env.alerts import PromQLEngine
    monkeypatch.setattr(EN, "ROW_ITEM_GENERATION", 7)
    rng = np.random.default_rng(3)
    names = [f"pod-{i}" for i in range(40)] + ["a\x01b", "c\x00", ""]
    for episode in range(12):
        pods = list(rng.choice(names, size=int(rng.integers(1, 15)), replace=False))
        empty = bool(episode % 2)
        store, fam = _store(pods, empty)
        got, _ = PromQLEngine(store)._row_info(fam, len(fam))
        saved = (dict(EN._ROW_ITEMS), dict(EN._ROW_ITEMS_OLD), EN._ROW_ITEMS_COUNT[0])
        _clear_module_caches()
        store2, fam2 = _store(pods, empty)
        want, _ = PromQLEngine(store2)._row_info(fam2, len(fam2))
        assert got == want and [type(x) for x in got] == [type(x) for x in want]
        # the caches as they were (the next store shares with this one), within their bound
        EN._ROW_ITEMS, EN._ROW_ITEMS_OLD, EN._ROW_ITEMS_COUNT[0] = saved
        assert sum(map(len, EN._ROW_ITEMS.values())) <= 7
        assert sum(map(len, EN._ROW_ITEMS_OLD.values())) <= 7
    monkeypatch.setattr(EN, "ROW_ITEM_GENERATION", 1000)
    first = [PromQLEngine(s)._row_info(f, len(f))[0] for s, f in (_store(pods), _store(pods))]
    assert all(a is b for a, b in zip(*first))   # the second store's rows took the first one's items


def _ob_episode(seed):
    import gymnasium as gym

    import sremarathon_env  # noqa: F401 - registers the environments
    env = gym.make("SREMarathon/OnlineBoutique-v0", reference_run=False, injection_s=900, observation_s=240).unwrapped
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step("[]")
        done = term or trunc
    m = env.marathon
    return m.alert_engine.history(), m.alert_engine._plan.builds


def test_an_episode_after_another_equals_one_from_empty_caches():
    """The reused path (caches warm from an episode of another seed) against a from-scratch run (every module
    cache emptied first): the same alert history."""
    _ob_episode(4)
    warm = _ob_episode(7)
    _clear_module_caches()
    cold = _ob_episode(7)
    assert warm == cold and warm[0]


def _episode_store(rng, stable_pods):
    """A store like an episode's: families whose rows every episode has (info, c_total of the stable pods) and
    pod families whose rows differ per episode (m, h_bucket, a second family of m now and then)."""
    from sremarathon_env.telemetry.store import MetricStore
    from .test_plan_growth import _pod_name
    store = MetricStore(step_s=15.0)
    fams = {"m": store.family("m", ("pod", "svc", "phase")), "c": store.family("c_total", ("pod", "svc")),
            "h": store.family("h_bucket", ("pod", "svc", "le")), "info": store.family("info", ("svc", "team"))}
    if rng.random() < 0.5:
        fams["m2"] = store.family("m", ("pod", "svc"))
    pods = sorted({_pod_name(rng): str(rng.choice(["a", "b", "c"])) for _ in range(int(rng.integers(2, 7)))}.items())
    return store, fams, pods, stable_pods


def _write_tick(store, fams, pods, stable, tick, rng):
    keys = pods + stable
    info = [("a", "x"), ("b", "y"), ("c", "z")] + ([("d", "w")] if tick >= 12 else [])   # grows the same way
    store.write(fams["info"], fams["info"].rows(info), tick, np.arange(1.0, len(info) + 1))
    crow = fams["c"].rows(stable)
    store.write(fams["c"], crow, tick, np.arange(len(stable)) * 0.0 + tick * 2.0)
    if pods:
        ph = [("Running", "Pending")[int(rng.integers(2))] for _ in keys]
        store.write(fams["m"], fams["m"].rows([(p, s, x) for (p, s), x in zip(keys, ph)]), tick,
                    rng.integers(0, 5, size=len(keys)).astype(float))
        for i, le in enumerate(("0.1", "1", "+Inf")):
            hr = fams["h"].rows([(p, s, le) for p, s in keys])
            store.write(fams["h"], hr, tick, np.full(len(keys), tick * (i + 1.0)))
    if "m2" in fams and tick % 3 == 0:
        store.write(fams["m2"], fams["m2"].rows(keys[:2]), tick, np.ones(min(2, len(keys))))


def test_plans_of_later_episodes_equal_plans_from_scratch():
    """Episodes one after another in one process (first selections taken from an earlier store where its
    families had the same content, label work found by list identity) against a plan built with every module
    cache emptied and the generic evaluator, call after call while pods come and go."""
    from types import SimpleNamespace

    from sremarathon_env.alerts import PromQLEngine
    from sremarathon_env.alerts import plan as P
    from sremarathon_env.alerts.plan import PackPlan

    from .test_plan_growth import EXPRS, _pod_name, _same
    _clear_module_caches()
    rng = np.random.default_rng(11)
    stable = [("s-1", "a"), ("s-2", "b"), ("s-3", "c")]
    shared_lists = 0
    prev_labels: dict = {}
    for episode in range(8):
        store, fams, pods, _ = _episode_store(rng, stable)
        eng = PromQLEngine(store)
        rules = [SimpleNamespace(name=f"r{i}", node=eng.compile(e)) for i, e in enumerate(EXPRS)]
        plan = PackPlan(eng, rules)
        generic = PromQLEngine(store)
        for tick in range(24):
            if tick % 6 == 5:   # a pod comes mid-episode (rows appended to the pod families)
                pods = sorted(set(pods) | {(_pod_name(rng), "a")})
            _write_tick(store, fams, pods, stable, tick, rng)
            if tick % 4 != 3:
                continue
            times = np.arange(max(tick - 7, 0), tick + 1, dtype=np.int64) * 15000
            got = plan.evaluate(times)
            if tick == 3:   # the first build: the stable families' first selections are the earlier store's
                first = {k: st.labels for k, st in plan._sels.items()}
                shared_lists += sum(bool(lb) and lb is prev_labels.get(k) for k, lb in first.items())
            saved = _save_module_caches()
            _clear_module_caches()
            fresh = PackPlan(PromQLEngine(store), rules).evaluate(times)
            _restore_module_caches(saved)
            for e, rule, a, b in zip(EXPRS, rules, got, fresh):
                assert _same(a, b), (e, episode, tick)
                assert _same(a, generic.evaluate(rule.node, times)), (e, episode, tick)
            for st in plan._sels.values():   # the rows and family indices kept alongside the items
                if st.items:
                    assert st.r_arr.tolist() == [it[2] for it in st.items]
                    assert st.f_arr.tolist() == [it[1] for it in st.items]
        prev_labels = first
        assert len(P._SHARED_SEL) <= P.SHARED_SEL_MAX and len(P._FAM_CONTENT) <= P.FAM_CONTENT_MAX
        assert P._SHARED_ITEMS[0] == sum(len(v[4]) for v in P._SHARED_SEL.values()) <= P.SHARED_SEL_ITEMS_MAX
    assert shared_lists >= 10   # the stable families' first selections were taken from earlier stores


def test_rules_info_is_shared_by_plans_of_the_same_rules_and_bounded(monkeypatch):
    """What a plan reads of its rules is taken from an earlier plan of the same expression trees: equal to a
    computation from scratch; other trees get their own; the cache keeps at most RULES_INFO_MAX rule lists."""
    from types import SimpleNamespace

    from sremarathon_env.alerts import PromQLEngine, load_rule_pack
    from sremarathon_env.alerts import plan as P
    from sremarathon_env.telemetry.store import MetricStore
    rules = list(load_rule_pack().rules)
    a = P.PackPlan(PromQLEngine(MetricStore()), rules)
    b = P.PackPlan(PromQLEngine(MetricStore()), rules)
    assert b._names is a._names and b._rule_names is a._rule_names and b._needs is a._needs
    P._RULES_INFO.clear()
    fresh = P._rules_info(rules)
    assert (a._all_families, a._names, a._rule_names, a._needs, a._rule_sels) == fresh
    eng = PromQLEngine(MetricStore())
    monkeypatch.setattr(P, "RULES_INFO_MAX", 2)
    for i, expr in enumerate(['up == 0', 'rate(x_total[5m] offset 1m) > 0', '{job="a"}', 'sum(y) by (z)']):
        own = [SimpleNamespace(name="r", node=eng.compile(expr))]
        all_families, names, rule_names, needs, rule_sels = P._rules_info(own)
        sels = list(P._selectors(own[0].node))
        assert rule_sels == [tuple(sels) if P._plan_selected(own[0].node) else None]
        assert all_families == any(s.name is None for s in sels)
        assert names == sorted({s.name for s in sels if s.name is not None})
        assert rule_names == [frozenset(s.name for s in sels)]
        assert needs == ({} if all_families else P._family_needs(own))
        assert len(P._RULES_INFO) <= 2
