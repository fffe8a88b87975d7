"""``k8s_get(kind, name)`` renders only the named object: the same item as filtering the whole list."""

from __future__ import annotations

import json

import pytest

from sremarathon_env.backends.sim import render
from sremarathon_env.marathon import Marathon, MarathonConfig

KINDS = ("pods", "deployments", "replicasets", "configmaps", "nodes", "services", "endpoints", "resourcequotas")


@pytest.mark.parametrize("app", ["online-boutique", "astronomy-shop"])
def test_by_name_equals_the_filtered_list_through_a_marathon(app):
    m = Marathon(MarathonConfig(app=app, seed=3, injection_s=1200, observation_s=240, reference_run=False))
    m.start()
    compared = 0
    for _ in range(6):   # pods come and go with the faults' rollouts
        b = m.backend
        for kind in KINDS:
            whole = render.get(b, kind, None)
            for item in whole:
                name = item["metadata"]["name"]
                one = b.k8s_get(kind, name)
                assert json.dumps(one, sort_keys=True) == json.dumps(
                    [i for i in whole if i["metadata"]["name"] == name], sort_keys=True)
                compared += 1
            assert b.k8s_get(kind, "no-such-object") == []
        m.advance_to_next_invocation()
    assert compared > 300
