"""A twin is freed by reference counting: its cluster's hooks and its metric writer point back at it weakly
(`SimBackend._bind`) and a cluster empties its ReplicaSets' pod lists as it goes (`Cluster.__del__`), so a dropped twin
is gone at once, without the cyclic garbage collector. A clone's hooks and writer point at the clone: it runs on alone
after its original is dropped, exactly like a twin that was never cloned."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from sremarathon_env.backends.sim import SimBackend
from tests.backends.sim.test_twin_blocks import OPS
from tests.backends.sim.twins import assert_same_twins
from tests.collector import collector_off


@pytest.fixture
def no_gc():
    """The cyclic collector off for the test (restored after): what is freed is freed by reference counting."""
    with collector_off():
        yield


def _advance(sim: SimBackend, k0: int, k1: int) -> None:
    """Ticks ``k0+1 .. k1``, with `OPS` (a rollout, OOM kills, a crash loop, a drained node, scaling) on their ticks."""
    for k in range(k0 + 1, k1 + 1):
        sim.advance_to(k * 15.0)
        if k in OPS:
            OPS[k](sim)


@pytest.mark.parametrize("metrics", [True, False])
def test_dropped_twin_leaves_no_garbage(no_gc, metrics):
    again = SimBackend("online-boutique", seed=7, metrics=metrics)   # first: process caches made once are not garbage
    _advance(again, 0, 120)
    gc.collect()
    sim = SimBackend("online-boutique", seed=7, metrics=metrics)
    _advance(sim, 0, 120)
    c = sim.cluster
    assert any(p.restarts for p in c.pods) and len(c.rs_by_id) > len(c.deployments), "no crash/rollout: vacuous"
    pod = next(p for rs in c.rs_by_id for p in rs.pods)
    refs = [weakref.ref(x) for x in (sim, c, sim.writer, pod, pod.rs, c.rs_by_id[0])]
    store = sim.store   # a store kept past its twin completes the writes the twin left pending
    assert (store._pending[0] is not None) == metrics
    del sim, c, pod
    kept = {name: [f.values(store.n_ticks) for f in store.families(name)] for name in store.names()}
    assert [r() for r in refs] == [None] * len(refs)
    del store
    assert gc.collect() == 0
    assert kept.keys() == set(again.store.names()) and (len(kept) > 20) == metrics
    for name, values in kept.items():
        for a, b in zip(values, [f.values(again.store.n_ticks) for f in again.store.families(name)], strict=True):
            assert np.array_equal(a, b, equal_nan=True), name


def test_clone_runs_on_alone(no_gc):
    sim = SimBackend("online-boutique", seed=7)
    _advance(sim, 0, 50)
    twin = sim.clone()
    gone = weakref.ref(sim)
    del sim
    assert gone() is None   # the clone holds nothing of its original
    _advance(twin, 50, 140)   # pods created and crash-looping after the clone: the hooks are called on the clone
    assert twin.writer.sim is twin and twin.cluster.taped() is None
    again = SimBackend("online-boutique", seed=7)
    _advance(again, 0, 140)
    assert again.state_digest() == twin.state_digest()
    assert_same_twins(again, twin)


def test_hooks_of_a_dropped_twin_say_so():
    sim = SimBackend("online-boutique", seed=7, metrics=False)
    c, w = sim.cluster, sim.writer
    del sim
    gc.collect()
    with pytest.raises(ReferenceError):
        c.image_ok("frontend", "v1")
    with pytest.raises(ReferenceError):
        w.flow_slots_now()
