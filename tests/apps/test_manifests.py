"""Kubernetes manifests generated from the app model."""

from __future__ import annotations

import pytest

from apps import load_app
from apps.manifests import NODE_LABEL, container_json, manifests, resources_json, to_yaml

APPS = ["online-boutique", "astronomy-shop", "train-ticket"]


@pytest.mark.parametrize("name", APPS)
def test_every_service_gets_a_deployment_and_a_service(name):
    app = load_app(name)
    docs = manifests(app)
    deps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    svcs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    assert list(deps) == app.service_names and list(svcs) == app.service_names
    for s in app.services:
        dep = deps[s.name]
        assert dep["metadata"]["namespace"] == app.namespace
        assert dep["spec"]["replicas"] == s.replicas
        assert dep["spec"]["selector"]["matchLabels"] == {"app": s.name}
        tpl = dep["spec"]["template"]
        assert tpl["metadata"]["labels"]["app"] == s.name          # selector matches the template
        (c,) = tpl["spec"]["containers"]
        assert c["image"] == f"{s.image}:{s.tag}"
        assert {e["name"]: e["value"] for e in c["env"]} == s.env
        assert [p["containerPort"] for p in c["ports"]] == [p.target_port for p in s.ports]
        pref = tpl["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        assert pref["preference"]["matchExpressions"][0] == {"key": NODE_LABEL, "operator": "In", "values": [s.node]}
        svc = svcs[s.name]
        assert svc["spec"]["selector"] == {"app": s.name}
        assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(p.port, p.target_port) for p in s.ports]
        # port names are DNS labels of at most 15 characters (the API rejects longer ones)
        assert all(len(p["name"]) <= 15 for p in svc["spec"]["ports"] + c["ports"])


def test_flags_config_map_and_namespace_override():
    app = load_app("astronomy-shop")
    docs = manifests(app, namespace="bench")
    cms = [d for d in docs if d["kind"] == "ConfigMap"]
    assert [c["metadata"]["name"] for c in cms] == [app.flags_config_map]
    assert cms[0]["data"] == {f.name: f.default_variant for f in sorted(app.flags, key=lambda f: f.name)}
    assert {d["metadata"]["namespace"] for d in docs} == {"bench"}


def test_resources_and_probes():
    s = load_app("online-boutique").service("frontend")
    c = container_json(s)
    assert c["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}
    assert c["readinessProbe"]["httpGet"] == {"path": "/_healthz", "port": 8080, "scheme": "HTTP"}
    assert resources_json({"mem_limit_mi": 40}) == {"limits": {"memory": "40Mi"}}
    assert container_json(s, tag="v9", env={"A": "1"})["image"].endswith("/frontend:v9")


def test_deterministic_yaml():
    app = load_app("online-boutique")
    a, b = to_yaml(manifests(app)), to_yaml(manifests(app))
    assert a == b and a.count("\n---\n") == len(manifests(app)) - 1
