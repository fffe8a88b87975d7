"""The bundled app models load, are internally consistent and match the reference facts; malformed
app files give an `AppSpecError` that names the bad field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from apps import APP_NAMES, DATA_DIR, AppSpecError, load_app, parse_app


def _rates(app):
    """Per-service call rates at the default load (flag-gated tasks off)."""
    tasks = app.load.users / (sum(app.load.think_time_s) / 2)
    total = sum(p.weight for p in app.load.paths)
    rates = dict.fromkeys(app.service_names, 0.0)

    def walk(calls, mult):
        for c in calls:
            rates[c.to] += mult * c.count
            walk(c.calls, mult * c.count)

    for p in app.load.paths:
        if p.gated_by_flag:
            continue
        m = tasks * p.weight / total
        rates[app.entry_service] += m * p.requests_per_task
        walk(p.calls, m)
    return rates


@pytest.mark.parametrize("name", APP_NAMES)
def test_bundled_app_loads_and_is_consistent(name):
    app = load_app(name)
    assert app.name == name
    known = set(app.service_names)
    assert app.entry_service in known

    def walk(caller, calls, depth):
        assert depth < 12, "request path too deep (cycle?)"
        for c in calls:
            assert c.to in known
            app.edge(caller, c.to)  # declared
            walk(c.to, c.calls, depth + 1)

    for p in app.load.paths:
        walk(app.entry_service, p.calls, 0)
    # every non-loadgen service is reachable from the entry through edges
    seen, frontier = {app.entry_service}, [app.entry_service]
    while frontier:
        nxt = [c for s in frontier for c in app.callees(s) if c not in seen]
        seen.update(nxt)
        frontier = nxt
    unreachable = sorted(s.name for s in app.services if s.name not in seen and s.role != "loadgen")
    assert unreachable == []


@pytest.mark.parametrize("name", APP_NAMES)
def test_default_load_keeps_services_far_from_cpu_limits(name):
    app = load_app(name)
    rates = _rates(app)
    for s in app.services:
        used_m = rates[s.name] * s.behaviour.cpu_ms_per_call  # ms CPU per s == millicores
        if s.resources.cpu_limit_m:
            assert used_m < 0.3 * s.resources.cpu_limit_m, (s.name, used_m)
        assert s.behaviour.mem_base_mi + rates[s.name] * s.behaviour.mem_per_rps_mi < 0.85 * (
            s.resources.mem_limit_mi or 1e9), s.name
    # every service in a request path sees traffic
    assert rates[app.entry_service] > 1.0


def test_astronomy_shop_reference_facts():
    app = load_app("astronomy-shop")
    assert app.entry_service == "frontend-proxy" and app.flags_config_map == "flagd-config"
    assert "2.2.0" in app.variant_note
    for svc in ("frontend", "ad", "cart", "checkout", "currency", "email", "payment", "product-catalog", "quote",
                "recommendation", "shipping", "image-provider", "accounting", "fraud-detection", "flagd", "kafka",
                "valkey-cart", "postgresql", "product-reviews", "llm"):
        assert svc in app.service_names
    assert all(s.resources.cpu_limit_m is None and s.readiness_probe is None for s in app.services)
    assert app.service("checkout").resources.mem_limit_mi == 20
    assert app.service("recommendation").resources.mem_limit_mi == 500
    assert app.service("checkout").env["CART_ADDR"] == "cart:8080"
    kafka_edges = [e for e in app.edges if "kafka" in (e.caller, e.callee)]
    assert kafka_edges and all(e.asynchronous for e in kafka_edges)
    assert app.edge("checkout", "email").on_error == "ignore"
    flags = {f.name: f for f in app.flags}
    for name in ("adFailure", "adHighCpu", "adManualGc", "cartFailure", "failedReadinessProbe", "paymentFailure",
                 "paymentUnreachable", "productCatalogFailure", "recommendationCacheFailure", "kafkaQueueProblems",
                 "loadGeneratorFloodHomepage", "imageSlowLoad", "emailMemoryLeak", "llmRateLimitError",
                 "llmInaccurateResponse"):
        f = flags[name]
        assert f.variants[f.default_variant] in (0, False)
    assert "adServiceFailure" in flags["adFailure"].aliases
    assert flags["paymentFailure"].variants["90%"] == 0.95
    assert set(flags["kafkaQueueProblems"].consumers) == {"checkout", "fraud-detection"}
    weights = {p.name: p.weight for p in app.load.paths}
    assert {k: weights[k] for k in ("index", "browse_product", "get_recommendations", "get_ads", "view_cart",
                                    "add_to_cart", "checkout", "checkout_multi", "flood_home",
                                    "get_product_reviews", "ask_product_ai_assistant")} == {
        "index": 1, "browse_product": 10, "get_recommendations": 3, "get_ads": 3, "view_cart": 3, "add_to_cart": 2,
        "checkout": 1, "checkout_multi": 1, "flood_home": 5, "get_product_reviews": 2, "ask_product_ai_assistant": 1}
    flood = next(p for p in app.load.paths if p.name == "flood_home")
    assert flood.gated_by_flag == "loadGeneratorFloodHomepage"
    rates = _rates(app)
    assert rates["accounting"] > 0 and rates["fraud-detection"] > 0 and rates["quote"] > 0


def test_train_ticket_reference_facts():
    app = load_app("train-ticket")
    business = [s for s in app.services if s.name.endswith("-service")]
    assert len(business) == 41
    assert app.entry_service == "ts-ui-dashboard"
    mongos = [s for s in app.services if s.name.endswith("-mongo")]
    assert len(mongos) == 21 and all(s.ports[0].port == 27017 and s.resources.cpu_limit_m is None for s in mongos)
    assert app.service("ts-voucher-mysql").ports[0].port == 3306
    for s in business:
        assert s.image == f"codewisdom/{s.name}" and s.tag == "0.0.4"
        assert s.readiness_probe.type == "tcp" and s.readiness_probe.initial_delay_s == 160
        assert s.liveness_probe is None
        assert (s.resources.cpu_request_m, s.resources.cpu_limit_m, s.resources.mem_limit_mi) == (50, 200, 500)
    assert app.service("ts-order-service").ports[0].port == 12031
    assert app.service("ts-admin-basic-info-service").resources.mem_request_mi == 100
    assert {"ts-travel-service", "ts-seat-service"} <= set(app.callees("ts-seat-service")) | {"ts-seat-service"}
    assert "ts-seat-service" in app.callees("ts-travel-service")  # the cycle is in the edges
    assert app.edge("ts-preserve-service", "ts-notification-service").dormant
    weights = {p.name: p.weight for p in app.load.paths}
    assert (weights["request_voucher"], weights["create_contact"], weights["get_routes"], weights["get_stations"]) == (
        1, 1, 2, 2)
    assert {"book", "pay", "cancel"} <= set(weights)


def _ob_dict():
    return yaml.safe_load((DATA_DIR / "online-boutique.yaml").read_text())


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["edges"][0].__setitem__("callee", "nosuchservice"), "edges.0.callee"),
    (lambda d: d["services"][3]["resources"].__setitem__("cpu_limit_m", -5), "services.3.resources.cpu_limit_m"),
    (lambda d: d["services"][2].pop("image"), "services.2.image"),
    (lambda d: d["load"]["paths"][0]["calls"][0].__setitem__("to", "ghost"), "load.paths.0.calls.0.to"),
    (lambda d: d["load"]["paths"][0]["calls"][2]["calls"][0].__setitem__("to", "adservice"),
     "load.paths.0.calls.2.calls.0"),
    (lambda d: d["services"][0].__setitem__("colour", "red"), "services.0.colour"),
    (lambda d: d["services"][0].__setitem__("node", "node-z9"), "services.0.node"),
    (lambda d: d.pop("load"), "load"),
])
def test_malformed_app_names_the_field(mutate, field):
    d = _ob_dict()
    mutate(d)
    with pytest.raises(AppSpecError) as exc:
        parse_app(d, "broken.yaml")
    assert any(loc == field or loc.startswith(field) or field in msg for loc, msg in exc.value.errors), exc.value.errors
    assert field in str(exc.value)


def test_unknown_gating_flag_is_rejected():
    d = yaml.safe_load((DATA_DIR / "astronomy-shop.yaml").read_text())
    d["load"]["paths"][0]["gated_by_flag"] = "noSuchFlag"
    with pytest.raises(AppSpecError, match=r"load\.paths\.0\.gated_by_flag"):
        parse_app(d)


def test_user_defined_app_file_loads(tmp_path: Path):
    d = _ob_dict()
    d = copy.deepcopy(d)
    d["name"] = "my-shop"
    d["display_name"] = "My Shop"
    p = tmp_path / "my-shop.yaml"
    p.write_text(yaml.safe_dump(d))
    app = load_app(str(p))
    assert app.name == "my-shop" and app.service_names == load_app("online-boutique").service_names
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(AppSpecError, match="<yaml>"):
        load_app(str(bad))
    with pytest.raises(KeyError):
        load_app("no-such-app")


def test_closures_are_walked_once_and_equal_the_walk():
    import apps.spec as spec_mod
    from apps import DATA_DIR, load_app_file

    for name in ("online-boutique", "train-ticket", "astronomy-shop"):
        app = load_app_file(DATA_DIR / f"{name}.yaml")
        fresh = load_app_file(DATA_DIR / f"{name}.yaml")
        for s in app.service_names:
            up, down = app.upstream_closure(s), app.downstream_closure(s)
            assert up == app._closure(s, app.callers) and down == app._closure(s, app.callees)
            up.append("mutated by a caller")
            assert app.upstream_closure(s) == app._closure(s, app.callers)   # callers get their own lists
        assert app == fresh   # the memo is not part of the model
    monkey = spec_mod.CLOSURE_SPECS_MAX
    try:
        spec_mod.CLOSURE_SPECS_MAX = 2
        specs = [load_app_file(DATA_DIR / "online-boutique.yaml") for _ in range(5)]
        for sp in specs:
            assert sp.downstream_closure("frontend")[0] == "frontend"
            assert len(spec_mod._CLOSURES) <= 2
    finally:
        spec_mod.CLOSURE_SPECS_MAX = monkey
