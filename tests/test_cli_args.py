"""Bad command-line input: one ``error:`` line naming the argument, exit status 2, no traceback and no work done."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from sremarathon_env import cli_args
from sremarathon_env.cli import main

BAD = [
    (["run", "--app", "bogus"], "argument --app: unknown app 'bogus'"),
    (["run", "--policy", "bogus"], "argument --policy: unknown policy 'bogus'"),
    (["run", "--seed", "-1"], "argument --seed: must be >= 0, got -1"),
    (["run", "--seed", "x"], "argument --seed: not an integer: 'x'"),
    (["run", "--policy", "ppo:/no/such/dir"], "argument --policy: ppo:PATH needs a checkpoint directory"),
    (["run", "--injection-s", "0"], "argument --injection-s: must be >= 1, got 0"),
    (["run", "--observation-s", "-5"], "argument --observation-s: must be >= 0, got -5"),
    (["sweep", "--apps", "online-boutique,bogus"], "argument --apps: unknown app(s) 'bogus'"),
    (["sweep", "--apps", ","], "argument --apps: no apps in ','"),
    (["sweep", "--seeds", "5-1"], "argument --seeds: bad seed range '5-1'"),
    (["sweep", "--policies", "noop,nope"], "argument --policies: unknown policy 'nope'"),
    (["sweep", "--workers", "0"], "argument --workers: must be >= 1, got 0"),
    (["bench", "--apps", "bogus"], "argument --apps: unknown app 'bogus'"),
    (["bench", "--repeat", "0"], "argument --repeat: must be >= 1, got 0"),
    (["bench", "--sections", "twn"], "argument --sections: invalid choice: 'twn'"),
    (["train", "--app", "bogus"], "argument --app: unknown app 'bogus'"),
    (["train", "--iterations", "0"], "argument --iterations: must be >= 1, got 0"),
    (["train-bench", "--envs-per-runner", "0"], "argument --envs-per-runner: must be >= 1, got 0"),
    # checked before training starts (they were read only after the last iteration)
    (["train", "--eval-seeds", "9-3"], "argument --eval-seeds: bad seed list '9-3'"),
    (["train", "--hiddens", "64,0"], "argument --hiddens: bad --hiddens '64,0'"),
    (["train", "--gamma", "1.5"], "argument --gamma: must be in (0, 1], got 1.5"),
    (["train", "--gae-lambda", "0"], "argument --gae-lambda: must be in (0, 1], got 0.0"),
    (["train", "--lr=-1e-3"], "argument --lr: must be a finite number > 0, got -1e-3"),
    (["train", "--entropy-coeff", "nan"], "argument --entropy-coeff: must be a finite number >= 0, got nan"),
    (["train", "--epochs", "0"], "argument --epochs: must be >= 1, got 0"),
    (["train", "--minibatch", "-4"], "argument --minibatch: must be >= 1, got -4"),
    (["train", "--train-batch", "0"], "argument --train-batch: must be >= 1, got 0"),
    (["schedule", "--app", "bogus", "--seed", "0"], "argument --app: unknown app 'bogus'"),
    (["schedule", "--seed", "-3"], "argument --seed: must be >= 0, got -3"),
    (["schedule", "--noise-rate", "-1"], "argument --noise-rate: must be a finite number >= 0, got -1"),
    (["schedule", "--stats", "--seeds", "x"], "argument --seeds: bad seed 'x'"),
    (["faults", "list", "--app", "bogus"], "argument --app: unknown app 'bogus'"),
    (["faults", "detect", "--limit", "-1"], "argument --limit: must be >= 0, got -1"),
    (["faults", "validate", "--seed", "x"], "argument --seed: not an integer: 'x'"),
    (["cluster", "up", "--app", "bogus"], "argument --app: unknown app 'bogus'"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_argument_is_one_error_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"sremarathon {argv[0]}" in err and message in err, err
    assert "Traceback" not in err


def test_good_arguments_parse_to_values():
    from sremarathon_env.cli import build_parser

    a = build_parser().parse_args(["sweep", "--apps", "all", "--seeds", "3,0-1", "--policies", "noop, keep",
                                   "--workers", "1", "--injection-s", "600", "--observation-s", "0"])
    assert a.apps == ["online-boutique", "train-ticket", "astronomy-shop"]
    assert (a.seeds, a.policies, a.workers, a.injection_s, a.observation_s) == ([0, 1, 3], ["noop", "keep"], 1, 600, 0)
    r = build_parser().parse_args(["run", "--app", "astronomy-shop", "--seed", "7", "--policy", "oracle"])
    assert (r.app, r.seed, r.policy) == ("astronomy-shop", 7, "oracle")
    # train keeps --eval-seeds and --hiddens as given (they are printed in the reproduction command)
    t = build_parser().parse_args(["train", "--eval-seeds", "100-102", "--hiddens", "64,32", "--gamma", "1",
                                   "--lr", "1e-3", "--entropy-coeff", "0"])
    assert (t.eval_seeds, t.hiddens, t.gamma, t.lr, t.entropy_coeff) == ("100-102", "64,32", 1.0, 1e-3, 0.0)
    s = build_parser().parse_args(["schedule", "--app", "train-ticket", "--seed", "0", "--noise-rate", "0.5"])
    assert (s.app, s.seed, s.noise_rate) == ("train-ticket", 0, 0.5)


def test_ppo_spec_accepts_an_existing_directory(tmp_path):
    assert cli_args.policy_spec(f"ppo:{tmp_path}") == f"ppo:{tmp_path}"
    with pytest.raises(argparse.ArgumentTypeError, match="checkpoint directory"):
        cli_args.policy_spec("ppo:")


def test_view_of_a_non_bundle_is_an_error_line(tmp_path, capsys):
    assert main(["view", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "records.jsonl" in err


def test_react_without_endpoint_is_an_error_line(monkeypatch, capsys):
    for k in ("SREMARATHON_LLM_BASE_URL", "SREMARATHON_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(k, raising=False)
    assert main(["run", "--policy", "react", "--injection-s", "120", "--observation-s", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: policy react: react needs an endpoint")


def test_console_script_prints_no_traceback():
    """The same through a real process (what users type)."""
    p = subprocess.run([sys.executable, "-m", "sremarathon_env.cli", "run", "--app", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "unknown app 'nope'" in p.stderr and "Traceback" not in p.stderr
