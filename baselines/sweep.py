"""Run every (app, seed, policy) combination: in local processes (default) or as Ray tasks.

Each job is one `baselines.runner.run_marathon` writing its bundle under ``out_dir``; jobs whose
bundle already exists (sealed) are skipped, so an interrupted sweep resumes. Ray is imported only
when an address is given (``auto`` joins the cluster Ray finds; the ``rl`` extra installs it).

>>> parse_seeds("0-2,7")
[0, 1, 2, 7]
>>> [j.policy for j in sweep_jobs(["online-boutique"], [0], ["noop", "keep"])]
['noop', 'keep']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from sremarathon_env.seeds import parse_seeds  # noqa: F401 - re-exported for callers


@dataclass(frozen=True)
class Job:
    app: str
    seed: int
    policy: str
    config: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


def sweep_jobs(apps: list[str], seeds: list[int], policies: list[str], **config: Any) -> list[Job]:
    return [Job(app, seed, pol, dict(config)) for app in apps for seed in seeds for pol in policies]


def run_job(job: Job, out_dir: str) -> dict[str, Any]:
    """Run one job (in whatever process it lands); returns a small JSON-able summary."""
    from baselines.runner import bundle_path, run_marathon

    path = bundle_path(out_dir, job.policy, job.app, job.seed)
    if (path / "manifest.json").exists():
        return {"app": job.app, "seed": job.seed, "policy": job.policy, "path": str(path), "skipped": True}
    if path.exists():  # an unsealed prefix of an interrupted run: start over
        import shutil

        shutil.rmtree(path)
    try:
        report, p = run_marathon(job.app, job.seed, job.policy, out_dir=out_dir, **job.config)
    except Exception as e:  # noqa: BLE001 - one failing job must not end the sweep
        return {"app": job.app, "seed": job.seed, "policy": job.policy, "error": f"{type(e).__name__}: {e}"}
    return {"app": job.app, "seed": job.seed, "policy": job.policy, "path": str(p), "score": report.marathon_score}


def run_sweep(jobs: list[Job], out_dir: str | Path, workers: int = 2, ray_address: str | None = None,
              on_done: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``jobs``; results in the order they finish (``on_done`` is called for each)."""
    out = str(out_dir)
    Path(out).mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []

    def done(r: dict[str, Any]) -> None:
        results.append(r)
        if on_done:
            on_done(r)

    if ray_address:
        try:
            import ray
        except ImportError:
            raise RuntimeError("--ray needs Ray: pip install 'sremarathon-env[rl]'") from None
        ray.init(address=ray_address, ignore_reinit_error=True)
        remote = ray.remote(run_job)
        pending = [remote.remote(j, out) for j in jobs]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            done(ray.get(ready[0]))
        return results
    if workers <= 1:
        for j in jobs:
            done(run_job(j, out))
        return results
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=workers) as ex:
        futs = [ex.submit(run_job, j, out) for j in jobs]
        for f in as_completed(futs):
            done(f.result())
    return results
