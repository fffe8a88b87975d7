"""Detectability: a fault alone in a healthy twin raises an alert the scorer attributes to it."""

import pytest

from faults.catalogue import load_catalogue
from faults.detect import LIMIT_S, detect, detect_fault, warm_twin_factory


@pytest.fixture(scope="module")
def as_fresh():
    return warm_twin_factory("astronomy-shop")


def _fault(app, fid):
    return next(f for f in load_catalogue(app) if f.id == fid)


def test_dynamic_missing_env_reaches_the_callers_and_is_attributed(as_fresh):
    # frontend (TypeScript) starts without CHECKOUT_ADDR and fails every checkout call: the errors show at
    # its caller, the entry proxy, which must be in the scope (it was not: scope [frontend] only, and the
    # first frontend alert came 345 s after injection, too late for a 240 s occurrence)
    f = _fault("astronomy-shop", "as-config-frontend-missing-env-checkout-addr")
    assert "frontend-proxy" in f.scope and "KubePodCrashLooping" not in f.expected_alerts
    d = detect_fault(f, as_fresh)
    assert d.ok and d.detect_s <= LIMIT_S and d.service in f.scope, d


def test_compiled_missing_env_keeps_the_crash_variant():
    f = _fault("astronomy-shop", "as-config-checkout-missing-env-cart-addr")   # Go: panics at start
    assert f.scope == ["checkout"] and "KubePodCrashLooping" in f.expected_alerts


def test_wrong_address_scope_holds_the_callee_whose_calls_fail(as_fresh):
    # checkout's email address typo'd: order confirmations fail quietly (the order succeeds), so nothing shows
    # upstream; the callers' view of their calls to email (ServiceCallFailuresHigh, service=email) is the
    # symptom, so email belongs to the scope (it did not: no attributable alert at all in 780 s)
    f = _fault("astronomy-shop", "as-config-checkout-wrong-address-email-addr")
    assert "email" in f.scope and "checkout" in f.scope
    d = detect_fault(f, as_fresh)
    assert d.ok and d.service == "email" and d.alertname == "ServiceCallFailuresHigh", d


def test_a_slow_low_traffic_edge_alerts_at_its_caller():
    # 1.2 s added to ts-ui-dashboard -> ts-order-service: too few requests for the callee-wide p99 or the
    # entry's slow share; the caller's view of that one edge (ServiceCallLatencyHigh) sees it
    f = _fault("train-ticket", "tt-network-ts-ui-dashboard-ts-order-service-delay")
    d = detect_fault(f, warm_twin_factory("train-ticket"))
    assert d.ok and d.alertname == "ServiceCallLatencyHigh" and d.service == "ts-ui-dashboard", d


def test_an_alert_outside_the_scope_is_not_attribution(as_fresh):
    # the same OOM fault, its scope and culprits moved elsewhere: the OOM alert names the real service only
    f = _fault("astronomy-shop", "as-resource-cart-memory-oom")
    assert detect_fault(f, as_fresh).ok
    moved = f.model_copy(update={"scope": ["no-such-service"], "culprits": ["no-such-service"]})
    d = detect_fault(moved, as_fresh)
    assert d.detect_s is None and not d.ok and "no attributable alert" in d.detail


#: one fault per template (the catalogue's first) that is known to alert late or never in isolation;
#: a fault joining this list is a catalogue regression
KNOWN_LATE_OB: set[str] = set()


@pytest.mark.slow
def test_one_fault_per_template_is_detectable_online_boutique():
    first: dict = {}
    for f in load_catalogue("online-boutique"):
        first.setdefault(f.template, f)
    found = detect("online-boutique", list(first.values()))
    late = {d.fault_id for d in found if not d.ok}
    assert late <= KNOWN_LATE_OB, [(d.fault_id, d.detect_s, d.detail) for d in found if d.fault_id in late]
    assert len(found) == len(first) >= 20


def test_the_window_uses_the_scorers_grace_and_the_shortest_duration():
    from faults.detect import GRACE_S
    from faults.orchestrator import MIN_DURATION_S
    from scoring.params import Params

    assert GRACE_S == Params().grace_s and LIMIT_S == MIN_DURATION_S + GRACE_S
