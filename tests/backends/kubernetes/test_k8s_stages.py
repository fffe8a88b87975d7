"""kwok stages: structure and image selection (the Go templates run only on a live cluster)."""

from __future__ import annotations

import re

import yaml

from faults.catalogue import iter_all
from sremarathon_env.backends.kubernetes.stages import FAULT_ANNOTATION, kwok_config_yaml, pullable_image_regex, stages


def test_bundled_images_pull_and_catalogue_bad_tags_do_not():
    from apps import load_app
    rx = re.compile(pullable_image_regex())
    for name in ("online-boutique", "astronomy-shop", "train-ticket"):
        for s in load_app(name).services:
            assert rx.search(f"{s.image}:{s.tag}"), f"{s.image}:{s.tag}"
            assert rx.search(f"{s.image}:{s.tag.split('-')[0]}-0a1b2c3")   # the twin's build tags
    bad = sorted({f.realisation.image_tag for f in iter_all() if f.realisation.image_tag})
    assert bad
    for tag in bad:
        assert not rx.search(f"example.org/x/svc:{tag}"), tag
    assert rx.search("redis") and rx.search("registry:5000/ns/img") and rx.search("img@sha256:" + "a" * 64)
    assert not rx.search("registry:5000/ns/img:nope")


def test_stage_set_is_complete_and_faults_win():
    st = {s["metadata"]["name"]: s["spec"] for s in stages()}
    assert {"sre-node-initialize", "sre-node-heartbeat", "sre-pod-ready", "sre-pod-delete",
            "sre-pod-image-pull-backoff", "sre-pod-crashloop", "sre-pod-unready", "sre-pod-healed"} == set(st)
    for name, spec in st.items():
        keys = [e["key"] for e in spec["selector"]["matchExpressions"]]
        if spec["resourceRef"]["kind"] == "Pod" and name != "sre-pod-delete":
            assert ".metadata.deletionTimestamp" in keys, name
        if name in ("sre-pod-image-pull-backoff", "sre-pod-crashloop", "sre-pod-unready"):
            assert spec["weight"] > 0, name
    ready = st["sre-pod-ready"]["selector"]["matchExpressions"]
    excl = next(e for e in ready if FAULT_ANNOTATION in e["key"])
    assert excl["operator"] == "NotIn" and {"crashloop", "oom", "unready", "healed"} <= set(excl["values"])
    # the crash stage re-matches its own output: it must not require the pod to be non-crashing
    crash = st["sre-pod-crashloop"]["selector"]["matchExpressions"]
    assert not any("waiting.reason" in e["key"] for e in crash) and st["sre-pod-crashloop"]["delay"]
    assert "add1" in st["sre-pod-crashloop"]["next"]["statusTemplate"]


def test_config_file_round_trips():
    docs = list(yaml.safe_load_all(kwok_config_yaml()))
    assert [d["kind"] for d in docs] == ["Stage"] * len(docs)
    assert kwok_config_yaml() == kwok_config_yaml()


def test_image_selector_is_a_valid_jq_expression():
    """kwok evaluates selectors with gojq; the jq CLI accepts the same syntax (string escapes, test/1)."""
    import json
    import shutil
    import subprocess

    import pytest

    from sremarathon_env.backends.kubernetes.stages import _image_key

    jq = shutil.which("jq")
    if jq is None:
        pytest.skip("jq is not installed")
    expr = _image_key(pullable_image_regex())
    cases = {"x/adservice:v0.10.6": True, "x/adservice:v0,10.6": False, "redis:alpine": True,
             "otel/demo:2.2.0-fraud-detection": True, "otel/demo:2,2.0-cart": False, "nginx": True}
    for image, want in cases.items():
        pod = {"spec": {"containers": [{"image": image}]}}
        out = subprocess.run([jq, "-c", expr], input=json.dumps(pod), capture_output=True, text=True, check=True)
        assert out.stdout.strip() == json.dumps(want), image
