"""The agent's persistent workspace: a small text file system that survives across invocations.

Paths are safe relative paths (``notes/plan.md``): no ``..``, no absolute paths, no NUL bytes, no
backslashes. Sizes are capped per file, in total and in file count (`Limits`). Violations raise a
`WorkspaceError` with a ``kind`` the tool layer maps to a structured error.

>>> ws = Workspace()
>>> ws.write("notes/plan.md", "check cartservice")
17
>>> ws.write("notes/plan.md", "\\nthen redis", mode="append")
28
>>> ws.list()
[{'path': 'notes/plan.md', 'bytes': 28}]
>>> ws.write("../etc/passwd", "x")
Traceback (most recent call last):
...
sremarathon_env.tools.workspace.WorkspaceError: unsafe path '../etc/passwd': use a relative path without '..', '\\\\' or NUL
"""

from __future__ import annotations

from typing import Literal

from sremarathon_env.pipeline.diff import safe_relpath
from sremarathon_env.tools.limits import Limits


class WorkspaceError(ValueError):
    def __init__(self, kind: Literal["unsafe_path", "not_found", "too_large"], message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def check_path(path: str) -> str:
    clean = safe_relpath(path) if isinstance(path, str) else None
    if clean is None:
        raise WorkspaceError("unsafe_path", f"unsafe path {path!r}: use a relative path without '..', '\\\\' or NUL")
    return clean


class Workspace:
    def __init__(self, limits: Limits | None = None):
        self.limits = limits or Limits()
        self._files: dict[str, str] = {}
        self._bytes: dict[str, int] = {}

    @property
    def total_bytes(self) -> int:
        return sum(self._bytes.values())

    def list(self) -> list[dict]:
        return [{"path": p, "bytes": self._bytes[p]} for p in sorted(self._files)]

    def read(self, path: str) -> str:
        p = check_path(path)
        if p not in self._files:
            raise WorkspaceError("not_found", f"no workspace file {p!r}")
        return self._files[p]

    def write(self, path: str, content: str, mode: Literal["overwrite", "append"] = "overwrite") -> int:
        """Write (or append to) a file; returns its new size in bytes."""
        p = check_path(path)
        new = (self._files.get(p, "") + content) if mode == "append" else content
        size = len(new.encode("utf-8", errors="surrogatepass"))
        lim = self.limits
        if size > lim.workspace_file_bytes:
            raise WorkspaceError("too_large", f"{p}: {size} bytes exceeds the per-file cap of {lim.workspace_file_bytes}")
        total = self.total_bytes - self._bytes.get(p, 0) + size
        if total > lim.workspace_total_bytes:
            raise WorkspaceError("too_large", f"workspace would hold {total} bytes, over the cap of {lim.workspace_total_bytes}")
        if p not in self._files and len(self._files) >= lim.workspace_files:
            raise WorkspaceError("too_large", f"workspace already holds the maximum of {lim.workspace_files} files")
        self._files[p] = new
        self._bytes[p] = size
        return size

    def delete(self, path: str) -> None:
        p = check_path(path)
        if p not in self._files:
            raise WorkspaceError("not_found", f"no workspace file {p!r}")
        del self._files[p]
        del self._bytes[p]

    def snapshot(self) -> dict[str, str]:
        """All files, sorted by path (for the observation and the recorder)."""
        return {p: self._files[p] for p in sorted(self._files)}
