"""Schedule determinism, calibration to the paper, conflict-freedom and noise."""

import numpy as np
import pytest

from faults.catalogue import CATALOGUE_VERSION, catalogue_apps, load_catalogue
from faults.orchestrator import (CATEGORY_MIX, MAX_DURATION_S, MIN_DURATION_S, PAPER_TARGETS, build_schedule,
                                 calibration)

APPS = catalogue_apps()


@pytest.mark.parametrize("app", APPS)
def test_same_inputs_same_digest(app):
    a, b = build_schedule(app, 11), build_schedule(app, 11)
    assert a == b and a.digest() == b.digest()
    assert a.canonical_json() == b.canonical_json()


@pytest.mark.parametrize("app", APPS)
def test_different_seeds_differ(app):
    digests = {build_schedule(app, s).digest() for s in range(8)}
    assert len(digests) == 8
    starts = {tuple(f.start_s for f in build_schedule(app, s).faults) for s in range(8)}
    assert len(starts) == 8


def test_catalogue_version_is_part_of_the_input():
    with pytest.raises(ValueError, match="not available"):
        build_schedule("online-boutique", 1, catalogue_version="1999.01-r0")
    cat = load_catalogue("online-boutique")
    a = build_schedule("online-boutique", 1, faults=cat, catalogue_version=CATALOGUE_VERSION)
    b = build_schedule("online-boutique", 1, faults=cat, catalogue_version="other-release")
    assert a.digest() != b.digest()


@pytest.mark.parametrize("app", APPS)
def test_shape_window_durations_and_rising_intensity(app):
    starts_early, starts_late = 0, 0
    for seed in range(10):
        s = build_schedule(app, seed)
        assert s.faults == sorted(s.faults, key=lambda f: (f.start_s, f.fault_id))
        for f in s.faults:
            assert 0 < f.start_s < s.injection_s
            assert MIN_DURATION_S <= f.duration_s <= MAX_DURATION_S
        ids = [f.fault_id for f in s.faults]
        assert len(ids) == len(set(ids))
        assert [f.instance_id for f in s.faults] == [f"F{i + 1:03d}" for i in range(len(s.faults))]
        starts_early += sum(1 for f in s.faults if f.start_s < 1200)
        starts_late += sum(1 for f in s.faults if f.start_s >= 2400)
    assert starts_late > 1.4 * starts_early  # intensity rises over the window


@pytest.mark.parametrize("app", APPS)
def test_no_two_conflicting_faults_overlap(app):
    by_id = {f.id: f for f in load_catalogue(app)}
    for seed in range(20):
        s = build_schedule(app, seed, noise=False)
        fs = s.faults
        for i, a in enumerate(fs):
            ka = set(by_id[a.fault_id].conflict_keys())
            for b in fs[i + 1:]:
                if b.start_s >= a.end_s:
                    continue
                assert not (ka & set(by_id[b.fault_id].conflict_keys())), (seed, a, b)


@pytest.mark.slow
@pytest.mark.parametrize("app", APPS)
def test_calibration_within_15_percent_of_the_paper(app):
    avg_t, peak_t = PAPER_TARGETS[app]
    c = calibration(app, range(20))
    assert abs(c["n_faults"] / 60 - 1) <= 0.15, c
    assert abs(c["avg_active"] / avg_t - 1) <= 0.15, c
    assert abs(c["peak_active"] / peak_t - 1) <= 0.15, c
    # code + configuration together about 40 % (paper: 39.5 %)
    assert 0.30 <= c["share_code"] + c["share_config"] <= 0.50, c


def test_category_mix_is_a_distribution_with_code_and_config_40_percent():
    assert abs(sum(CATEGORY_MIX.values()) - 1) < 1e-9
    assert abs(CATEGORY_MIX["code"] + CATEGORY_MIX["config"] - 0.40) < 1e-9


@pytest.mark.parametrize("app", APPS)
def test_noise_is_seeded_separate_and_configurable(app):
    on = build_schedule(app, 4)
    off = build_schedule(app, 4, noise=False)
    assert on.faults == off.faults and off.noise == [] and on.noise
    assert on.noise == build_schedule(app, 4).noise
    assert on.noise != build_schedule(app, 5).noise
    heavy = build_schedule(app, 4, noise_rate=3.0)
    assert len(heavy.noise) > len(on.noise)
    kinds = {e.kind for e in on.noise}
    assert kinds <= {"benign_deploy", "pod_restart", "latency_blip", "load_burst", "alert_flap"}
    for e in on.noise:
        assert 0 < e.start_s <= e.end_s <= on.horizon_s


