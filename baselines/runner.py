"""Run one marathon with a policy and write its bundle.

`run_marathon` starts a `Marathon`, calls the policy once per invocation (closing each invocation
with the usage the policy reports), seals the bundle and returns the `ScoreReport` with the bundle's
path. Bundles go to ``<out_dir>/<policy>/<app>/seed-<seed>`` with a ``meta.json`` beside the
records (policy name and options, wall-clock seconds; outside everything hashed).

>>> from baselines.runner import bundle_path
>>> bundle_path("runs", "keep", "online-boutique", 3).as_posix()
'runs/keep/online-boutique/seed-3'
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from baselines.base import Policy


def bundle_path(out_dir: str | Path, policy: str, app: str, seed: int) -> Path:
    return Path(out_dir) / policy.replace(":", "_").replace("/", "_") / app / f"seed-{seed}"


def run_marathon(app: str, seed: int, policy: Policy | str, out_dir: str | Path | None = None,
                 progress: bool = False, policy_options: dict[str, Any] | None = None,
                 **config: Any):
    """Run ``policy`` (a `Policy` or a name for `baselines.make_policy`) on one marathon.

    ``config`` are further `MarathonConfig` fields (``injection_s``, ``observation_s``, ``noise``...).
    Returns ``(ScoreReport, bundle_path or None)``.
    """
    from baselines import make_policy
    from sremarathon_env.marathon import Marathon, MarathonConfig

    pol = make_policy(policy, **(policy_options or {})) if isinstance(policy, str) else policy
    path = bundle_path(out_dir, pol.name, app, seed) if out_dir is not None else None
    if path is not None and (path / "records.jsonl").exists():
        raise FileExistsError(f"{path} already holds a bundle; choose another --out")
    cfg = MarathonConfig(app=app, seed=seed, bundle_dir=str(path) if path else None, **config)
    m = Marathon(cfg)
    wall0 = time.perf_counter()
    m.start()
    pol.reset(m.app, seed)
    bar = _Progress(m.n_invocations, f"{pol.name} {app} seed {seed}") if progress else None
    try:
        while True:
            usage = None
            error = None
            try:
                usage = pol.act(m)
            except Exception as e:  # noqa: BLE001 - a failing policy loses its invocation, not the run
                error = f"policy raised {type(e).__name__}: {e}"[:500]
            if isinstance(usage, dict) and usage.get("error"):
                error = str(usage["error"])[:500]
            m.end_invocation(usage=_clean_usage(usage), error=error)
            if bar:
                bar.update(m.invocation_index, m.score)
            if not m.advance_to_next_invocation():
                break
    finally:
        if bar:
            bar.close()
        pol.close()
    report = m.finish()
    if path is not None:
        meta = {"policy": pol.name, "policy_options": getattr(pol, "options", {}), "app": app, "seed": seed,
                "wall_s": round(time.perf_counter() - wall0, 3),
                "config": cfg.model_dump(mode="json", exclude={"bundle_dir"})}
        (path / "meta.json").write_text(json.dumps(meta, sort_keys=True, indent=1, default=str) + "\n")
    return report, path


_USAGE_KEYS = ("model_calls", "prompt_tokens", "completion_tokens", "cost_usd", "model")


def _clean_usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    out = {k: usage[k] for k in _USAGE_KEYS if usage.get(k) is not None}
    return out or None


class _Progress:
    """A rich progress bar over invocations (score shown as it accrues)."""

    def __init__(self, total: int, label: str):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("score {task.fields[score]:.1f}"), TimeElapsedColumn(), transient=False)
        self.p.start()
        self.task = self.p.add_task(label, total=total, score=0.0)

    def update(self, done: int, score: float) -> None:
        self.p.update(self.task, completed=done, score=score)

    def close(self) -> None:
        self.p.stop()
