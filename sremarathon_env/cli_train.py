"""``sremarathon train | train-bench``: PPO on the RL view with RLlib (the ``rl`` extra).

- ``sremarathon train --app online-boutique --iterations N --env-runners K [--out runs/ppo]
  [--address ray://HOST:10001|auto] [--eval-seeds 100-109]``: a progress bar, one line per iteration
  with the mean return (= mean Marathon-Score of the iteration's episodes), a checkpoint per
  ``--checkpoint-every`` iterations. With ``--eval-seeds`` the last checkpoint (greedy) and the
  random policy are scored on those scenarios and both means are printed with the command that
  produced them. A checkpoint plays as a policy: ``sremarathon run --policy ppo:PATH``.
- ``sremarathon train-bench``: RLlib sampling throughput on the RL view vs a trivial env with the
  same spaces and runner settings, as a ratio.

Marathons default to 20 + 8 minutes (14 steps) for training; ``--injection-s 3600
--observation-s 1800`` trains on full marathons.

>>> import argparse
>>> p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_parser(sub)
>>> a = p.parse_args(["train", "--iterations", "2", "--env-runners", "2", "--eval-seeds", "0-2"])
>>> a.iterations, a.env_runners, parse_seeds(a.eval_seeds)
(2, 2, [0, 1, 2])
"""

from __future__ import annotations

import argparse
import json
import math
import shlex

from sremarathon_env.cli_args import (app_name, fraction, non_negative_float, non_negative_int, positive_float,
                                      positive_int)
from sremarathon_env.seeds import parse_seeds as _parse_seeds


def parse_seeds(text: str | None) -> list[int]:
    """``"0-4"``, ``"1,5,9"`` or a mix -> sorted unique ints; nothing given -> []."""
    if not (text or "").strip():
        return []
    try:
        return _parse_seeds(text)
    except ValueError as exc:
        raise SystemExit(f"bad seed list {text!r}: {exc}") from None


def parse_hiddens(text: str) -> tuple[int, ...]:
    """``"64,64"`` -> (64, 64); widths must be positive ints.

    >>> parse_hiddens("64, 32")
    (64, 32)
    """
    try:
        widths = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        widths = ()
    if not widths or min(widths) <= 0:
        raise SystemExit(f"bad --hiddens {text!r}: expected positive ints like 64,64")
    return widths


def _checked(parse):
    """An argparse type that validates with ``parse`` (a clear usage error, exit 2, before anything runs) and keeps
    the text as given, so the printed reproduction command shows it unchanged."""
    def check(text: str) -> str:
        try:
            parse(text)
        except SystemExit as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    check.__name__ = parse.__name__
    return check


def _env_config(args) -> dict:
    cfg = {}
    if args.injection_s is not None:
        cfg["injection_s"] = args.injection_s
    if args.observation_s is not None:
        cfg["observation_s"] = args.observation_s
    if getattr(args, "no_noise", False):
        cfg["noise"] = False
    return cfg


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--app", type=app_name, default="online-boutique", help="app model id")
    p.add_argument("--env-runners", type=non_negative_int, default=2,
                   help="RLlib EnvRunner actors (0: sample in the driver)")
    p.add_argument("--envs-per-runner", type=positive_int, default=1, help="sub-envs per runner (vectorised)")
    p.add_argument("--injection-s", type=positive_int, default=None, help="fault-injection phase (default 1200)")
    p.add_argument("--observation-s", type=non_negative_int, default=None, help="observation phase (default 480)")
    p.add_argument("--no-noise", action="store_true", help="no benign noise")
    p.add_argument("--address", default=None, help="connect to an existing Ray cluster (ray://HOST:PORT or auto)")


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train PPO (RLlib, action masking) on the RL view",
                       description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(p)
    p.add_argument("--iterations", type=positive_int, default=10)
    p.add_argument("--seed", type=non_negative_int, default=0, help="base seed of every env stream and of RLlib")
    p.add_argument("--out", default="runs/ppo", help="checkpoint directory")
    p.add_argument("--checkpoint-every", type=positive_int, default=1)
    p.add_argument("--train-batch", type=positive_int, default=None, help="env steps per iteration (default: one episode per sub-env)")
    p.add_argument("--lr", type=positive_float, default=3e-4)
    p.add_argument("--epochs", type=positive_int, default=6)
    p.add_argument("--minibatch", type=positive_int, default=64, help="SGD minibatch (env steps)")
    p.add_argument("--gamma", type=fraction, default=0.99, help="discount of the advantage estimates (the reported return stays the undiscounted score)")
    p.add_argument("--gae-lambda", type=fraction, default=0.95, help="GAE lambda (lower: less variance, more bias)")
    p.add_argument("--entropy-coeff", type=non_negative_float, default=0.01)
    p.add_argument("--head", choices=("plain", "factored"), default="plain",
                   help="policy head: plain MLP logits, or plus per-kind terms shared by all services")
    p.add_argument("--hiddens", type=_checked(parse_hiddens), default="128,128", help="MLP widths, comma separated")
    p.add_argument("--eval-seeds", type=_checked(parse_seeds), default=None, help="after training, score the checkpoint and random on these scenarios")
    p.set_defaults(func=_train)

    b = sub.add_parser("train-bench", help="RLlib sampling throughput: RL view vs a trivial env with the same spaces")
    _common(b)
    b.add_argument("--episodes", type=positive_int, default=2, help="episodes per sub-env in the timed sample")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=_bench)


