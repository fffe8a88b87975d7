"""Every module's docstring example runs: the examples are documentation users copy, so they must stay true."""

import doctest
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("sremarathon_env", "scoring", "faults", "apps", "wrappers", "baselines", "live")


def _modules() -> list[str]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                out.append(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    return out


MODULES = _modules()


def test_examples_are_found():
    assert len(MODULES) >= 60 and "faults.detect" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_examples_run(name):
    try:
        mod = importlib.import_module(name)
    except ImportError as exc:   # an optional extra (torch, ray, kubernetes) that this machine lacks
        pytest.skip(f"{name}: {exc}")
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert res.failed == 0, f"{res.failed} of {res.attempted} examples of {name} failed (python -m doctest -v)"