def test_custom_windows():
    s = build_schedule("online-boutique", 2, injection_s=1800, observation_s=600)
    assert all(f.start_s < 1800 for f in s.faults)
    assert 20 <= len(s.faults) <= 40
    with pytest.raises(ValueError):
        build_schedule("online-boutique", 2, injection_s=0)


@pytest.mark.parametrize("app", APPS)
def test_every_fault_window_is_long_enough_to_repair(app):
    from faults.orchestrator import fault_min_durations

    cat = load_catalogue(app)
    need = fault_min_durations(app, cat)
    for seed in range(5):
        for f in build_schedule(app, seed, noise=False).faults:
            assert f.duration_s >= need[f.fault_id], (seed, f)


def test_repairable_minimum_follows_boot_time():
    from apps import load_app
    from faults.orchestrator import DETECT_S, HOLD_S, repairable_min_s

    spec = load_app("train-ticket")
    by_id = {f.id: f for f in load_catalogue("train-ticket")}
    boot = 235.0  # ts-route-plan-service: readiness delay + JVM start-up
    oom = repairable_min_s(by_id["tt-resource-ts-route-plan-service-memory-oom"], spec)
    assert oom >= DETECT_S + boot + HOLD_S          # direct fault: no onset wait, repair boots new pods
    code = [f for f in by_id.values() if f.category == "code" and f.target == "ts-route-plan-service"][0]
    assert repairable_min_s(code, spec) == MAX_DURATION_S  # two boots (bad revision, rollback) hit the cap
    ob = load_catalogue("online-boutique")
    assert max(repairable_min_s(f, load_app("online-boutique")) for f in ob) < 400  # fast boots: short windows


@pytest.mark.parametrize("app,seed,digest", [
    ("online-boutique", 0, "126074ccd2247c662c0111f79bac6f03303be4bd68cc2dfd08256ff6534083bb"),
    ("train-ticket", 3, "027c96be6fcaaaad079a7844aa74197df9b7322f89f5b33cd3e49301432adaac"),
    ("astronomy-shop", 7, "c9dd7344032f5ff451e381c6660da5f79f52707dcca8a01751452e47bdffac23"),
])
def test_schedule_digests_are_pinned(app, seed, digest):
    """Published leaderboard runs depend on these schedules: a change to the draws (or to their order)
    must be a deliberate catalogue release, never a side effect of a refactor."""
    assert build_schedule(app, seed).digest() == digest


def test_conflict_keys_are_made_once_per_fault_and_equal_the_faults_own():
    from faults import orchestrator as orch

    faults = load_catalogue("online-boutique")
    for f in faults:
        assert orch._conflict_keys(f) == frozenset(f.conflict_keys())
        assert orch._conflict_keys(f) is orch._conflict_keys(f)   # made once
    copy = faults[0].model_copy()
    assert orch._conflict_keys(copy) == orch._conflict_keys(faults[0])   # another object: its own entry


@pytest.mark.parametrize("app", APPS)
def test_catalogue_index_kept_per_app_equals_a_fresh_one(app, monkeypatch):
    # schedules index the catalogue once per app (the faults that are not noise, by category, their conflict keys
    # and minimum durations): the same schedules as an index built afresh for every call
    import faults.orchestrator as orch

    kept = [build_schedule(app, s, injection_s=1200, observation_s=480) for s in range(6)]
    entry = [v for k, v in orch._POOL_PARTS.items() if k[0] == app]
    assert len(entry) == 1 and entry[0][2][0]                       # one entry for the app, a non-empty pool
    assert orch._pool_parts(app, load_catalogue(app)) is entry[0][2]   # a new list of the same faults finds it
    monkeypatch.setattr(orch, "_pool_parts", lambda app, faults: None)
    fresh = [build_schedule(app, s, injection_s=1200, observation_s=480) for s in range(6)]
    assert [s.canonical_json() for s in kept] == [s.canonical_json() for s in fresh]
    # another fault list (a subset) gets its own index, never the catalogue's
    monkeypatch.undo()
    sub = [f for f in load_catalogue(app) if f.category != "code"]
    assert orch._pool_parts(app, sub) is not entry[0][2]
    assert all(f.category != "code" for f in orch._pool_parts(app, sub)[0])
    assert len(orch._POOL_PARTS) <= orch.POOL_PARTS_MAX


