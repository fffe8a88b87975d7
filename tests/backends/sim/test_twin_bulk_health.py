"""`services_health` (the bulk live read) equals the per-service `service_health` reads bit for bit."""

import numpy as np

from faults.effects import Effect
from sremarathon_env.backends.sim import SimBackend

FIELDS = ("error_ratio", "p95_ms", "cpu_util", "mem_util", "ready", "desired", "restarts", "rate",
          "own_error_ratio", "own_p95_ms", "lag", "no_such_field")


def _per_service(sim: SimBackend, services, fields) -> np.ndarray:
    return np.array([[float((sim.service_health(s) or {}).get(f, 0.0)) for f in fields] for s in services])


def test_bulk_equals_per_service_reads_through_faults_and_interventions():
    sim = SimBackend("online-boutique", seed=5)
    services = list(sim.app.service_names) + ["no-such-service"]
    sim.advance_to(120)
    checked = 0
    sim.apply_effect(Effect(kind="memory_hog", service="cartservice", mi=40))
    sim.apply_effect(Effect(kind="error_rate", service="productcatalogservice", rate=0.4))
    sim.deploy("frontend", message="m", author="a", image_tag="bad")
    sim.scale("checkoutservice", 0)
    for t in (135, 150, 165, 240, 300, 420):
        sim.advance_to(t)
        bulk = sim.services_health(services, FIELDS)
        assert bulk.dtype == np.float64 and bulk.shape == (len(services), len(FIELDS))
        assert np.array_equal(bulk, _per_service(sim, services, FIELDS), equal_nan=True)
        checked += 1
    sim.restart("cartservice")
    bulk = sim.services_health(services, FIELDS)   # between ticks: interventions since the last tick show
    assert np.array_equal(bulk, _per_service(sim, services, FIELDS), equal_nan=True)
    assert bulk[services.index("checkoutservice"), FIELDS.index("desired")] == 0.0
    assert bulk[-1].tolist() == [0.0] * len(FIELDS) and bulk[:, -1].tolist() == [0.0] * len(services)
    assert checked == 6


def test_bulk_read_of_an_async_consumer_has_lag():
    sim = SimBackend("astronomy-shop", seed=1)
    sim.advance_to(300)
    services = list(sim.app.service_names)
    bulk = sim.services_health(services, ("lag", "error_ratio", "p95_ms"))
    assert np.array_equal(bulk, _per_service(sim, services, ("lag", "error_ratio", "p95_ms")))
    assert sim.services_health([], ("ready",)).shape == (0, 1)


def test_bulk_read_column_by_column_in_model_order_and_any_other():
    """Train-Ticket (64 services): every service in model order (one transposed block), and a shuffled subset
    with a repeat and an unknown name (gathered rows) equal the per-service reads, through faults, an idle
    service (no calls: rate 0), a scale-down to zero and an OOM-killed pod."""
    sim = SimBackend("train-ticket", seed=2)
    names = list(sim.m.svc_names)
    rng = np.random.default_rng(0)
    subset = [names[i] for i in rng.permutation(len(names))[:20]] + [names[3], "no-such-service"]
    sim.advance_to(150)
    sim.apply_effect(Effect(kind="latency", service=names[5], ms=300.0))
    sim.apply_effect(Effect(kind="error_rate", service=names[7], rate=0.6))
    sim.apply_effect(Effect(kind="memory_hog", service=names[9], mi=100_000))
    sim.scale(names[11], 0)
    for t in (165, 180, 300, 480):
        sim.advance_to(t)
        for services in (names, subset):
            bulk = sim.services_health(services, FIELDS)
            assert np.array_equal(bulk, _per_service(sim, services, FIELDS), equal_nan=True)
    h = sim.services_health(names, FIELDS)
    assert (h[:, FIELDS.index("rate")] == 0).any() and (h[:, FIELDS.index("rate")] > 0).any()
    assert h[names.index(names[11]), FIELDS.index("desired")] == 0.0 and h[:, FIELDS.index("restarts")].any()
