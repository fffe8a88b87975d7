"""Shared fixtures for the tool tests."""

from __future__ import annotations

import pytest
from tool_doubles import ALERTS, OB, History, Recorder

from sremarathon_env.tools import ToolContext, ToolRuntime


@pytest.fixture
def rec():
    return Recorder()


@pytest.fixture
def rt(rec):
    return ToolRuntime(ToolContext(backend=rec, app=OB, alerts=History(ALERTS), now=360.0))


@pytest.fixture
def fuzz_runtime():
    """The fuzz runs against the real twin at t = 60 s (reads there are cheap)."""
    return twin_runtime(60.0)


def twin_runtime(t: float = 600.0, effects=(), seed: int = 3) -> ToolRuntime:
    """A runtime over the real twin, its alert engine and PromQL engine, advanced to ``t``."""
    from sremarathon_env.alerts import AlertEngine, PromQLEngine
    from sremarathon_env.backends.sim import SimBackend

    sim = SimBackend("online-boutique", seed=seed)
    for e in effects:
        sim.apply_effect(e)
    alerts = AlertEngine(None, sim.store)
    sim.advance_to(t)
    alerts.evaluate_until(t)
    ctx = ToolContext(backend=sim, app=sim.app, alerts=alerts, promql=PromQLEngine(sim.store), now=t)
    return ToolRuntime(ctx)


def advance(rt: ToolRuntime, t: float) -> None:
    """What the run loop does between invocations: run the twin, evaluate alerts, new invocation."""
    rt.ctx.backend.advance_to(t)
    rt.ctx.alerts.evaluate_until(t)
    rt.begin_invocation(t)
