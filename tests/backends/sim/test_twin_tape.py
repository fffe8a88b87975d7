"""A metric-less twin's deferred span (the run loop's no-action reference run) keeps its traffic outputs
on a tape; a twin of the same app, seed and load whose ticks have the very same task rates and inputs
takes them instead of stepping the traffic model, and while its state-changing calls equal the taped
run's (so its state does) it takes the effects' resolution and traffic inputs of its state refreshes
too. Its numbers are bit-identical to computing them, also after it stops following the taped run (an
intervention the reference run does not make)."""

import numpy as np

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import backend as backend_mod
from sremarathon_env.backends.sim import metrics as metrics_mod
from sremarathon_env.backends.sim.traffic import TrafficModel, window
from tests.backends.sim.twins import assert_same_twins

EVENTS = {
    8: lambda s: s.apply_effect(Effect(kind="latency", service="cartservice", ms=120.0)),
    14: lambda s: s.deploy("frontend", message="m", author="a", image_tag="v9.9.9"),
    20: lambda s: s.apply_effect(Effect(kind="memory_hog", service="adservice", mi=10_000)),
}
DIVERGE = 32   # the scored twin alone: scaled at this tick


def _reference(seed: int):
    sim = SimBackend("online-boutique", seed=seed, metrics=False)
    sim.begin_deferred()
    for k in range(2, 62, 2):
        sim.advance_to(k * 15.0)
        if k in EVENTS:
            EVENTS[k](sim)
    return sim, sim.end_deferred()


def _epochs(sim) -> list:
    return [(e.ready_svc.tolist(), e.ready_rev.tolist(), sorted(e.active_effects), sorted(e.pods_on_node.items()))
            for e in sim.history.epochs]


def _scored(monkeypatch, seed: int, builds: list | None = None, incs: list | None = None):
    steps = [0]
    orig = TrafficModel.step
    orig_build = SimBackend._build_inputs
    orig_incs = metrics_mod.traffic_increments

    def step(self, *a):
        steps[0] += 1
        return orig(self, *a)

    def increments(*a):
        if incs is not None:
            incs.append(1)
        return orig_incs(*a)

    def build(self, *a):
        if builds is not None:
            builds.append(self._tick)
        return orig_build(self, *a)

    with monkeypatch.context() as mp:
        mp.setattr(TrafficModel, "step", step)
        mp.setattr(SimBackend, "_build_inputs", build)
        mp.setattr(metrics_mod, "traffic_increments", increments)
        sim = SimBackend("online-boutique", seed=seed)
        evidence = []
        for k in range(2, 62, 2):
            evidence += sim.advance_to(k * 15.0)
            sim.store.complete()   # the metric writes each advance leaves pending (their increments counted here)
            if k in EVENTS:
                EVENTS[k](sim)
            if k == DIVERGE:
                sim.scale("frontend", 4)
    return sim, evidence, steps[0]


def test_a_twin_that_follows_a_taped_run_takes_its_outputs(monkeypatch):
    backend_mod._TAPES.clear()
    builds_b, builds_a, incs_b, incs_a = [], [], [], []
    b, ev_b, steps_b = _scored(monkeypatch, seed=6, builds=builds_b, incs=incs_b)   # no tape: every advance steps
    ref_sim, ref = _reference(seed=6)
    assert len(backend_mod._TAPES) == 1
    a, ev_a, steps_a = _scored(monkeypatch, seed=6, builds=builds_a, incs=incs_a)
    assert 0 < steps_a < steps_b / 2, (steps_a, steps_b)   # taped up to the divergence, stepped after
    assert len(incs_b) > steps_b - 2 and 0 < len(incs_a) <= steps_a + 1   # counter increments taped too
    # inputs built: once at construction (before the reference span), then only after the divergence
    assert builds_a[0] == 0 and all(k >= DIVERGE for k in builds_a[1:]) and len(builds_a) > 1
    assert len([k for k in builds_b if k < DIVERGE]) >= 4   # the untaped twin builds at every change
    assert ev_a == ev_b and ev_a[:DIVERGE - 1] == ref[:DIVERGE - 1] and ev_a[DIVERGE + 4:] != ref[DIVERGE + 4:]
    n = a.history.n
    for name in ("node", "edge", "path", "svc"):
        assert np.array_equal(getattr(a.history, name)[:, :n], getattr(b.history, name)[:, :n]), name
    for name in ("ready", "reason", "epoch_of"):
        assert np.array_equal(getattr(a.history, name)[:n], getattr(b.history, name)[:n]), name
    assert _epochs(a) == _epochs(b)
    shared = {id(e) for e in ref_sim.history.epochs}
    assert sum(id(e) in shared for e in a.history.epochs) > 5     # snapshots taken from the reference run
    assert a.store.names() == b.store.names()
    for name in a.store.names():
        for fa, fb in zip(a.store.families(name), b.store.families(name), strict=True):
            assert fa._label_values == fb._label_values, name
            assert np.array_equal(fa.values(a.store.n_ticks), fb.values(b.store.n_ticks), equal_nan=True), name
    # another seed's twin finds no tape of its own and steps every advance
    _, _, steps_c = _scored(monkeypatch, seed=7)
    assert steps_c > steps_a


