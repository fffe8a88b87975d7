"""The twin looks for crash effects in a list of the book's crash effects kept per book version (`_crash_list`),
not in every effect at each container start and state refresh: the same crash plans as looking through the whole
book (`_crash_plan_plain`), as effects of every binding come and go."""

from __future__ import annotations

from faults.effects import Effect, Marker
from sremarathon_env.backends.sim import SimBackend


def _check(sim: SimBackend) -> int:
    """Every live pod's crash plan now equals the definition's; the list holds the book's crash effects by handle;
    the crash effects in force are the definition's. Returns how many pods would crash."""
    t = sim.now
    assert sim._crash_list() == [(h, e) for h, e in sorted(sim.book.effects.items()) if e.kind == "crash"]
    crashing = 0
    for pod in sim.cluster.active_pods():
        got = sim._crash_plan(pod, t)
        assert got == sim._crash_plan_plain(pod, t), pod.name
        crashing += got is not None
    on = {h for h, e in sim.book.effects.items() if e.kind == "crash" and sim._effect_on(h, e)}
    assert {h for h, e in sim._crash_list() if sim._effect_on(h, e)} == on
    return crashing


def test_crash_plans_follow_the_book_as_effects_come_and_go(ob):
    sim = SimBackend(ob, seed=4, metrics=False)
    steps = [
        lambda: sim.apply_effect(Effect(kind="latency", service="cartservice", ms=50.0)),
        lambda: sim.apply_effect(Effect(kind="crash", service="emailservice", exit_code=3, log_signature="boom")),
        lambda: sim.apply_effect(Effect(kind="crash", service="adservice", reason="OOMKilled", exit_code=137)),
        lambda: sim.deploy("currencyservice", message="m", author="a", env={"X_NEW": "1"},
                           effects=[Effect(kind="crash", service="currencyservice", bind="revision",
                                           marker=Marker(env_equals=("X_NEW", "1")))]),
        lambda: sim.remove_effect(handles[1]),
        lambda: sim.apply_effect(Effect(kind="error_rate", service="frontend", rate=0.1)),
        lambda: sim.remove_effect(handles[2]),
        lambda: sim.deploy("currencyservice", message="m2", author="a", env={"X_NEW": None}),
        lambda: sim.apply_effect(Effect(kind="crash", service="emailservice", exit_code=4)),
    ]
    handles: list = []
    seen = 0
    t = 0.0
    for step in steps:
        t += 60.0
        sim.advance_to(t)
        out = step()
        handles.append(out if isinstance(out, str) else None)
        seen += _check(sim)
        sim.advance_to(t + 30.0)
        seen += _check(sim)
    assert seen > 5                                   # crash plans were made (the comparison is not vacuous)
    assert sim.book.version == 8 and sum(p.restarts for p in sim.cluster.pods) > 3


def test_the_book_version_moves_with_every_change():
    from sremarathon_env.backends.sim.faulthook import EffectBook

    b = EffectBook()
    h = b.add(Effect(kind="crash", service="x"), 0.0)
    assert b.version == 1
    assert b.remove("eff-9999") is None and b.version == 1   # nothing removed: no change
    b.remove(h)
    assert b.version == 2 and b.remove(h) is None and b.version == 2


def test_a_refresh_that_keeps_the_resolution_has_no_effect_to_see(ob, monkeypatch):
    """`SimBackend._effects_seen` (crash effects newly in force, the log-signature timeline) runs only at refreshes
    with a new resolution: after every refresh, the crash effects in force are the ones it last saw and the open
    signatures are the resolution's, through effects of every binding coming and going, crashes and rollouts."""
    seen = {"refreshes": 0, "kept": 0}
    refresh = SimBackend._refresh

    def checked(self, T, tick):
        kept = getattr(self, "res", None)   # (none before the first refresh)
        refresh(self, T, tick)
        assert {h for h, e in self._crash_list() if self._effect_on(h, e)} == self._crash_handles
        if self.records:
            assert set(self._sig_open) == {(s, x) for s, lines in self.res.signatures.items() for x in lines}
        seen["refreshes"] += 1
        seen["kept"] += self.res is kept

    monkeypatch.setattr(SimBackend, "_refresh", checked)
    test_crash_plans_follow_the_book_as_effects_come_and_go(ob)
    from baselines.runner import run_marathon
    run_marathon("online-boutique", 5, "random", injection_s=1200, observation_s=300)
    assert seen["refreshes"] > 100 and 20 < seen["kept"] < seen["refreshes"]
