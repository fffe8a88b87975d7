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


def _clear_module_caches():
    from sremarathon_env.alerts import engine as EN
    from sremarathon_env.alerts import plan as P
    from sremarathon_env.alerts import values as VA
    for cache in (VA._MEMO, VA._MEMO_OLD, VA._GROWN, VA._PER_LB, P._AGG_LAYOUT, EN._ROW_ITEMS, EN._ROW_ITEMS_OLD):
        cache.clear()
    EN._ROW_ITEMS_COUNT[0] = 0


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
