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
