"""`util.KeyedDraws` serves the draws of ``child_rng(seed, *keys)`` from a record (a book): for any sequence of
``uniform`` calls, whatever other sequences were made for the same keys before or meanwhile (served,
extended, diverging from the record at any position, interleaved), each value is the one a fresh generator
of those keys gives at that position; only an object that keeps the book writes it, flat float tuples. And
twins draw the kubelet moments through their tapes (`Cluster._draws`): a taped (reference) run keeps its
draws, a twin of its seed that follows it builds no generator for those moments, twins without a tape draw
from child_rng as before; all of them equal twins drawing from a fresh generator per moment."""

import numpy as np
import pytest

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend, util
from sremarathon_env.backends.sim.cluster import Cluster
from sremarathon_env.backends.sim.util import KeyedDraws, child_rng

from tests.backends.sim.twins import assert_same_twins


def _want(seed, keys, calls):
    rng = child_rng(seed, *keys)
    return [rng.uniform(lo, hi) for lo, hi in calls]


def test_any_sequences_of_calls_draw_the_generators_values():
    r = np.random.default_rng(0)
    args = [(0.8, 1.2), (0.0, 1.0), (1.5, 6.0), (0.5, 2.0), (0.85, 1.25), (-3.0, 7.5)]
    book = {}
    for case in range(400):
        seed = int(r.integers(0, 2**40))
        keys = ("kubelet", f"pod-{r.integers(0, 3)}", int(r.integers(0, 2)), "start", round(float(r.uniform(0, 99)), 3))
        # several sequences for one generator: prefixes, extensions, divergences at any position, kept or not
        base = [args[i] for i in r.integers(0, len(args), size=int(r.integers(1, 5)))]
        for _ in range(int(r.integers(1, 6))):
            cut = int(r.integers(0, len(base) + 1))
            tail = [args[i] for i in r.integers(0, len(args), size=int(r.integers(0, 4)))]
            calls = base[:cut] + tail
            d = KeyedDraws(book, bool(r.integers(0, 2)), seed, *keys)
            got = [d.uniform(lo, hi) for lo, hi in calls]
            assert got == _want(seed, keys, calls), (case, calls)
            assert all(type(v) is float for v in got)
    assert book and all(type(v) is tuple and all(type(x) is float for x in v) for v in book.values())


def test_interleaved_draws_of_the_same_keys():
    calls_a = [(0.8, 1.2), (0.0, 1.0), (1.5, 6.0)]
    calls_b = [(0.8, 1.2), (0.5, 2.0), (0.0, 1.0)]
    for order in ("abab", "aabb", "bbaa", "baab"):
        book = {}
        objs = {"a": KeyedDraws(book, True, 3, "k", 1), "b": KeyedDraws(book, True, 3, "k", 1)}
        got = {"a": [], "b": []}
        it = {"a": iter(calls_a), "b": iter(calls_b)}
        for who in order + "ab":
            c = next(it[who], None)
            if c is not None:
                got[who].append(objs[who].uniform(*c))
        assert got["a"] == _want(3, ("k", 1), calls_a[:len(got["a"])])
        assert got["b"] == _want(3, ("k", 1), calls_b[:len(got["b"])])
        for calls in (calls_a, calls_b):   # and afterwards, served from whatever the record holds
            d = KeyedDraws(book, False, 3, "k", 1)
            assert [d.uniform(*c) for c in calls] == _want(3, ("k", 1), calls)


def test_only_a_keeper_writes_and_keys_are_what_child_rng_hashes():
    book = {}
    KeyedDraws(book, False, 5, "a", 1).uniform(0.0, 1.0)
    assert book == {}
    KeyedDraws(book, True, 5, "a", 1).uniform(0.0, 1.0)
    assert list(book) == [(5, "a\x1f1")]
    # child_rng hashes the keys' texts and the seed's low 32 bits: 1 and "1" are one generator, 1.0 another
    assert KeyedDraws(book, False, 5, "a", "1").uniform(0.0, 1.0) == child_rng(5, "a", "1").uniform(0.0, 1.0)
    assert KeyedDraws(book, False, 5, "a", 1.0).uniform(0.0, 1.0) == child_rng(5, "a", 1.0).uniform(0.0, 1.0)
    assert KeyedDraws(book, False, 5 + 2**32, "a", 1).uniform(0.0, 1.0) == child_rng(5, "a", 1).uniform(0.0, 1.0)


def _drive(sim):
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


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_twins_draw_what_fresh_generators_draw(monkeypatch, app):
    """A metric-less twin in a deferred span (a taped run) keeps the kubelet moments' draws, a second twin of its
    seed is served them (no kubelet generator built); a twin of another seed (no tape) draws from child_rng.
    Each equals the same twin run with a fresh generator per moment, through churn, crashes and pull failures."""
    built = [0]
    real_of = util._rng_of

    def counted(seed, joined):
        built[0] += joined.startswith("kubelet\x1f")   # the kubelet moments' generators (not the load noise's)
        return real_of(seed, joined)

    monkeypatch.setattr(util, "_rng_of", counted)

    def taped(seed):
        sim = SimBackend(app, seed=seed, metrics=False)
        sim.begin_deferred()
        _drive(sim)
        sim.end_deferred()
        return sim

    first = taped(11)
    n_first = built[0]
    second = _drive(SimBackend(app, seed=11))
    assert n_first > 10 and built[0] == n_first   # the follower built no kubelet generator
    other = _drive(SimBackend(app, seed=12))       # no tape of its seed: child_rng as before
    assert other._taped() is None and built[0] > n_first

    monkeypatch.setattr(Cluster, "_draws", lambda self, rng_key: child_rng(*rng_key))   # the definition
    for got, want in ((second, _drive(SimBackend(app, seed=11))), (first, taped(11)),
                      (other, _drive(SimBackend(app, seed=12)))):
        assert_same_twins(got, want, history_nan=True)
        assert got.cluster.events == want.cluster.events and got.cluster.lifecycle == want.cluster.lifecycle
        assert [(p.ready_t, p.started_t, p.restarts) for p in got.cluster.pods] == \
            [(p.ready_t, p.started_t, p.restarts) for p in want.cluster.pods]


def test_generator_entropy_read_from_the_digest_bytes_equals_the_definition():
    """`util._rng_of` reads the entropy words from the digest bytes at once: the same generator state and draws as
    `_rng_of_plain` (the words as a list of ints), for seeds past 32 bits, negative ones and varied keys."""
    rng = np.random.default_rng(5)
    seeds = [0, 1, 7, 2**32 - 1, 2**32, 2**40 + 3, -1, -2**33] + rng.integers(0, 2**62, 20).tolist()
    for i, seed in enumerate(seeds):
        joined = "\x1f".join(str(k) for k in ("kubelet", f"p-{i}", i % 3, "start", round(12.5 * i, 3)))
        got, want = util._rng_of(seed, joined), util._rng_of_plain(seed, joined)
        assert got.bit_generator.state == want.bit_generator.state
        assert got.uniform(0.8, 1.2, 4).tolist() == want.uniform(0.8, 1.2, 4).tolist()
