"""`util.KeyedDraws` serves the draws of ``child_rng(seed, *keys)``: for any sequence of ``uniform`` calls,
whatever other sequences were made for the same keys before or meanwhile (served, extended, diverging
from the record at any position, interleaved), each value is the one a fresh generator of those keys
gives at that position; the record is bounded (seeds and generators per seed) and holds flat float
tuples only. And twins of one seed draw the same kubelet moments with the record as with fresh
generators (the scored twin of a run loop builds none of them)."""

import numpy as np
import pytest

from sremarathon_env.backends.sim import SimBackend, util
from sremarathon_env.backends.sim.util import KeyedDraws, child_rng

from tests.backends.sim.twins import assert_same_twins


def _want(seed, keys, calls):
    rng = child_rng(seed, *keys)
    return [rng.uniform(lo, hi) for lo, hi in calls]


@pytest.fixture(autouse=True)
def fresh_record(monkeypatch):
    monkeypatch.setattr(util, "_DRAWS", {})


def test_any_sequences_of_calls_draw_the_generators_values():
    r = np.random.default_rng(0)
    args = [(0.8, 1.2), (0.0, 1.0), (1.5, 6.0), (0.5, 2.0), (0.85, 1.25), (-3.0, 7.5)]
    for case in range(400):
        seed = int(r.integers(0, 2**40))
        keys = ("kubelet", f"pod-{r.integers(0, 3)}", int(r.integers(0, 2)), "start", round(float(r.uniform(0, 99)), 3))
        # several sequences for one generator: prefixes, extensions, divergences at any position
        base = [args[i] for i in r.integers(0, len(args), size=int(r.integers(1, 5)))]
        for _ in range(int(r.integers(1, 6))):
            cut = int(r.integers(0, len(base) + 1))
            tail = [args[i] for i in r.integers(0, len(args), size=int(r.integers(0, 4)))]
            calls = base[:cut] + tail
            d = KeyedDraws(seed, *keys)
            got = [d.uniform(lo, hi) for lo, hi in calls]
            assert got == _want(seed, keys, calls), (case, calls)
            assert all(type(v) is float for v in got)


def test_interleaved_draws_of_the_same_keys():
    calls_a = [(0.8, 1.2), (0.0, 1.0), (1.5, 6.0)]
    calls_b = [(0.8, 1.2), (0.5, 2.0), (0.0, 1.0)]
    for order in ("abab", "aabb", "bbaa", "baab"):
        util._DRAWS.clear()
        objs = {"a": KeyedDraws(3, "k", 1), "b": KeyedDraws(3, "k", 1)}
        got = {"a": [], "b": []}
        it = {"a": iter(calls_a), "b": iter(calls_b)}
        for who in order + "ab":
            c = next(it[who], None)
            if c is not None:
                got[who].append(objs[who].uniform(*c))
        assert got["a"] == _want(3, ("k", 1), calls_a[:len(got["a"])])
        assert got["b"] == _want(3, ("k", 1), calls_b[:len(got["b"])])
        # and afterwards: each recorded prefix is still the generator's
        for calls in (calls_a, calls_b):
            assert [KeyedDraws(3, "k", 1).uniform(*c) for c in calls[:1]] == _want(3, ("k", 1), calls[:1])


def test_keys_that_print_alike_share_a_generator_and_others_do_not():
    # child_rng hashes the keys' texts: 1 and "1" are one generator, 1 and 1.0 are two
    assert KeyedDraws(5, "a", 1).uniform(0.0, 1.0) == child_rng(5, "a", "1").uniform(0.0, 1.0)
    assert KeyedDraws(5, "a", 1.0).uniform(0.0, 1.0) == child_rng(5, "a", 1.0).uniform(0.0, 1.0)
    assert KeyedDraws(5 + 2**32, "a", 1).uniform(0.0, 1.0) == child_rng(5, "a", 1).uniform(0.0, 1.0)


def test_the_record_is_bounded(monkeypatch):
    monkeypatch.setattr(util, "MAX_DRAWS", 50)
    monkeypatch.setattr(util, "MAX_DRAW_SEEDS", 2)
    for seed in range(6):
        for k in range(120):
            KeyedDraws(seed, "x", k).uniform(0.0, 1.0)
    assert list(util._DRAWS) == [4, 5]   # the latest seeds
    for book in util._DRAWS.values():
        assert 0 < len(book) <= 50
        assert all(type(v) is tuple and all(type(x) is float for x in v) for v in book.values())
    # served after clearing as before
    assert KeyedDraws(5, "x", 3).uniform(0.0, 1.0) == child_rng(5, "x", 3).uniform(0.0, 1.0)


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_twins_of_one_seed_draw_what_fresh_generators_draw(monkeypatch, app):
    """A metric-less twin records the kubelet moments' draws, a second twin of its seed is served them (no
    kubelet generator built): both equal twins run with a fresh generator per moment, through churn and crashes."""
    from faults.effects import Effect

    def drive(sim):
        sim.advance_to(60)
        svc = sim.app.services[2].name
        sim.apply_effect(Effect(kind="memory_hog", service=svc, mi=10_000))   # OOM kills, restarts
        sim.restart(sim.app.services[1].name)
        sim.scale(sim.app.services[0].name, 4)
        sim.advance_to(300)
        sim.restart(sim.app.services[3].name)
        sim.deploy(sim.app.services[4].name, message="m", author="a", image_tag="no-such-tag")   # pull failures
        sim.advance_to(900)
        return sim

    built = [0]
    real, real_of = util.child_rng, util._rng_of

    def counted(seed, joined):
        built[0] += joined.startswith("kubelet\x1f")   # the kubelet moments' generators (not the load noise's)
        return real_of(seed, joined)

    monkeypatch.setattr(util, "_rng_of", counted)
    first = drive(SimBackend(app, seed=11, metrics=False))
    n_first = built[0]
    second = drive(SimBackend(app, seed=11))
    assert n_first > 10 and built[0] == n_first   # the second twin built no generator for its moments

    class Fresh:   # the definition: a generator per moment
        def __init__(self, seed, *keys):
            self.rng = real(seed, *keys)

        def uniform(self, low, high):
            return self.rng.uniform(low, high)

    from sremarathon_env.backends.sim import cluster
    monkeypatch.setattr(cluster, "KeyedDraws", Fresh)
    for got, want in ((second, drive(SimBackend(app, seed=11))),
                      (first, drive(SimBackend(app, seed=11, metrics=False)))):
        assert_same_twins(got, want, history_nan=True)
        assert got.cluster.events == want.cluster.events and got.cluster.lifecycle == want.cluster.lifecycle
        assert [(p.ready_t, p.started_t, p.restarts) for p in got.cluster.pods] == \
            [(p.ready_t, p.started_t, p.restarts) for p in want.cluster.pods]
