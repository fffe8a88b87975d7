"""Apply a unified diff (``a/`` ``b/`` paths, as `faults.catalogue.change_diff` writes) to source files.

Context lines must match exactly; a hunk that does not apply raises `DiffError` naming the file and
hunk. Files are read through a callable so this works on any backend's source.

>>> old = {"x.py": "a\\nb\\nc\\n"}
>>> d = "--- a/x.py\\n+++ b/x.py\\n@@ -1,3 +1,3 @@\\n a\\n-b\\n+B\\n c\\n"
>>> apply_unified_diff(d, old.get)
{'x.py': 'a\\nB\\nc\\n'}
"""

from __future__ import annotations

import re
from typing import Callable

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DiffError(ValueError):
    pass


def apply_unified_diff(diff: str, read: Callable[[str], str | None]) -> dict[str, str]:
    """New contents of every file the diff touches."""
    out: dict[str, str] = {}
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise DiffError("malformed diff: '---' without '+++'")
        path = lines[i + 1][4:].strip()
        path = path[2:] if path.startswith("b/") else path
        text = out.get(path)
        if text is None:
            text = read(path)
        if text is None:
            raise DiffError(f"{path}: no such file")
        src = text.splitlines(keepends=True)
        i += 2
        result: list[str] = []
        pos = 0
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise DiffError(f"{path}: malformed hunk header {lines[i]!r}")
            start = int(m.group(1)) - (1 if int(m.group(2) or 1) > 0 else 0)
            result.extend(src[pos:start])
            pos = start
            i += 1
            while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
                tag, body = lines[i][:1], lines[i][1:]
                if tag == "\\":
                    i += 1
                    continue
                if tag in (" ", "-"):
                    if pos >= len(src) or src[pos].rstrip("\n") != body.rstrip("\n"):
                        raise DiffError(f"{path}: hunk does not apply at line {pos + 1}")
                    if tag == " ":
                        result.append(src[pos])
                    pos += 1
                else:
                    result.append(body)
                i += 1
        result.extend(src[pos:])
        out[path] = "".join(result)
    if not out:
        raise DiffError("the diff touches no file")
    return out
