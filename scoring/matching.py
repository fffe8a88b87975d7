"""How agent-written names are compared with the ground truth.

- `norm`: case-insensitive, all whitespace removed, surrounding quotes/backticks stripped.
- `artifact_matches`: the agent's artifact string equals the canonical name or an alias after `norm`;
  for ``kind == "commit"`` a hex string of 7 or more characters also matches when one of the two is a
  prefix of the other (short and full SHAs).
- `culprits_match`: the normalised culprit sets are equal (exactly, no more and no fewer).
- `alert_scope_values`: the label values by which an alert falls in a fault's scope: the labels named
  in `SCOPE_LABELS`.

>>> art = {"kind": "commit", "canonical": "9f1c2ab77e0d", "aliases": ["cartservice@9f1c2ab"]}
>>> artifact_matches(" 9F1C2AB ", art), artifact_matches("9f1c2a", art), artifact_matches("CartService@9f1c2ab", art)
(True, False, True)
>>> culprits_match(["CartService", "redis-cart"], ["redis-cart", "cartservice"])
True
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable

#: label names whose values place an alert in a fault's scope (services, nodes, zones, and the entry
#: service of an entry-path alert)
SCOPE_LABELS: tuple[str, ...] = ("service", "node", "zone", "entry_service")
MIN_SHA_PREFIX = 7
_HEX = re.compile(r"[0-9a-f]+")


def norm(s: str) -> str:
    return "".join(s.split()).strip("`'\"").lower()


def artifact_matches(written: str | None, artifact: dict[str, Any]) -> bool:
    if not written:
        return False
    w = norm(written)
    if not w:
        return False
    names = [norm(artifact["canonical"]), *(norm(a) for a in artifact.get("aliases", ()))]
    if w in names:
        return True
    if artifact.get("kind") == "commit" and len(w) >= MIN_SHA_PREFIX and _HEX.fullmatch(w):
        for n in names:
            if len(n) >= MIN_SHA_PREFIX and _HEX.fullmatch(n) and (n.startswith(w) or w.startswith(n)):
                return True
    return False


def with_aliases(fault: dict[str, Any], aliases: Iterable[str]) -> dict[str, Any]:
    """A copy of a schedule fault whose artifact also accepts ``aliases`` (names received when the
    fault was realised: a commit's sha, ``service@revision``)."""
    art = dict(fault["artifact"])
    art["aliases"] = [*art.get("aliases", ()), *(a for a in aliases if a not in art.get("aliases", ()))]
    return {**fault, "artifact": art}


def culprits_match(written: Iterable[str], culprits: Iterable[str]) -> bool:
    w = {norm(c) for c in written}
    return bool(w) and w == {norm(c) for c in culprits}


def alert_scope_values(labels: dict[str, str]) -> frozenset[str]:
    g = labels.get
    return _scope_values(g("service"), g("node"), g("zone"), g("entry_service"))


@lru_cache(maxsize=4096)
def _scope_values(*values: str | None) -> frozenset[str]:
    return frozenset(norm(v) for v in values if v)


def fault_scope(fault: dict[str, Any]) -> frozenset[str]:
    """A fault's scope for alerts and actions: its scope list plus its culprits, normalised."""
    return frozenset(norm(s) for s in [*fault["scope"], *fault["culprits"]])
