"""The catalogue: size, coverage, well-formed change-driven faults, artifacts and repairs."""

import pytest

from apps import load_app
from apps.sources import initial_tree, lint, unit_tests
from faults.catalogue import (CATALOGUE_VERSION, apply_changes, catalogue_apps, change_diff, fault_by_id,
                              load_catalogue)
from faults.diffs import DiffError, apply_unified_diff
from faults.model import CATEGORIES

APPS = catalogue_apps()
#: categories an app lacks today, and why (remove when fixed): Astronomy Shop's only load fault is the
#: loadGeneratorFloodHomepage flag, excluded until the twin honours RequestPath.gated_by_flag.
KNOWN_GAPS: dict[str, set[str]] = {}


def test_at_least_700_faults_with_a_version():
    assert CATALOGUE_VERSION
    assert sum(len(load_catalogue(a)) for a in APPS) >= 700


@pytest.mark.parametrize("app", APPS)
def test_every_category_present_and_ids_unique_and_stable(app):
    cat = load_catalogue(app)
    assert {f.category for f in cat} == set(CATEGORIES) - KNOWN_GAPS.get(app, set())
    ids = [f.id for f in cat]
    assert len(ids) == len(set(ids)) and ids == sorted(ids)
    assert load_catalogue(app) == cat
    f = cat[len(cat) // 2]
    assert fault_by_id(f.id) == f


@pytest.mark.parametrize("app", APPS)
def test_faults_are_internally_consistent(app):
    spec = load_app(app)
    names = set(spec.service_names)
    nodes = {n.name for n in spec.topology.nodes}
    for f in load_catalogue(app):
        assert f.app == app
        assert f.target in names and set(f.culprits) <= names, f.id
        if f.category == "node":  # a node fault's scope also holds its node and zone (NodeNotReady carries `node`)
            node = f.artifact.canonical
            zone = next(n.zone for n in spec.topology.nodes if n.name == node)
            assert {node, zone} <= set(f.scope) and set(f.scope) <= names | {node, zone}, f.id
        else:
            assert set(f.scope) <= names, f.id
        assert f.artifact.matches(f.artifact.canonical)
        assert f.conflict_keys()
        for r in f.repairs:
            svc = r.args.get("service") or r.args.get("target")
            if r.tool == "drain_node":
                assert r.args["node"] in nodes
            elif r.tool == "set_config" and svc == (spec.flags_config_map or "flagd"):
                assert r.args["key"] in {fl.name for fl in spec.flags}
            else:
                assert svc in names, (f.id, r)


@pytest.mark.parametrize("app", APPS)
def test_expected_alerts_are_rules_of_the_pack(app):
    """A fault's expected alerts name alerts the frozen rule pack can raise (the reference templates' names,
    such as ServiceLatencyP95High or ErrorBudgetBurn, are the pack's ServiceLatencyP99High and
    ErrorBudgetBurnFast/Medium/Slow; the pack has no node CPU rule)."""
    from sremarathon_env.alerts import load_rule_pack

    names = {r.name for r in load_rule_pack().rules}
    cat = load_catalogue(app)
    unknown = sorted({(a, f.template) for f in cat for a in f.expected_alerts if a not in names})
    assert not unknown, unknown[:10]
    assert sum(bool(f.expected_alerts) for f in cat) >= 0.9 * len(cat)


@pytest.mark.parametrize("app", APPS)
def test_change_driven_faults_are_real_diffs_that_pass_the_pipeline(app):
    spec = load_app(app)
    n = 0
    for f in load_catalogue(app):
        r = f.realisation
        if r.kind != "deploy" or not r.files:
            continue
        n += 1
        assert f.artifact.kind == "commit" and r.message and r.author
        tree = initial_tree(spec, r.service)
        changed = apply_changes(tree, r.files)
        assert changed != tree
        assert lint(spec, r.service, changed) == [], f.id
        assert all(ok for _, ok, _ in unit_tests(spec, r.service, changed)), f.id
        diff = change_diff(r.service, tree, r.files)
        assert diff.startswith("--- a/")
        assert apply_unified_diff(diff, tree.get) == {p: changed[p] for p in {c.path for c in r.files}}
        # the declared patch_source repair undoes the change exactly
        patch = next(o for o in f.repairs if o.tool == "patch_source")
        back = apply_unified_diff(patch.args["diff"], changed.get)
        assert all(back[p] == tree[p] for p in back), f.id
        # revision-bound effects are bound to a snippet of the changed build, absent before
        for e in r.effects:
            assert e.bind == "revision"
            if e.marker.source_contains:
                path, snippet = e.marker.source_contains
                assert snippet in changed[path] and snippet not in tree[path], f.id
    assert n >= 20


def test_hand_written_changes_exist_and_silent_ones_use_the_artifact():
    ob = load_catalogue("online-boutique")
    hand = [f for f in ob if f.template == "change"]
    assert len(hand) >= 5
    silent = [f for f in hand if f.silent]
    assert silent and all(f.probe.kind == "artifact" for f in silent)


def test_astronomy_shop_flags_are_faults():
    if "astronomy-shop" not in APPS:
        pytest.skip("astronomy-shop model not present")
    flags = [f for f in load_catalogue("astronomy-shop") if f.artifact.kind == "flag"]
    names = {f.realisation.key for f in flags}
    assert {"adFailure", "paymentFailure", "recommendationCacheFailure", "paymentUnreachable"} <= names
    pf = next(f for f in flags if f.id.endswith("paymentfailure-50"))
    assert pf.realisation.value == "50%" and pf.realisation.effects[0].rate == 0.5
    assert pf.artifact.matches("paymentServiceFailure")  # the 1.x name is an alias
    assert all(r.tool == "set_config" for f in flags for r in f.repairs)


def test_diff_applier_rejects_mismatches():
    with pytest.raises(DiffError):
        apply_unified_diff("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-q\n+r\n", {"x": "p\n"}.get)
    with pytest.raises(DiffError):
        apply_unified_diff("nothing", {}.get)
