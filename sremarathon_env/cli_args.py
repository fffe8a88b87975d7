"""Argument types shared by the ``sremarathon`` subcommands: bad input is refused by argparse with one
``error:`` line naming the argument (exit status 2), before any work starts, instead of a traceback from
deep inside a run.

>>> import argparse
>>> p = argparse.ArgumentParser(prog="demo", exit_on_error=False)
>>> _ = p.add_argument("--app", type=app_name)
>>> _ = p.add_argument("--seeds", type=seed_list)
>>> p.parse_args(["--app", "train-ticket", "--seeds", "0-2,7"])
Namespace(app='train-ticket', seeds=[0, 1, 2, 7])
>>> try:
...     p.parse_args(["--app", "bogus"])
... except argparse.ArgumentError as e:
...     print(e)
argument --app: unknown app 'bogus'; available: online-boutique, train-ticket, astronomy-shop
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _available_apps() -> list[str]:
    from faults.catalogue import catalogue_apps

    return catalogue_apps()


def app_name(text: str) -> str:
    """An app with a model and a fault catalogue (what runs, schedules and training need)."""
    avail = _available_apps()
    if text not in avail:
        raise argparse.ArgumentTypeError(f"unknown app {text!r}; available: {', '.join(avail)}")
    return text


def app_list(text: str) -> list[str]:
    """``all`` or comma-separated app names."""
    avail = _available_apps()
    if text.strip() == "all":
        return list(avail)
    out = [a.strip() for a in text.split(",") if a.strip()]
    if not out:
        raise argparse.ArgumentTypeError(f"no apps in {text!r}; use 'all' or names from: {', '.join(avail)}")
    bad = [a for a in out if a not in avail]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown app(s) {', '.join(repr(b) for b in bad)}; "
                                         f"available: {', '.join(avail)}")
    return out


def seed_list(text: str) -> list[int]:
    """``0-19``, ``0,3,5`` or a mix (`sremarathon_env.seeds.parse_seeds`)."""
    from sremarathon_env.seeds import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def non_negative_int(text: str) -> int:
    """An integer >= 0 (seeds, counts that may be zero)."""
    v = _int(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (rates, coefficients)."""
    v = _float(text)
    if not (v >= 0.0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return v


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates)."""
    v = _float(text)
    if not (v > 0.0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return v


def fraction(text: str) -> float:
    """A number in (0, 1] (discounts, GAE lambda)."""
    v = _float(text)
    if not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {v}")
    return v


def positive_int(text: str) -> int:
    """An integer >= 1 (durations in seconds, repetitions, iterations)."""
    v = _int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def policy_spec(text: str) -> str:
    """A baseline policy name, or ``ppo:PATH`` with PATH an existing checkpoint directory."""
    from baselines import POLICY_NAMES

    name, sep, arg = text.partition(":")
    if name == "ppo" and sep:
        if not arg or not Path(arg).is_dir():
            raise argparse.ArgumentTypeError(f"ppo:PATH needs a checkpoint directory, {arg!r} is none")
        return text
    if text not in POLICY_NAMES:
        raise argparse.ArgumentTypeError(f"unknown policy {text!r}; expected one of {', '.join(POLICY_NAMES)} "
                                         "or ppo:PATH")
    return text


def policy_list(text: str) -> list[str]:
    """Comma-separated policy specs (each as `policy_spec`)."""
    out = [policy_spec(p.strip()) for p in text.split(",") if p.strip()]
    if not out:
        raise argparse.ArgumentTypeError(f"no policies in {text!r}")
    return out
