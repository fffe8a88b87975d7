"""Find and score the bundles under a directory.

A bundle is a directory holding ``records.jsonl``. Its policy, app and seed come from the ``meta.json``
written by `baselines.runner` (else the ``run`` record and the directory layout
``<policy>/<app>/seed-<n>``). Each bundle is verified and scored from its records alone.

>>> import tempfile
>>> collect_runs(tempfile.mkdtemp())
[]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sremarathon_env.bundle import RECORDS_FILE, read_bundle


@dataclass
class RunResult:
    policy: str
    app: str
    seed: int
    path: Path
    report: Any              # scoring.ScoreReport
    complete: bool


def run_result(path: str | Path) -> RunResult:
    """Verify and score one bundle (raises `BundleError` when it does not verify)."""
    from scoring import score

    p = Path(path)
    b = read_bundle(p)
    rep = score(b.records, complete=b.complete)
    rep.digest = b.digest
    run = b.first("run")
    meta = b.meta or {}
    app = meta.get("app") or (run.data.get("app") if run else None) or "?"
    seed = meta.get("seed", run.data.get("seed") if run else -1)
    policy = meta.get("policy")
    if not policy:
        parts = p.resolve().parts
        policy = parts[-3] if len(parts) >= 3 else "?"
    return RunResult(policy=str(policy), app=str(app), seed=int(seed), path=p, report=rep, complete=b.complete)


def collect_runs(root: str | Path, *, skip_bad: bool = True, incomplete: bool = False) -> list[RunResult]:
    """Every bundle under ``root`` (or ``root`` itself), sorted by (policy, app, seed). Bundles that
    do not verify are skipped (``skip_bad``) or raise; unsealed prefixes of runs that did not finish
    are left out unless ``incomplete``."""
    root = Path(root)
    dirs = [root] if (root / RECORDS_FILE).is_file() else sorted(p.parent for p in root.rglob(RECORDS_FILE))
    out = []
    for d in dirs:
        try:
            r = run_result(d)
        except Exception:  # noqa: BLE001
            if not skip_bad:
                raise
            continue
        if r.complete or incomplete:
            out.append(r)
    return sorted(out, key=lambda r: (r.policy, r.app, r.seed, str(r.path)))
