"""A tick's numbers do not depend on how the twin's ticks are grouped into blocks: advancing one tick
at a time or in uneven chunks gives bit-identical evidence, history, health reads and metric series,
through rollouts, OOM kills, crash loops, a leak, a drained node and scaling."""

import numpy as np

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend

OPS = {
    10: lambda s: s.apply_effect(Effect(kind="memory_leak", service="cartservice", mi_per_min=40.0)),
    18: lambda s: s.deploy("frontend", message="m", author="a", image_tag="v9.9.9"),
    30: lambda s: s.apply_effect(Effect(kind="memory_hog", service="adservice", mi=10_000)),
    45: lambda s: s.apply_effect(Effect(kind="crash", service="emailservice", reason="Error", exit_code=1)),
    61: lambda s: s.apply_effect(Effect(kind="latency", service="productcatalogservice", ms=300)),
    75: lambda s: s.drain_node(s.app.topology.nodes[1].name),
    90: lambda s: s.scale("recommendationservice", 4),
    100: lambda s: s.set_resources("cartservice", mem_limit_mi=96),
}


def _run(chunks: list[int], metrics: bool = True):
    sim = SimBackend("online-boutique", seed=7, metrics=metrics)
    evidence, health, k = [], [], 0
    stops = sorted(OPS)
    while k < 140:
        nxt = min([s for s in stops if s > k] + [140])
        step = min(chunks[len(evidence) % len(chunks)], nxt - k)
        k += step
        evidence += sim.advance_to(k * 15.0)
        health.append((k, sim.services_health(list(sim.app.service_names), ("error_ratio", "p95_ms", "cpu_util",
                                                                           "mem_util", "ready", "restarts"))))
        if k in OPS:
            OPS[k](sim)
    return sim, evidence, health


def _series(sim):
    out = {}
    for name in sim.store.names():
        for i, fam in enumerate(sim.store.families(name)):
            out[(name, i)] = ([fam.label_values(r) for r in range(len(fam))], fam.values(sim.store.n_ticks))
    return out


def test_block_grouping_does_not_change_any_number():
    a, ev_a, h_a = _run([1])
    b, ev_b, h_b = _run([7, 13, 3, 32, 2, 9])
    assert ev_a == ev_b
    assert sum(a.pod_ooms.values()) > 0 and any(p.restarts for p in a.cluster.pods), "no OOM/crash: test is vacuous"
    for name in ("node", "edge", "path", "svc", "ready", "reason"):
        assert np.array_equal(getattr(a.history, name)[..., :141, :] if getattr(a.history, name).ndim == 3
                              else getattr(a.history, name)[:141],
                              getattr(b.history, name)[..., :141, :] if getattr(b.history, name).ndim == 3
                              else getattr(b.history, name)[:141]), name
    # health reads at the ticks both runs stopped at
    hb = dict(h_b)
    common = [(k, v) for k, v in h_a if k in hb]
    assert len(common) >= len(OPS)
    for k, v in common:
        assert np.array_equal(v, hb[k], equal_nan=True), k
    sa, sb = _series(a), _series(b)
    assert sa.keys() == sb.keys()
    for key in sa:
        assert sa[key][0] == sb[key][0], key
        assert np.array_equal(sa[key][1], sb[key][1], equal_nan=True), key
    assert a.state_digest() == b.state_digest()


def test_block_grouping_without_metrics_matches_the_metric_twin():
    a, ev_a, _ = _run([1], metrics=False)
    b, ev_b, _ = _run([32], metrics=True)
    assert ev_a == ev_b
    assert np.array_equal(a.history.svc[:, :141], b.history.svc[:, :141])
