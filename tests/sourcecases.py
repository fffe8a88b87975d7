"""Shared inputs of the sources and pipeline tests: every catalogue change applied to its service's initial tree,
a random text mutation, and a backend's source reads over one tree.

>>> import numpy as np
>>> mutate("a: 1\\nb: 2\\n", np.random.default_rng(0), [":"]) != "a: 1\\nb: 2\\n"
True
"""

from __future__ import annotations

import numpy as np

from apps import load_app
from apps.sources import initial_tree
from faults.catalogue import apply_changes, catalogue_apps, load_catalogue


def deploy_changes(with_initial: bool = False) -> list[tuple]:
    """(app, service, initial tree, changed tree, the change's file paths) for every change-driven fault (a deploy
    with files) of every catalogue app whose edits apply to the service's initial tree, app by app in catalogue
    order; with ``with_initial``, each app's initial trees first, as (app, service, tree, None, ())."""
    out = []
    for name in catalogue_apps():
        app = load_app(name)
        trees = {s: initial_tree(app, s) for s in app.service_names}
        if with_initial:
            out.extend((app, s, tree, None, ()) for s, tree in trees.items())
        for f in load_catalogue(name):
            r = f.realisation
            if r.kind != "deploy" or not r.files:
                continue
            try:
                changed = apply_changes(trees[r.service], list(r.files))
            except Exception:   # an edit that does not apply to the initial tree
                continue
            out.append((app, r.service, trees[r.service], changed, tuple(fc.path for fc in r.files)))
    return out


def mutate(text: str, rng: np.random.Generator, chars: list[str]) -> str:
    """One random edit: delete a character, insert one of ``chars``, duplicate or swap lines, or re-indent a line."""
    lines = text.split("\n")
    k = int(rng.integers(5))
    if k == 0 and text:                                        # delete a character
        i = int(rng.integers(len(text)))
        return text[:i] + text[i + 1:]
    if k == 1:                                                 # insert a special character
        i = int(rng.integers(len(text) + 1))
        return text[:i] + chars[int(rng.integers(len(chars)))] + text[i:]
    if k == 2 and len(lines) > 1:                              # duplicate a line
        i = int(rng.integers(len(lines)))
        return "\n".join(lines[:i + 1] + lines[i:])
    if k == 3 and len(lines) > 1:                              # swap two lines
        i, j = (int(x) for x in rng.integers(len(lines), size=2))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines)
    i = int(rng.integers(len(lines)))                          # re-indent a line
    return "\n".join(lines[:i] + [" " * int(rng.integers(1, 4)) + lines[i]] + lines[i + 1:])


class SourcesOf:
    """A backend's source reads: one service's current tree."""

    def __init__(self, service, tree):
        self.service, self.tree = service, tree

    def source_files(self, service):
        return sorted(self.tree) if service == self.service else []

    def read_source(self, service, path):
        return self.tree.get(path) if service == self.service else None
