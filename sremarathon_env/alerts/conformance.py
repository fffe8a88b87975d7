"""Write ``promtool test rules`` files that check this engine against Prometheus itself.

A batch holds one store's series as promtool ``input_series`` and many cases: ``promql_expr_test``
(expression, time, the samples our engine returns) and ``alert_rule_test`` (rule file, time, the
alerts our engine has firing). ``run_promtool`` runs promtool once per batch and reports which cases
disagree. Values are written with 17 significant digits: promtool 2.42 compares floats exactly.

>>> fmt_series_labels({"__name__": "up", "job": 'a"b'})
'up{job="a\\\\"b"}'
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from ..telemetry.store import MetricStore


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def fmt_series_labels(d: dict[str, str]) -> str:
    name = d.get("__name__", "")
    inner = ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(d.items()) if k != "__name__")
    return f"{name}{{{inner}}}"


def _fmt_float(x: float) -> str:
    if math.isinf(x):
        return "Inf" if x > 0 else "-Inf"
    return repr(float(x))


def _dur(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def input_series(store: MetricStore, stale_on_gap: bool = True) -> list[dict]:
    """Every series of the store in promtool's expanding notation (``_`` missing, ``stale`` marker)."""
    out = []
    n = store.n_ticks
    for name in store.names():
        for fam in store.families(name):
            vals = fam.values(n)
            for r in range(len(fam)):
                row = vals[r]
                toks = []
                prev_present = False
                for x in row:
                    if np.isnan(x):
                        toks.append("stale" if (stale_on_gap and prev_present) else "_")
                        prev_present = False
                    else:
                        toks.append(_fmt_float(float(x)))
                        prev_present = True
                if not any(t not in ("_", "stale") for t in toks):
                    continue
                out.append({"series": fmt_series_labels(fam.labels(r)), "values": " ".join(toks)})
    return out


@dataclass
class Batch:
    """One promtool test group: a store's series plus expression and alert cases."""

    store: MetricStore
    stale_on_gap: bool = True
    evaluation_interval_ms: int = 60000
    expr_cases: list[dict] = field(default_factory=list)
    alert_cases: list[dict] = field(default_factory=list)

    def add_expr(self, expr: str, t_s: float, result: dict) -> bool:
        """Add a case from our engine's instant-query result; False if it cannot be compared exactly."""
        if result["resultType"] == "scalar":
            val = float(result["result"][1].replace("+Inf", "inf").replace("-Inf", "-inf"))
            samples = [(fmt_series_labels({}), val)]
        elif result["resultType"] == "vector":
            samples = [(fmt_series_labels(r["metric"]), float(r["value"][1].replace("+Inf", "inf").replace("-Inf", "-inf")))
                       for r in result["result"]]
        else:
            return False
        if any(math.isnan(v) for _, v in samples):
            return False  # promtool 2.42 never matches NaN (NaN != NaN)
        ms = int(round(t_s * 1000))
        self.expr_cases.append({
            "expr": expr,
            "eval_time": _dur(ms),
            "exp_samples": [{"labels": lb, "value": _yaml_float(v)} for lb, v in samples],
        })
        return True

    def add_alerts(self, alertname: str, t_s: float, firing: list[tuple[dict, dict]]) -> None:
        ms = int(round(t_s * 1000))
        self.alert_cases.append({
            "eval_time": _dur(ms),
            "alertname": alertname,
            "exp_alerts": [{"exp_labels": dict(sorted(lb.items())), "exp_annotations": dict(sorted(an.items()))}
                           for lb, an in firing],
        })

    @property
    def n_cases(self) -> int:
        return len(self.expr_cases) + len(self.alert_cases)


class _YamlFloat(float):
    pass


def _yaml_float(v: float):
    return _YamlFloat(v)


def _float_repr(dumper, data):
    v = float(data)
    if math.isinf(v):
        return dumper.represent_scalar("tag:yaml.org,2002:float", ".inf" if v > 0 else "-.inf")
    return dumper.represent_scalar("tag:yaml.org,2002:float", repr(v) if ("." in repr(v) or "e" in repr(v)) else repr(v) + ".0")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_YamlFloat, _float_repr)


def write_test_file(path: Path, batch: Batch, rule_files: list[str]) -> None:
    st_ms = int(round(batch.store.step_s * 1000))
    test = {
        "interval": _dur(st_ms),
        "input_series": input_series(batch.store, batch.stale_on_gap),
    }
    if batch.expr_cases:
        test["promql_expr_test"] = batch.expr_cases
    if batch.alert_cases:
        test["alert_rule_test"] = batch.alert_cases
    doc = {"rule_files": rule_files, "evaluation_interval": _dur(batch.evaluation_interval_ms), "tests": [test]}
    path.write_text(yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=10_000))


@dataclass
class PromtoolReport:
    ok: bool
    n_cases: int
    failures: list[str]
    output: str


def promtool_path() -> str | None:
    return shutil.which("promtool")


def run_promtool(path: Path, n_cases: int, timeout_s: float = 300) -> PromtoolReport:
    """Run ``promtool test rules`` on one file; failures are the FAILED blocks of its output."""
    exe = promtool_path()
    if exe is None:
        raise FileNotFoundError("promtool not found (install Debian's prometheus package)")
    proc = subprocess.run([exe, "test", "rules", str(path)], capture_output=True, text=True, timeout=timeout_s,
                          cwd=str(path.parent))
    out = proc.stdout + proc.stderr
    failures = re.findall(r"(?m)^\s+(?:expr|alertname): .*$", out)
    if proc.returncode != 0 and not failures:
        failures = [out.strip()[-2000:]]
    return PromtoolReport(proc.returncode == 0, n_cases, failures, out)


_BLOCK = re.compile(r"(?ms)^\s+expr: (.*?), time: (\S+?),\s*\n\s+exp: (.*?)\n\s+got: (.*?)$")
_ITEM = re.compile(r'((?:[A-Za-z_:][\w:]*)?\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\}) (\S+?)(?:, |$)')


def _items(text: str) -> list[tuple[str, float]]:
    return sorted((lb, float(v.replace("Inf", "inf"))) for lb, v in _ITEM.findall(text.strip()))


def classify_expr_failures(output: str, rel_tol: float = 1e-9) -> tuple[list[str], list[str]]:
    """Split promtool's expression failures into (reordering-only, real).

    promtool 2.42 loads series in Go-map order, so an aggregation over more than two series adds its
    floats in an order that changes from run to run and its last bits vary; a failure whose label
    sets are identical and whose values differ by at most ``rel_tol`` is such a case. Everything
    else (missing or extra series, other labels, larger differences) is a real disagreement.
    """
    reorder, real = [], []
    for expr, t, exp, got in _BLOCK.findall(output):
        e, g = _items(exp), _items(got)
        same = len(e) == len(g) and all(
            le == lg and (ve == vg or abs(ve - vg) <= rel_tol * max(abs(ve), abs(vg))) for (le, ve), (lg, vg) in zip(e, g))
        (reorder if same else real).append(f"{expr} @ {t}")
    return reorder, real