def test_tapes_are_bounded_and_replaced_per_key():
    backend_mod._TAPES.clear()
    for seed in range(backend_mod.MAX_TAPES + 2):
        sim = SimBackend("online-boutique", seed=seed, metrics=False)
        sim.begin_deferred()
        sim.advance_to(60.0)
        sim.end_deferred()
    assert len(backend_mod._TAPES) == backend_mod.MAX_TAPES
    assert sorted(k[2] for k in backend_mod._TAPES) == list(range(2, backend_mod.MAX_TAPES + 2))
    sim = SimBackend("online-boutique", seed=3, metrics=False)
    sim.begin_deferred()
    assert backend_mod._TAPES[sim._tape_key()].ticks == {}   # a new span starts a new tape for its key
    sim.advance_to(30.0)
    sim.end_deferred()
    assert sorted(backend_mod._TAPES[sim._tape_key()].ticks) == [1, 2]
    backend_mod._TAPES.clear()


def test_equal_calls_mean_equal_state_and_a_different_call_a_different_fingerprint():
    a, b, c = (SimBackend("online-boutique", seed=2, metrics=m) for m in (True, False, True))
    for s in (a, b, c):
        s.advance_to(45.0)
        s.apply_effect(Effect(kind="latency", service="cartservice", ms=50.0))
    a.advance_to(150.0)
    b.advance_to(60.0)
    b.advance_to(150.0)          # advances cut differently, no metrics: same state
    c.advance_to(150.0)
    c.scale("frontend", 2)
    assert a._calls == b._calls != c._calls and a._calls != b""
    assert a.state_digest() == b.state_digest()
    d = SimBackend("online-boutique", seed=2)
    d.advance_to(60.0)           # the same effect one tick later: another history, another fingerprint
    d.apply_effect(Effect(kind="latency", service="cartservice", ms=50.0))
    d.advance_to(150.0)
    assert d._calls != a._calls


def test_counter_increments_of_a_window_are_the_window_of_a_batchs():
    sim = SimBackend("online-boutique", seed=1)
    sim.advance_to(60.0)
    out = sim.tm.step(sim._task_rates(5, 9), sim.inputs)
    me, mask = metrics_mod.mesh_layout(sim.m)
    uh = np.zeros((9, sim.m.E))
    uh[4:, 3] = 1.0
    whole = metrics_mod.traffic_increments(me, mask, out, uh, 15.0)
    part = metrics_mod.traffic_increments(me, mask, window(out, 3, 7), uh[3:7], 15.0)
    for name in ("req", "bucket", "lat_sum", "count", "lg", "lg_slow", "lg_deg"):
        assert np.array_equal(getattr(whole.window(3, 7), name), getattr(part, name)), name