def _pick_category_plain(rng, available: list[str]) -> list[str]:
    """`_pick_category`'s definition: over the categories left, in catalogue order, one
    ``rng.choice(len(cats), p=a / a.sum())`` per pick of the mix's weights (the last, among one, draws too)."""
    import numpy as np

    from faults.model import CATEGORIES

    cats = [c for c in CATEGORIES if c in available]
    w = [float(CATEGORY_MIX[c]) for c in cats]
    order = []
    while cats:
        a = np.array(w)
        i = int(rng.choice(len(cats), p=a / a.sum()))
        order.append(cats.pop(i))
        w.pop(i)
    return order


def test_category_order_equals_one_generator_choice_per_pick():
    # _pick_category draws all of an arrival's uniforms at once and bisects cached cumulative weights: the same
    # orders as one Generator.choice(p=...) per pick, and the generator left in the same state
    import numpy as np

    from faults import orchestrator as orch
    from faults.model import CATEGORIES

    for seed in range(400):
        r = np.random.default_rng(seed)
        avail = [c for c in CATEGORIES if r.random() < 0.75] or [CATEGORIES[int(r.integers(len(CATEGORIES)))]]
        fast, plain = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 1])
        for _ in range(4):
            assert orch._pick_category(fast, avail) == _pick_category_plain(plain, avail)
        assert fast.bit_generator.state == plain.bit_generator.state


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_blocked_faults_equal_the_free_test_per_fault(app):
    # _blocked finds the faults an arrival may not take through the faults holding each conflict key; the
    # definition tests every fault's keys against the busy keys and against each later fault's keys
    import numpy as np

    from faults import orchestrator as orch

    pool, _, keys, need, by_key, _ = orch._index_pool(app, load_catalogue(app), None)
    rng = np.random.default_rng(5)
    n_blocked = 0
    for _ in range(300):
        st, d = int(rng.integers(1, 3600)), int(rng.integers(48, 145)) * 5
        picks = [pool[int(i)] for i in rng.integers(len(pool), size=int(rng.integers(0, 9)))]
        busy = set().union(*(keys[f.id] for f in picks[: len(picks) // 2]))
        later = [(st + d + int(rng.integers(0, 400)), keys[f.id]) for f in picks[len(picks) // 2:]]

        def free(f):
            k = keys[f.id]
            if k & busy:
                return False
            en = st + max(d, need[f.id])
            return not any(s0 < en and k & ks for s0, ks in later)

        got = orch._blocked(st, d, busy, later, by_key, need)
        assert got == {f.id for f in pool if not free(f)}
        n_blocked += bool(got)
    assert n_blocked > 100


def _pick_list_definition(faults, used, blocked, need, d):
    """What an arrival picks from, as the schedule defines it: the candidates, those repairable in the window,
    and when none is, the candidates with the least need."""
    cand = [f for f in faults if f.id not in used and f.id not in blocked]
    if not cand:
        return []
    fit = [f for f in cand if need[f.id] <= d]
    if not fit:
        lo = min(need[f.id] for f in cand)
        fit = [f for f in cand if need[f.id] == lo]
    return fit


@pytest.mark.parametrize("app", APPS)
def test_one_pass_pick_list_equals_the_definition(app):
    """`_pick_list` (one pass over a category) gives the very list (same faults, same order) the definition's
    three lists give, for random used/blocked sets and windows, with the catalogue's needs and with random ones
    (many ties), every category."""
    from faults import orchestrator as orch

    pool, by_cat, _, need, _, index = orch._index_pool(app, load_catalogue(app), None)
    rng = np.random.default_rng(7)
    ids = [f.id for f in pool]
    checked = stretched = 0
    for trial in range(400):
        needs = need if trial % 2 == 0 else {i: int(rng.choice([240, 300, 360, 420, 600])) for i in ids}
        p = rng.random()
        used = {i for i in ids if rng.random() < p * 0.6}
        blocked = {i for i in ids if rng.random() < p * 0.6}
        d = int(rng.integers(200, 700))
        for c, faults in by_cat.items():
            want = _pick_list_definition(faults, used, blocked, needs, d)
            got = orch._pick_list(index[c] if needs is need else orch._pick_index(faults, needs), used, blocked, d)
            assert [f.id for f in got] == [f.id for f in want] and all(a is b for a, b in zip(got, want))
            checked += 1
            stretched += bool(want) and all(needs[f.id] > d for f in want)
    assert checked > 1000 and stretched > 50
