"""The notebooks run top to bottom (nbclient, Python kernel) on small settings; the repo copies carry no outputs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ("quickstart", "leaderboard", "train_ppo")


def test_notebooks_are_stripped():
    for name in NAMES:
        nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert code, name
        assert all(c.get("outputs") == [] and c.get("execution_count") is None for c in code), name
        assert nb["metadata"]["kernelspec"]["name"] == "python3"


def _execute(name: str, tmp_path: Path, monkeypatch, **settings: str):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("SREM_NB_OUT", str(tmp_path / "out"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for k, v in settings.items():
        monkeypatch.setenv(f"SREM_NB_{k.upper()}", v)
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=900,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    return nb


def _text(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text", "") if isinstance(o.get("text", ""), str) else "")
            data = o.get("data") or {}
            out.append(str(data.get("text/plain", "")) + str(data.get("text/markdown", "")))
    return "\n".join(out)


def _images(nb) -> int:
    return sum(1 for c in nb.cells for o in c.get("outputs", []) if "image/png" in (o.get("data") or {}))


@pytest.mark.slow
def test_quickstart_runs(tmp_path, monkeypatch):
    nb = _execute("quickstart", tmp_path, monkeypatch, injection_s="240", observation_s="240")
    text = _text(nb)
    assert "Marathon-Score:" in text and "bundle:" in text
    assert _images(nb) == 2  # timeline and funnel
    assert (tmp_path / "out" / "timeline.png").stat().st_size > 1000


@pytest.mark.slow
def test_leaderboard_runs(tmp_path, monkeypatch):
    nb = _execute("leaderboard", tmp_path, monkeypatch, injection_s="240", observation_s="240", seeds="0,1",
                  policies="noop,runbook", workers="1")
    text = _text(nb)
    assert "4 runs, 0 errors" in text
    assert "runbook" in text and "noop" in text
    assert _images(nb) >= 2
    assert (tmp_path / "out" / "leaderboard" / "leaderboard.csv").exists()


@pytest.mark.slow
def test_train_ppo_runs(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    pytest.importorskip("torch")
    nb = _execute("train_ppo", tmp_path, monkeypatch, injection_s="240", observation_s="240", iterations="1",
                  env_runners="1", eval_seeds="100")
    text = _text(nb)
    assert "checkpoint:" in text and "ppo   " in text and "random" in text
    assert _images(nb) == 1
