"""Parse and apply unified diffs (``git diff`` / ``diff -u`` output) to an in-memory source tree.

The applier is strict the way ``git apply`` is: every context and removed line of a hunk must match
the file exactly. A hunk may be found a few lines away from where its header says (an offset, as when
an earlier hunk changed the line count), but never with fuzz. Files can be modified, created
(``--- /dev/null``) or deleted (``+++ /dev/null``). Paths may carry git's ``a/`` and ``b/`` prefixes;
absolute paths and ``..`` components are rejected.

>>> tree = {"app/config.py": "TIMEOUT_MS = 100\\nRETRIES = 3\\n"}
>>> diff = '''--- a/app/config.py
... +++ b/app/config.py
... @@ -1,2 +1,2 @@
... -TIMEOUT_MS = 100
... +TIMEOUT_MS = 250
...  RETRIES = 3
... '''
>>> apply_diff(tree, diff)["app/config.py"]
'TIMEOUT_MS = 250\\nRETRIES = 3\\n'
>>> apply_diff(tree, diff.replace("RETRIES = 3", "RETRIES = 9"))
Traceback (most recent call last):
...
sremarathon_env.pipeline.diff.PatchError: app/config.py: hunk #1 does not apply (expected at line 1)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
DEV_NULL = "/dev/null"


class PatchError(ValueError):
    """A diff that is malformed or does not apply; the message names the file and hunk."""


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: list[tuple[str, str]] = field(default_factory=list)  # (' '|'-'|'+', text)
    old_no_eol: bool = False
    new_no_eol: bool = False


@dataclass
class FilePatch:
    old_path: str | None  # None: file is created
    new_path: str | None  # None: file is deleted
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def path(self) -> str:
        return self.new_path if self.new_path is not None else self.old_path  # type: ignore[return-value]


def safe_relpath(path: str) -> str | None:
    """The path normalised (``./`` dropped), or None when it is not a safe relative path."""
    if not path or "\x00" in path or "\\" in path or path.startswith("/") or len(path) > 512:
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    return "/".join(parts)


def _diff_path(raw: str, prefix: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name.startswith('"') and name.endswith('"') and len(name) >= 2:
        name = name[1:-1]
    if name == DEV_NULL:
        return None
    if name.startswith(prefix):
        name = name[len(prefix):]
    clean = safe_relpath(name)
    if clean is None:
        raise PatchError(f"unsafe path in diff header: {name!r}")
    return clean


def parse_diff(text: str) -> list[FilePatch]:
    """Split a unified diff into file patches. Raises `PatchError` for malformed input."""
    if not isinstance(text, str) or not text.strip():
        raise PatchError("empty diff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    patches: list[FilePatch] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line.startswith("--- "):
            i += 1  # git headers (diff --git, index, mode lines) and prose are skipped
            continue
        if i + 1 >= n or not lines[i + 1].startswith("+++ "):
            raise PatchError(f"line {i + 1}: '---' header without a following '+++' header")
        fp = FilePatch(_diff_path(line[4:], "a/"), _diff_path(lines[i + 1][4:], "b/"))
        if fp.old_path is None and fp.new_path is None:
            raise PatchError(f"line {i + 1}: both sides are {DEV_NULL}")
        i += 2
        while i < n and lines[i].startswith("@@"):
            m = _HUNK_RE.match(lines[i])
            if not m:
                raise PatchError(f"line {i + 1}: malformed hunk header {lines[i][:80]!r}")
            h = Hunk(int(m[1]), int(m[2]) if m[2] is not None else 1, int(m[3]), int(m[4]) if m[4] is not None else 1)
            hunk_no = len(fp.hunks) + 1
            i += 1
            old_seen = new_seen = 0
            while i < n and (old_seen < h.old_len or new_seen < h.new_len):
                ln = lines[i]
                tag, body = (ln[:1], ln[1:]) if ln else (" ", "")  # an empty line is empty context
                if tag == "\\":  # "\ No newline at end of file" refers to the line before it
                    last = h.lines[-1][0] if h.lines else " "
                    h.old_no_eol |= last in (" ", "-")
                    h.new_no_eol |= last in (" ", "+")
                    i += 1
                    continue
                if tag not in (" ", "-", "+"):
                    break
                if tag in (" ", "-"):
                    old_seen += 1
                if tag in (" ", "+"):
                    new_seen += 1
                h.lines.append((tag, body))
                i += 1
            if old_seen != h.old_len or new_seen != h.new_len:
                raise PatchError(f"{fp.path}: hunk #{hunk_no} is truncated or miscounted "
                                 f"(header says -{h.old_len} +{h.new_len}, body has -{old_seen} +{new_seen})")
            while i < n and lines[i].startswith("\\"):  # "\ No newline at end of file" after the hunk
                last = h.lines[-1][0] if h.lines else " "
                if last in (" ", "-"):
                    h.old_no_eol = True
                if last in (" ", "+"):
                    h.new_no_eol = True
                i += 1
            fp.hunks.append(h)
        if not fp.hunks:
            raise PatchError(f"{fp.path}: file header without any hunk")
        patches.append(fp)
    if not patches:
        raise PatchError("no file headers ('--- a/path' / '+++ b/path') found in the diff")
    return patches


def _split(text: str) -> tuple[list[str], bool]:
    if text == "":
        return [], True
    parts = text.split("\n")
    if parts[-1] == "":
        return parts[:-1], True
    return parts, False


def _find(lines: list[str], old: list[str], want: int) -> int | None:
    """Position where ``old`` matches exactly, nearest to ``want`` (ties: earlier)."""
    if not old:
        return min(max(want, 0), len(lines))
    top = len(lines) - len(old)
    if top < 0:
        return None
    want = min(max(want, 0), top)
    for delta in range(top + 1):
        for pos in (want - delta, want + delta) if delta else (want,):
            if 0 <= pos <= top and lines[pos:pos + len(old)] == old:
                return pos
    return None


def apply_file_patch(text: str | None, fp: FilePatch) -> str | None:
    """Apply one file's hunks; returns the new text or None when the file is deleted."""
    if fp.old_path is None and text is not None:
        raise PatchError(f"{fp.path}: diff creates the file but it already exists")
    if fp.old_path is not None and text is None:
        raise PatchError(f"{fp.old_path}: no such file")
    lines, eol = _split(text or "")
    offset = 0
    for k, h in enumerate(fp.hunks, start=1):
        old = [b for t, b in h.lines if t != "+"]
        new = [b for t, b in h.lines if t != "-"]
        want = (h.old_start - 1 if h.old_len else h.old_start) + offset
        pos = _find(lines, old, want)
        if pos is None:
            raise PatchError(f"{fp.path}: hunk #{k} does not apply (expected at line {h.old_start})")
        lines[pos:pos + len(old)] = new
        offset += len(new) - len(old)
        if pos + len(new) == len(lines):  # the hunk reaches end of file: it decides the final newline
            if h.new_no_eol:
                eol = False
            elif h.old_no_eol or not lines or fp.old_path is None:
                eol = True
    if fp.new_path is None:
        if lines:
            raise PatchError(f"{fp.old_path}: diff deletes the file but lines would remain")
        return None
    return "\n".join(lines) + ("\n" if eol and lines else "")


def apply_diff(tree: dict[str, str], diff: str) -> dict[str, str]:
    """Apply a unified diff to ``tree`` (path -> text) and return the new tree (``tree`` is not
    modified). Raises `PatchError` naming the first file and hunk that failed."""
    out = dict(tree)
    for fp in parse_diff(diff):
        if fp.old_path is not None and fp.new_path is not None and fp.old_path != fp.new_path:
            if fp.new_path in out:
                raise PatchError(f"{fp.old_path}: rename target {fp.new_path} already exists")
            text = apply_file_patch(out.get(fp.old_path), fp)
            del out[fp.old_path]
            out[fp.new_path] = text  # type: ignore[assignment]
            continue
        key = fp.old_path if fp.old_path is not None else fp.new_path
        result = apply_file_patch(out.get(key), fp)  # type: ignore[arg-type]
        if result is None:
            del out[key]  # type: ignore[arg-type]
        else:
            out[key] = result  # type: ignore[index]
    return out


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or modified, sorted."""
    keys = set(before) | set(after)
    return sorted(k for k in keys if before.get(k) != after.get(k))


__all__ = ["PatchError", "FilePatch", "Hunk", "parse_diff", "apply_diff", "apply_file_patch", "changed_paths",
           "safe_relpath"]