def test_a_following_twin_takes_the_runs_cluster_side_numbers_queue_lag_included(monkeypatch):
    """Astronomy Shop has queue (async) edges: the consumer lag carried from taped runs goes on exactly."""
    monkeypatch.setattr(backend_mod, "_TAPES", {})
    hits = []
    kept = [0]
    orig = backend_mod._Tape.take_run

    def take_run_plain(tape, k0, K, calls, sl, dt):   # the definition: the flow slots compared at every take
        run = tape.runs.get(k0)
        if run is None:
            return None
        r0, calls_r, sl_r, dt_r, ppr, mem, lag, state = run
        a = k0 - r0
        if calls_r != calls or dt_r != dt or a + K > len(mem) or not np.array_equal(sl_r, sl):
            return None
        return ppr[a:a + K], mem[a:a + K], lag[a:a + K], None if state is None else state[a:a + K]

    def take_run(self, *a):
        want = take_run_plain(self, *a)
        run = self.runs.get(a[0])
        kept[0] += run is not None and self._same_slots[0] is run[2] and self._same_slots[1] is a[3]   # (found before)
        got = orig(self, *a)
        hits.append(got is not None)
        assert (got is None) == (want is None)
        if got is not None:
            assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(got, want))
        return got

    def scored():
        sim = SimBackend("astronomy-shop", seed=4)
        for k in range(3, 90, 3):
            sim.advance_to(k * 15.0)
            if k == 30:
                sim.apply_effect(Effect(kind="consumer_slow", service="accounting", factor=4.0))
            if k == 60:
                sim.scale("frontend", 3)   # the reference run does not: the follower goes its own way
        return sim

    b = scored()
    ref = SimBackend("astronomy-shop", seed=4, metrics=False)
    ref.begin_deferred()
    for k in range(10, 90, 10):
        ref.advance_to(k * 15.0)
        if k == 30:
            ref.apply_effect(Effect(kind="consumer_slow", service="accounting", factor=4.0))
    ref.end_deferred()
    monkeypatch.setattr(backend_mod._Tape, "take_run", take_run)
    a = scored()
    assert sum(hits) > 10 and not all(hits) and kept[0] > 5
    assert len(a._lag) and a._lag.tolist() == b._lag.tolist() and a._lag.any()
    n = a.history.n
    assert np.array_equal(a.history.svc[:, :n], b.history.svc[:, :n])
    fa, fb = a.writer.lag, b.writer.lag
    assert np.array_equal(fa.values(a.store.n_ticks), fb.values(b.store.n_ticks), equal_nan=True)
    for fam in ("container_memory_working_set_bytes", "container_cpu_usage_seconds_total"):
        ga, gb = a.store.families(fam)[0], b.store.families(fam)[0]
        assert np.array_equal(ga.values(a.store.n_ticks), gb.values(b.store.n_ticks), equal_nan=True), fam


def test_the_call_fingerprint_sees_every_argument():
    long_a, long_b = "x" * 500 + "a", "x" * 500 + "b"
    fps = set()
    for files, ms in (({"main.go": long_a}, 50.0), ({"main.go": long_b}, 50.0), ({"main.go": long_a}, 51.0)):
        sim = SimBackend("online-boutique", seed=1, metrics=False)
        sim.apply_effect(Effect(kind="latency", service="cartservice", ms=ms))
        sim.deploy("frontend", message="m", author="a", files=files)
        fps.add(sim._calls)
    assert len(fps) == 3
    assert backend_mod._fp_part(long_a) != backend_mod._fp_part(long_b)


def test_the_call_fingerprint_parts_equal_their_definition():
    """`_fp_part` (plain numbers and short texts taken at once, exact types first) gives `_fp_part_plain`'s values
    for nested calls of every kind: subclasses of str, int, float, tuple and dict, models, long and short texts."""
    import collections
    import enum
    import random

    class Kind(str, enum.Enum):
        A = "a"

    class Level(enum.IntEnum):
        LOW = 1

    Pair = collections.namedtuple("Pair", "a b")

    class Mapping(dict):
        pass

    rnd = random.Random(3)
    leaves = [None, True, False, 0, -7, 2**70, 1.5, float("nan"), -0.0, np.float64(2.5), np.int64(3), "", "short",
              "y" * 200, "y" * 201, "z" * 5000, Kind.A, Level.LOW, b"bytes",
              Effect(kind="latency", service="cartservice", ms=50.0), Effect(kind="node_down", node="n-1")]

    def draw(depth):
        r = rnd.random()
        if depth > 3 or r < 0.4:
            return rnd.choice(leaves)
        n = rnd.randint(0, 4)
        kind = rnd.choice(("list", "tuple", "dict", "pair", "mapping"))
        if kind == "pair":
            return Pair(draw(depth + 1), draw(depth + 1))
        if kind in ("dict", "mapping"):
            d = {f"k{i}": draw(depth + 1) for i in range(n)}
            return Mapping(d) if kind == "mapping" else d
        items = [draw(depth + 1) for _ in range(n)]
        return items if kind == "list" else tuple(items)

    for _ in range(2000):
        call = ("call",) + tuple(draw(0) for _ in range(rnd.randint(0, 6)))
        assert repr(backend_mod._fp_part(call)) == repr(backend_mod._fp_part_plain(call))
        assert backend_mod._fp_part(call[1:]) == backend_mod._fp_part_plain(call[1:]) or \
            repr(call).count("nan")   # (NaN is unequal to itself: the reprs above hold)


