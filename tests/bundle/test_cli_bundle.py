"""`sremarathon bundle verify|show` and `sremarathon score` on real bundles."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from sremarathon_env import cli_bundle
from sremarathon_env.bundle import RECORDS_FILE, Recorder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scoring"))
from scoring_builders import synthetic_marathon  # noqa: E402


def run(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command")
    cli_bundle.add_parser(sub)
    args = p.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    mem = synthetic_marathon(1, n_faults=20, n_ticks=120)
    path = tmp_path_factory.mktemp("b") / "bundle"
    rec = Recorder(path, meta={"host": "test"})
    for r in mem.records[:-1]:
        rec.append(r.kind, r.t, r.data)
    rec.seal()
    return path, rec.digest


def test_verify_and_show(bundle, capsys):
    path, digest = bundle
    assert run(["bundle", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and digest in out and "complete" in out
    assert run(["bundle", "verify", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["digest"] == digest and rep["counts"]["invocation"] == 15
    assert run(["bundle", "show", str(path), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["schedule"]["faults"] == 20 and s["run"]["app"] == "online-boutique" and s["meta"] == {"host": "test"}
    assert run(["bundle", "show", str(path)]) == 0
    assert "faults" in capsys.readouterr().out


def test_score_cli(bundle, capsys):
    path, digest = bundle
    assert run(["score", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["digest"] == digest and rep["n_faults"] == 20 and 0.0 <= rep["marathon_score"] <= 100.0
    assert run(["score", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Marathon-Score" in out and f"{rep['marathon_score']:.2f}" in out


def test_cli_reports_tampering_and_missing_paths(tmp_path, capsys):
    rec = Recorder(tmp_path / "b")
    for r in synthetic_marathon(0, n_faults=3, n_ticks=20).records[:-1]:
        rec.append(r.kind, r.t, r.data)
    rec.close()  # unsealed prefix
    assert run(["bundle", "verify", str(tmp_path / "b")]) == 0
    assert "INCOMPLETE" in capsys.readouterr().out
    p = tmp_path / "b" / RECORDS_FILE
    lines = p.read_bytes().splitlines(keepends=True)
    lines[5] = lines[5].replace(b'"t":', b'"t" :', 1)
    p.write_bytes(b"".join(lines))
    assert run(["bundle", "verify", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err
    assert "line 6" in err and "record 5" in err
    assert run(["score", str(tmp_path / "b")]) == 1
    assert run(["bundle", "show", str(tmp_path / "nope")]) == 2