def _command(args, names: list[str]) -> str:
    parts = ["sremarathon", args.command]
    for n in names:
        v = getattr(args, n)
        flag = "--" + n.replace("_", "-")
        if isinstance(v, bool):
            parts += [flag] if v else []
        elif v is not None:
            parts += [flag, str(v)]
    return " ".join(shlex.quote(x) for x in parts)


def _need_rl() -> None:
    try:
        import ray  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"training needs the rl extra (pip install -e '.[rl]'): {e}") from None


def _train(args) -> int:
    _need_rl()
    from baselines.ppo import evaluate, train

    opts = {"lr": args.lr, "epochs": args.epochs, "minibatch": args.minibatch, "gamma": args.gamma,
            "lambda_": args.gae_lambda,
            "entropy_coeff": args.entropy_coeff, "head": args.head, "hiddens": parse_hiddens(args.hiddens)}
    if args.train_batch:
        opts["train_batch"] = args.train_batch
    res = train(args.app, iterations=args.iterations, env_runners=args.env_runners,
                envs_per_runner=args.envs_per_runner, seed=args.seed, out=args.out, address=args.address,
                checkpoint_every=args.checkpoint_every, env_config=_env_config(args), **opts)
    print(f"checkpoint: {res['checkpoint']}")
    print(f"play it: sremarathon run --app {args.app} --policy ppo:{res['checkpoint']}")
    seeds = parse_seeds(args.eval_seeds)
    if seeds and res["checkpoint"]:
        from baselines.ppo import PPOPolicy

        ppo = evaluate(f"ppo:{res['checkpoint']}", args.app, seeds, res["env_config"])
        sampled = evaluate(PPOPolicy(res["checkpoint"], explore=True), args.app, seeds, res["env_config"])
        rnd = evaluate("random", args.app, seeds, res["env_config"])
        cmd = _command(args, ["app", "iterations", "env_runners", "envs_per_runner", "seed", "out",
                              "injection_s", "observation_s", "no_noise", "train_batch", "minibatch", "lr", "epochs", "gamma",
                              "gae_lambda", "entropy_coeff", "head", "hiddens", "eval_seeds"])
        mp, mr = sum(ppo) / len(ppo), sum(rnd) / len(rnd)
        print(f"evaluation on scenarios {args.eval_seeds} ({len(seeds)} marathons each):")
        print(f"  ppo (greedy, {res['checkpoint']}): mean {mp:.2f}  {[round(x, 1) for x in ppo]}")
        print(f"  ppo (sampled, seeded per run):   mean {sum(sampled) / len(sampled):.2f}  "
              f"{[round(x, 1) for x in sampled]}")
        print(f"  random:                          mean {mr:.2f}  {[round(x, 1) for x in rnd]}")
        print(f"  ppo - random = {mp - mr:+.2f}   command: {cmd}")
    last = res["rows"][-1]["mean_return"] if res["rows"] else math.nan
    return 0 if res["rows"] and not math.isnan(last) else 1


def _bench(args) -> int:
    _need_rl()
    from baselines.ppo import bench_sampling

    r = bench_sampling(args.app, env_runners=args.env_runners, envs_per_runner=args.envs_per_runner,
                       episodes_per_runner=args.episodes, env_config=_env_config(args), address=args.address)
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        print(f"RLlib sampling, {args.env_runners} runner(s) x {args.envs_per_runner} env(s), "
              f"{r['steps_per_runner']} steps per runner:")
        for k in ("trivial", "sremarathon"):
            print(f"  {k:12s} {r[k]['steps_per_s']:10.1f} env steps/s  ({r[k]['env_steps']} steps, {r[k]['seconds']} s;"
                  f" runner CPU {r[k]['cpu_ms_per_step']} ms/step)")
        print(f"  ratio sremarathon/trivial = {r['ratio']:.3f} wall, {r['ratio_cpu']} runner CPU (target >= 0.7)")
        print("  command: " + _command(args, ["app", "env_runners", "envs_per_runner", "injection_s", "observation_s",
                                              "no_noise", "episodes"]))
    return 0