def test_a_follower_keeps_its_tape_until_it_diverges(monkeypatch):
    monkeypatch.setattr(backend_mod, "_TAPES", {})
    ref_sim, ref = _reference(seed=8)
    tape = ref_sim._tape_key()
    sim = SimBackend("online-boutique", seed=8)
    ev = sim.advance_to(30.0) + sim.advance_to(60.0)   # runs within the reference run's: taken
    assert sim._follow is backend_mod._TAPES[tape]
    backend_mod._TAPES.clear()                  # evicted (other runs' tapes): the follower still has it
    steps = [0]
    orig = TrafficModel.step

    def step(self, *a):
        steps[0] += 1
        return orig(self, *a)

    monkeypatch.setattr(TrafficModel, "step", step)
    for k in range(5, 8):
        ev += sim.advance_to(k * 15.0)
        if k in EVENTS:
            EVENTS[k](sim)
    assert steps[0] == 0 and ev == ref[:7] and sim._follow is not None
    sim.advance_to(8 * 15.0)
    EVENTS[8](sim)
    sim.scale("frontend", 5)                     # the reference run does not: another history
    sim.advance_to(14 * 15.0)
    assert sim._follow is None and steps[0] > 0


def test_a_tapes_counter_increments_are_made_on_the_first_take(monkeypatch):
    """A reference run nobody follows makes no counter increments; a follower's first take of a chunk
    makes them for the whole chunk (what the chunk's own step would have made), later takes reuse them."""
    monkeypatch.setattr(backend_mod, "_TAPES", {})
    made = []
    orig = backend_mod.traffic_increments

    def increments(*a):
        made.append(a[2].edge_rate.shape[0])
        return orig(*a)

    monkeypatch.setattr(backend_mod, "traffic_increments", increments)
    _reference(seed=5)
    assert made == []
    tape = next(iter(backend_mod._TAPES.values()))
    chunks = {id(c): c for c in tape.ticks.values()}
    assert all(c[6] is None for c in chunks.values())
    sim = SimBackend("online-boutique", seed=5)
    for k in range(2, 62, 2):
        sim.advance_to(k * 15.0)
        if k in EVENTS:
            EVENTS[k](sim)
    assert 0 < len(made) <= len(chunks)
    taken = [c for c in chunks.values() if c[6] is not None]
    assert [len(c[3]) for c in taken] == made   # each for its whole chunk, once
    for c in taken:
        want = orig(*metrics_mod.mesh_layout(sim.m), c[1], c[7], c[4])
        for name in ("req", "bucket", "lat_sum", "count", "lg", "lg_slow", "lg_deg"):
            assert np.array_equal(getattr(c[6], name), getattr(want, name)), name


