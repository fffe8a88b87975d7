"""One `advance_to` runs the cluster block by block but computes the traffic of all its blocks in one
step (`SimBackend._settle`): the store, history and evidence are bit-identical to stepping each block
on its own, and a mesh response-code series that first reaches half a request in a later run of one
write starts at that run's first tick, as it does when the runs are written one by one."""

import numpy as np

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim import backend as backend_mod
from sremarathon_env.backends.sim.traffic import TrafficModel, window
from tests.backends.sim.twins import assert_same_twins

OPS = {
    6: lambda s: s.apply_effect(Effect(kind="memory_hog", service="cartservice", mi=10_000)),
    12: lambda s: s.deploy("frontend", message="m", author="a", image_tag="v9.9.9"),
    18: lambda s: s.apply_effect(Effect(kind="crash", service="emailservice", reason="Error", exit_code=1)),
    30: lambda s: s.drain_node(s.app.topology.nodes[1].name),
    42: lambda s: s.apply_effect(Effect(kind="edge_error", caller="frontend", callee="adservice", rate=0.3)),
    48: lambda s: s.restart("checkoutservice"),
    60: lambda s: s.scale("recommendationservice", 4),
}


def _run(monkeypatch, chunk: int):
    steps = [0, 0]   # traffic steps, blocks
    orig_step, orig_block = TrafficModel.step, backend_mod.SimBackend._run_block

    def step(self, *a):
        steps[0] += 1
        return orig_step(self, *a)

    def block(self, *a):
        steps[1] += 1
        return orig_block(self, *a)

    with monkeypatch.context() as mp:
        mp.setattr(backend_mod, "DEFER_CHUNK", chunk)
        mp.setattr(backend_mod, "_TAPES", {})   # no reference run's outputs to take: every window steps
        mp.setattr(TrafficModel, "step", step)
        mp.setattr(backend_mod.SimBackend, "_run_block", block)
        sim = SimBackend("online-boutique", seed=9)
        evidence = []
        for k in range(6, 96, 6):   # six ticks per advance: several blocks each while pods churn
            evidence += sim.advance_to(k * 15.0)
            if k in OPS:
                OPS[k](sim)
    return sim, evidence, steps


def test_one_traffic_step_per_advance_gives_the_per_block_numbers(monkeypatch):
    a, ev_a, (steps_a, blocks_a) = _run(monkeypatch, chunk=64)
    b, ev_b, (steps_b, blocks_b) = _run(monkeypatch, chunk=1)   # every block its own traffic step
    assert blocks_a == blocks_b and steps_b == blocks_b and steps_a < blocks_a - 10, (steps_a, blocks_a)
    assert ev_a == ev_b and all(e is not None for e in ev_a)
    assert sum(a.pod_ooms.values()) > 0
    assert_same_twins(a, b)


def test_a_series_first_counted_in_a_later_run_starts_at_that_run():
    a, b = SimBackend("online-boutique", seed=4), SimBackend("online-boutique", seed=4)
    for s in (a, b):
        s.advance_to(60.0)
    k0 = a._tick + 1
    out = a.tm.step(a._task_rates(k0, 5), a.inputs)
    w = a.writer
    i = 2
    e = int(w.mesh_edges[i])
    out.edge_unreach = out.edge_unreach.copy()
    out.edge_unreach[:, e] = 0.012   # 0.18 unreachable calls a tick
    uh = np.zeros((5, a.m.E))
    uh[2:, e] = 1.0                  # no endpoints from the second run on: 503 UF, then 503 UH
    assert not w.req_on[i, 1] and not w.req_on[i, 2]
    for s in (a, b):
        s.store.set_n_ticks(k0 + 5)
    a.writer.write_traffic(k0, 5, 15.0, out, uh, [(0, 2), (2, 5)])
    b.writer.write_traffic(k0, 2, 15.0, window(out, 0, 2), uh[0])
    b.writer.write_traffic(k0 + 2, 3, 15.0, window(out, 2, 5), uh[2])
    fa, fb = a.writer.req, b.writer.req
    assert fa._label_values == fb._label_values
    assert np.array_equal(fa.values(k0 + 5), fb.values(k0 + 5), equal_nan=True)
    assert w.req_on[i, 1] and not w.req_on[i, 2]   # UH reached 0.54 in the second run, UF stayed at 0.36
    uh_row = w.req_rows[list(w.req_flat).index(i * w.req_on.shape[1] + 1)]
    got = fa._data[uh_row, k0:k0 + 5]
    assert np.isnan(got[:2]).all() and np.allclose(got[2:], [0.18, 0.36, 0.54])
