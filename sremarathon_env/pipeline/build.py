"""The build pipeline every source change goes through: apply the diff, lint, run the unit tests.

Agent patches (`patch_source`) and change-driven faults use the same pipeline, so a fault's diff is
subject to exactly the checks an agent's fix is. Stages, in order:

1. ``apply``: the unified diff is applied with exact context matching (`pipeline.diff`).
2. ``lint``: every file of the new tree must parse: Python with `ast`, JSON/YAML/TOML/XML with their
   parsers, other languages with a structural check (`apps.sources.lint`).
3. ``unit_tests``: the service's unit-test predicates (`apps.sources.unit_tests`) must all pass.

A build that passes returns the full new tree; deploying it (a new revision, normal rollout) is the
caller's job (`Backend.deploy`). `build` never raises: a bad diff or a broken tree is a failed
`BuildResult` whose ``log`` says why, like a CI log.

>>> from apps import load_app
>>> from apps.sources import initial_tree, config_path
>>> ob = load_app("online-boutique")
>>> tree = initial_tree(ob, "frontend")
>>> path = config_path(ob, "frontend")
>>> line = next(l for l in tree[path].splitlines() if "timeout_ms: 100" in l)
>>> diff = make_diff(tree, {**tree, path: tree[path].replace(line, line.replace("100", "250"), 1)})
>>> r = BuildPipeline(ob).build("frontend", tree, diff)
>>> r.ok, r.stage_failed, r.changed == [path]
(True, None, True)
>>> bad = BuildPipeline(ob).build("frontend", tree, diff.replace("250", "-5"))
>>> bad.ok, bad.stage_failed
(False, 'unit_tests')
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Literal

from apps.spec import AppSpec
from sremarathon_env.pipeline.diff import PatchError, apply_diff, changed_paths, safe_relpath

Stage = Literal["apply", "lint", "unit_tests"]

#: Largest diff the pipeline accepts (characters).
MAX_DIFF_CHARS = 256 * 1024

#: `BuildPipeline.build_change` results kept (insertion order; the app is kept so that its id stays its own)
CHANGE_CACHE = 256
_CHANGES: dict[tuple, tuple[AppSpec, "BuildResult"]] = {}


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    files: dict[str, str]  # the new tree when ok, else the unchanged base tree
    log: str
    stage_failed: Stage | None = None
    changed: list[str] = field(default_factory=list)
    tests: list[tuple[str, bool, str]] = field(default_factory=list)

    def to_json(self) -> dict:
        """JSON-able summary (without the file contents)."""
        return {"ok": self.ok, "stage_failed": self.stage_failed, "changed": list(self.changed),
                "tests_passed": sum(1 for _, ok, _ in self.tests if ok),
                "tests_failed": [name for name, ok, _ in self.tests if not ok], "log": self.log}


def make_diff(before: dict[str, str], after: dict[str, str], context: int = 3) -> str:
    """A unified diff (git style, ``a/`` and ``b/`` prefixes) turning ``before`` into ``after``."""
    return "".join(_file_diff(path, before.get(path), after.get(path), context)
                   for path in changed_paths(before, after))


@lru_cache(maxsize=1024)
def _file_diff(path: str, a: str | None, b: str | None, context: int) -> str:
    """One file's part of `make_diff` (cached by content: the scored run and its no-action reference run
    build the same changes, and so does every run of the same scenario)."""
    out: list[str] = []
    lines = difflib.unified_diff(
        (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
        fromfile=f"a/{path}" if a is not None else "/dev/null",
        tofile=f"b/{path}" if b is not None else "/dev/null", n=context)
    for ln in lines:
        if ln.endswith("\n"):
            out.append(ln)
        else:
            out.append(ln + "\n")
            out.append("\\ No newline at end of file\n")
    return "".join(out)


#: path characters for which `_round_trips` vouches (the diff header then names the path as it is)
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)*")
#: line boundaries of str.splitlines other than a newline (difflib splits at them, the applier does not)
_ODD_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _odd_breaks(text: str) -> bool:
    """Whether ``text`` holds a line boundary of str.splitlines other than a newline (`_ODD_BREAKS`; for an
    ASCII text, the six ASCII ones looked up with ``in``, which is ~30x faster than the regex)."""
    if text.isascii():
        return "\r" in text or "\x0b" in text or "\x0c" in text or "\x1c" in text or "\x1d" in text or "\x1e" in text
    return _ODD_BREAKS.search(text) is not None


def _round_trips(base: dict[str, str], after: dict[str, str], paths: list[str]) -> bool:
    """Whether ``apply_diff(base, make_diff(base, after))`` is ``after`` and `BuildPipeline.build` accepts that
    diff, so that `BuildPipeline.build_change` may skip writing and applying it: every changed path is a file
    of both trees (a modification, not a creation or deletion) and a plain safe relative path, both texts
    break lines at newlines only (difflib's ``splitlines`` and the applier's ``split`` then see the same
    lines; the "No newline at end of file" markers carry a missing final newline), and a bound on the diff's
    length (every line of either text once, with its prefix and newline, two end-of-file markers, at most one
    hunk header per line) stays within `MAX_DIFF_CHARS`. The hunks of such a diff hold the old file's lines
    at the positions their headers name, so the applier matches them there.
    (tests/pipeline/test_pipeline_fastpath.py compares both ways on catalogue changes and odd texts.)

    >>> _round_trips({"a.go": "x\\n"}, {"a.go": "y\\n"}, ["a.go"]), _round_trips({}, {"a.go": "y\\n"}, ["a.go"])
    (True, False)
    >>> _round_trips({"a.go": "x\\r\\n"}, {"a.go": "y\\r\\n"}, ["a.go"])
    False
    """
    size = 0
    for p in paths:
        a, b = base.get(p), after.get(p)
        if (not isinstance(a, str) or not isinstance(b, str) or _PLAIN_PATH.fullmatch(p) is None
                or safe_relpath(p) != p or _odd_breaks(a) or _odd_breaks(b)):
            return False
        la, lb = a.count("\n") + 1, b.count("\n") + 1
        digits = len(str(max(la, lb) + 1))
        size += 2 * len(p) + 16 + len(a) + len(b) + 2 * (la + lb) + 64 + (la + lb) * (12 + 4 * digits)
    return size <= MAX_DIFF_CHARS


class BuildPipeline:
    """Apply -> lint -> unit tests for one app's services."""

    def __init__(self, app: AppSpec):
        self.app = app

    @staticmethod
    def current_tree(backend: Any, service: str) -> dict[str, str]:
        """The service's source as the backend's current revision has it."""
        tree = {}
        for p in backend.source_files(service) or []:
            text = backend.read_source(service, p)
            if text is not None:
                tree[p] = text
        return tree

    def build_change(self, backend: Any, service: str, changed: dict[str, str]) -> BuildResult:
        """Build the service's current source with ``changed`` files replaced, as the diff of that change
        (how change-driven faults and benign changes enter the same pipeline as the agent's patches).

        A pure function of the app, the service, its current tree and the change: results are kept for the
        latest `CHANGE_CACHE` changes (a scored run and its no-action reference run build the same changes),
        and every call gets its own copies of the result's tree and lists."""
        base = self.current_tree(backend, service)
        key = (id(self.app), service, tuple(sorted(base.items())), tuple(sorted(changed.items())))
        hit = _CHANGES.get(key)
        if hit is None or hit[0] is not self.app:
            if len(_CHANGES) >= CHANGE_CACHE:
                del _CHANGES[next(iter(_CHANGES))]   # the oldest entry
            after = {**base, **changed}
            paths = changed_paths(base, after)
            if service in self.app.service_names and paths and _round_trips(base, after, paths):
                # what applying make_diff(base, after) gives: `after` itself (see `_round_trips`)
                result = self._check(service, dict(base), after, paths, [self._head(service)])
            else:
                result = self.build(service, base, make_diff(base, after))
            hit = _CHANGES[key] = (self.app, result)
        r = hit[1]
        return replace(r, files=dict(r.files), changed=list(r.changed), tests=list(r.tests))

    def build(self, service: str, base_files: dict[str, str], diff: str) -> BuildResult:
        base = dict(base_files)
        log = [self._head(service)]
        if service not in self.app.service_names:
            log.append(f"error: unknown service {service!r}")
            return BuildResult(False, base, "\n".join(log), "apply")
        if not isinstance(diff, str) or len(diff) > MAX_DIFF_CHARS:
            log.append(f"error: the diff must be a string of at most {MAX_DIFF_CHARS} characters")
            return BuildResult(False, base, "\n".join(log), "apply")
        # 1. apply
        try:
            tree = apply_diff(base, diff)
        except PatchError as exc:
            log.append(f"[apply] FAILED: {exc}")
            return BuildResult(False, base, "\n".join(log), "apply")
        changed = changed_paths(base, tree)
        if not changed:
            log.append("[apply] FAILED: the diff changes nothing")
            return BuildResult(False, base, "\n".join(log), "apply")
        return self._check(service, base, tree, changed, log)

    def _head(self, service: str) -> str:
        """The first line of a build's log."""
        return f"build {self.app.name}/{service}"

    def _check(self, service: str, base: dict[str, str], tree: dict[str, str], changed: list[str],
               log: list[str]) -> BuildResult:
        """The rest of `build` once the diff applied to ``tree``, changing the files ``changed``: the apply stage's
        log line, then stages 2 and 3 (``log`` holds the lines before)."""
        log.append(f"[apply] ok: {len(changed)} file(s) changed: {', '.join(changed)}")
        # 2. lint
        from apps import sources

        try:
            errors = sources.lint(self.app, service, tree)
        except Exception as exc:  # noqa: BLE001 - a linter crash is a failed build, not a crash of the run
            errors = [f"linter error: {type(exc).__name__}: {exc}"]
        if errors:
            log.append(f"[lint] FAILED: {len(errors)} error(s)")
            log.extend(f"  {e}" for e in errors)
            return BuildResult(False, base, "\n".join(log), "lint", changed)
        log.append(f"[lint] ok: {len(tree)} file(s) parsed")
        # 3. unit tests
        try:
            tests = [(str(n), bool(ok), str(m)) for n, ok, m in sources.unit_tests(self.app, service, tree)]
        except Exception as exc:  # noqa: BLE001
            tests = [("test_runner", False, f"{type(exc).__name__}: {exc}")]
        failed = [t for t in tests if not t[1]]
        for name, ok, msg in tests:
            if not ok:
                log.append(f"  FAIL {name}: {msg}")
        if failed:
            log.append(f"[unit_tests] FAILED: {len(failed)} of {len(tests)} failed")
            return BuildResult(False, base, "\n".join(log), "unit_tests", changed, tests)
        log.append(f"[unit_tests] ok: {len(tests)} passed")
        return BuildResult(True, tree, "\n".join(log), None, changed, tests)


__all__ = ["BuildPipeline", "BuildResult", "MAX_DIFF_CHARS", "make_diff"]