def test_an_effect_that_ends_with_its_pods_is_noted_at_its_tick_however_advances_are_cut(monkeypatch):
    """An ``until_restart`` effect ends inside `advance_to`, at the state refresh that finds its pods gone:
    its note carries that tick's time, not where the advance began, so a twin cut into other advances
    (the scored twin steps every 2 ticks, the reference run every 6) keeps the reference run's fingerprint
    and goes on taking its taped refreshes; its numbers are those of a twin without any tape."""
    monkeypatch.setattr(backend_mod, "_TAPES", {})
    builds = []
    orig_build = SimBackend._build_inputs

    def run(sim, every):
        for k in range(every, 61, every):
            sim.advance_to(k * 15.0)
            if k == 6:
                sim.scale("cartservice", 6)
            if k == 18:
                sim.apply_effect(Effect(kind="latency", service="cartservice", ms=80.0, until_restart=True))
            if k == 24:   # the rollout replaces its last old pod at tick 26 (inside a 6-tick advance)
                sim.restart("cartservice")
        return sim

    untaped = run(SimBackend("online-boutique", seed=3), 2)
    ref = SimBackend("online-boutique", seed=3, metrics=False)
    ref.begin_deferred()
    run(ref, 6)
    ref.end_deferred()

    def build(self, *a):
        builds.append(self._tick)
        return orig_build(self, *a)

    monkeypatch.setattr(SimBackend, "_build_inputs", build)
    scored = run(SimBackend("online-boutique", seed=3), 2)
    for sim in (untaped, ref, scored):   # the effect ended on its own (its pods were replaced)
        assert sim.book.removed == {"eff-0001"} and not sim.book.effects
    assert scored._calls == ref._calls == untaped._calls
    assert scored.state_digest() == untaped.state_digest()
    assert builds == [0] and scored._follow is not None   # every later refresh taken from the tape
    assert_same_twins(scored, untaped)


def test_a_chunks_service_sums_and_evidence_records_of_a_window_are_the_windows_own():
    """A follower takes a window of a taped chunk's per-service edge sums and entry evidence records (made
    once per chunk): each equals what the window's own outputs give, bit for bit."""
    sim = SimBackend("online-boutique", seed=1)
    sim.advance_to(60.0)
    out = sim.tm.step(sim._task_rates(5, 9), sim.inputs)
    ev = sim._evidence_arrays(out, 15.0)
    chunk = [5, out, None, None, 15.0, ev, None, None, None, None]
    for a, j in ((0, 9), (3, 7), (8, 9), (0, 1)):
        got = backend_mod._Tape.into(chunk, a, j, sim._into_of)
        assert np.array_equal(got, sim._into_of(window(out, a, j)))
        recs = backend_mod._Tape.records(chunk, a, j, sim._evidence_of)
        assert recs == sim._evidence_of(5 + a, sim._evidence_arrays(window(out, a, j), 15.0))
    assert chunk[8].shape == (9, 6, sim.m.S) and len(chunk[9]) == 9   # made once, for the whole chunk


def test_a_followers_steps_end_where_taped_chunks_end(monkeypatch):
    """A follower's deferred traffic steps (`SimBackend._settle`) end where the taped run's chunks end: spans that
    begin elsewhere than the reference's (whose chunks they would straddle) are all taken from the tape, no tick
    stepped afresh, and the numbers are those of a twin without a tape."""
    monkeypatch.setattr(backend_mod, "DEFER_CHUNK", 5)   # reference chunks of whole 2-tick runs: ticks 1-6, 7-12, ...
    steps = [0]
    orig = TrafficModel.step

    def step(self, *a):
        steps[0] += 1
        return orig(self, *a)

    def scored():
        sim = SimBackend("online-boutique", seed=6)
        steps[0] = 0   # (the warm tick, before any span, is not taped)
        evidence = []
        sim.begin_deferred()
        for k in range(2, 62, 2):
            sim.advance_to(k * 15.0)
            if k in EVENTS:
                EVENTS[k](sim)
            if k in (8, 26):   # spans of ticks 1-8, 9-26, 27-60: steps from ticks 9 and 27 would straddle chunks
                evidence += sim.end_deferred()
                sim.begin_deferred()
        evidence += sim.end_deferred()
        sim.store.complete()
        return sim, evidence, steps[0]

    monkeypatch.setattr(TrafficModel, "step", step)
    backend_mod._TAPES.clear()
    b, ev_b, steps_b = scored()   # no tape: every step computed
    _, ref = _reference(seed=6)
    a, ev_a, steps_a = scored()
    backend_mod._TAPES.clear()
    assert steps_b > 6 and steps_a == 0, (steps_a, steps_b)
    assert ev_a == ev_b and ev_a == ref
    assert _epochs(a) == _epochs(b)
    for name in a.store.names():
        for fa, fb in zip(a.store.families(name), b.store.families(name), strict=True):
            assert fa._label_values == fb._label_values, name
            assert np.array_equal(fa.values(a.store.n_ticks), fb.values(b.store.n_ticks), equal_nan=True), name
