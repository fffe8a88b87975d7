"""The frozen rule pack: generated, loadable by Prometheus, labelled for the scorer."""

from __future__ import annotations

import subprocess

import pytest

from sremarathon_env.alerts import load_rule_pack
from sremarathon_env.alerts.conformance import promtool_path
from sremarathon_env.alerts.rules import generate


def test_committed_pack_equals_generator_output():
    assert generate.PACK_PATH.read_text() == generate.render_pack(), "run python -m sremarathon_env.alerts.rules.generate"


def test_pack_size_version_and_templates():
    pack = load_rule_pack()
    assert pack.version == generate.PACK_VERSION
    assert len(pack.rules) >= 44
    templates = {dict(r.labels)["template"] for r in pack.rules}
    assert len(templates) >= 18
    assert all(dict(r.labels)["severity"] in ("info", "warning", "critical") for r in pack.rules)
    assert len({r.name for r in pack.rules}) >= 40
    assert len(pack.digest) == 64


def test_kafka_rules_only_for_astronomy_shop():
    pack = load_rule_pack()
    kafka = [r for r in pack.rules if "kafka" in r.expr]
    assert kafka and all(r.group == "sremarathon.entry.astronomy-shop" for r in kafka)


@pytest.mark.promtool
@pytest.mark.skipif(promtool_path() is None, reason="promtool not installed")
def test_promtool_check_rules_accepts_pack():
    out = subprocess.run([promtool_path(), "check", "rules", str(generate.PACK_PATH)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(load_rule_pack().rules)} rules found" in out.stdout


def test_bad_rule_files_are_rejected(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: sum(\n")
    with pytest.raises(ValueError, match="g/A"):
        load_rule_pack(p)
    p.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    annotations: {s: '{{ humanize $value }}'}\n")
    with pytest.raises(ValueError, match="unsupported template"):
        load_rule_pack(p)


def _render_by_sub(annotations, sample, value):
    """The template expansion as one ``re.sub`` per template (what ``render_annotations`` must equal)."""
    from sremarathon_env.alerts.rulepack import _LABEL_REF, _TEMPLATE_ACTION, go_float

    out = {}
    for k, tmpl in annotations:
        def sub(m):
            act = m.group(1)
            if act == "$value":
                return go_float(value)
            lm = _LABEL_REF.match(act)
            return sample.get(lm.group(1), "<no value>") if lm else m.group(0)
        out[k] = _TEMPLATE_ACTION.sub(sub, tmpl)
    return out


def test_render_annotations_equals_template_substitution():
    import dataclasses
    import random

    pack = load_rule_pack()
    rng = random.Random(4)
    odd = ("{{$value}}", "a {{ $value }} b {{ $labels.x }}{{$labels.y}} c", "x {{ $foo }} {{ $labels. }} y{{}}", "",
           "plain", "{{ $value }}{{ $value }}", "{{ {{ $value }} }}")
    rules = list(pack.rules) + [dataclasses.replace(pack.rules[0], annotations=tuple((str(i), t) for i, t in enumerate(odd)))]
    # zeros of both signs after each other (the value cache must not mix them), NaN, infinities, repeats
    values = [0.0, -0.0, 0.0, 1.0, float("nan"), float("inf"), -float("inf"), 1e21, 0.1 + 0.2, 1e-5, -3.5, 1.0]
    values += [rng.uniform(-1e6, 1e6) for _ in range(10)]
    for r in rules:
        for v in values:
            for sample in ({}, {"service": "cart", "x": "1", "y": "<>"}, {"namespace": "ns"}):
                assert r.render_annotations(sample, v) == _render_by_sub(r.annotations, sample, v), (r.name, v)
