"""App models as data: Online Boutique, Train Ticket and Astronomy Shop, plus user-defined apps.

>>> from apps import load_app, APP_NAMES
>>> APP_NAMES
('online-boutique', 'train-ticket', 'astronomy-shop')
>>> load_app("online-boutique").display_name
'Online Boutique'
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from apps.spec import AppSpec

DATA_DIR = Path(__file__).parent / "data"
APP_NAMES = ("online-boutique", "train-ticket", "astronomy-shop")


class AppSpecError(ValueError):
    """A malformed app file. ``errors`` lists (field path, message) pairs."""

    def __init__(self, source: str, errors: list[tuple[str, str]]):
        self.source = source
        self.errors = errors
        lines = "\n".join(f"  {loc}: {msg}" for loc, msg in errors)
        super().__init__(f"invalid app spec {source}:\n{lines}")


def parse_app(data: dict, source: str = "<dict>") -> AppSpec:
    """Validate a mapping as an `AppSpec`, raising `AppSpecError` naming every bad field."""
    if not isinstance(data, dict):
        raise AppSpecError(source, [("<root>", f"expected a mapping, got {type(data).__name__}")])
    try:
        return AppSpec.model_validate(data)
    except ValidationError as exc:
        errs = []
        for e in exc.errors():
            loc = ".".join(str(p) for p in e["loc"]) or "<root>"
            msg = e["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            errs.append((loc, msg))
        raise AppSpecError(source, errs) from None


def load_app_file(path: str | Path) -> AppSpec:
    """Load a user-defined app from a YAML file in the `AppSpec` schema."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise AppSpecError(str(p), [("<yaml>", str(exc))]) from None
    return parse_app(data, str(p))


@lru_cache(maxsize=None)
def load_app(name: str) -> AppSpec:
    """Load a bundled app by name (``online-boutique``, ``train-ticket``, ``astronomy-shop``) or a
    path to a YAML file."""
    if name in APP_NAMES:
        return load_app_file(DATA_DIR / f"{name}.yaml")
    if name.endswith((".yaml", ".yml")):
        return load_app_file(name)
    raise KeyError(f"unknown app {name!r}; known: {', '.join(APP_NAMES)} or a path to a .yaml file")


__all__ = ["AppSpec", "AppSpecError", "APP_NAMES", "load_app", "load_app_file", "parse_app"]
