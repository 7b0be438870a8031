"""The filesystem layer: scratch files an agent writes and reads back through six tools.

`StateBackend` keeps files in memory for one run (they travel in the loop checkpoint, so a durable
run keeps them across a worker restart). `FilesystemBackend(root=...)` keeps them on disk and never
touches anything outside `root`: `..`, absolute paths and symlinks leading out are refused.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from sleuth.errors import SleuthError
from sleuth.events import emit
from sleuth.tools import Tool

MAX_GREP_MATCHES = 100


class SandboxError(SleuthError, PermissionError):
    """A path that would leave the workspace, or is not a valid workspace path."""


@runtime_checkable
class Backend(Protocol):
    """Where the filesystem tools keep files. Paths are relative, `/`-separated workspace paths."""

    def read(self, path: str) -> str: ...

    def write(self, path: str, content: str) -> None: ...

    def paths(self) -> list[str]:
        """Every file in the workspace, sorted."""
        ...

    def dump_state(self) -> dict[str, Any]: ...

    def load_state(self, data: dict[str, Any]) -> None: ...


def workspace_path(path: str, *, allow_leading_slash: bool) -> str:
    """Normalise `path` to `a/b.txt`; refuse `..`, empty names and (unless allowed) absolute paths."""
    raw = path.strip().replace("\\", "/")
    if "\x00" in raw:
        raise SandboxError(f"path {path!r} contains a NUL byte")
    if raw.startswith("/") or re.match(r"^[A-Za-z]:", raw):
        if not allow_leading_slash:
            raise SandboxError(
                f"absolute path {path!r} refused: use a path relative to the workspace root, "
                "such as 'notes/plan.md'"
            )
        raw = raw.lstrip("/")
    parts = [p for p in PurePosixPath(raw).parts if p not in ("", ".")]
    if ".." in parts:
        raise SandboxError(
            f"path {path!r} refused: '..' would leave the workspace; use a path inside it"
        )
    return "/".join(parts)


class StateBackend:
    """Files in memory, for one run. `dump_state()` / `load_state()` carry them in checkpoints."""

    def __init__(self, files: dict[str, str] | None = None):
        self.files: dict[str, str] = {}
        for path, content in (files or {}).items():
            self.write(path, content)

    def _path(self, path: str) -> str:
        normalised = workspace_path(path, allow_leading_slash=True)
        if not normalised:
            raise SandboxError("a file path is required, not the workspace root")
        return normalised

    def read(self, path: str) -> str:
        key = self._path(path)
        if key not in self.files:
            raise FileNotFoundError(f"no file {key!r} in the workspace; `ls` or `glob` lists files")
        return self.files[key]

    def write(self, path: str, content: str) -> None:
        self.files[self._path(path)] = content

    def paths(self) -> list[str]:
        return sorted(self.files)

    def dump_state(self) -> dict[str, Any]:
        return {"files": dict(self.files)}

    def load_state(self, data: dict[str, Any]) -> None:
        self.files = dict(data.get("files", {}))


class FilesystemBackend:
    """Files under `root` on disk. Nothing outside `root` is ever read or written."""

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def resolve(self, path: str) -> Path:
        """The real location of workspace `path`, after checking it stays inside `root`."""
        relative = workspace_path(path, allow_leading_slash=False)
        if not relative:
            raise SandboxError("a file path is required, not the workspace root")
        candidate = self.root / relative
        # resolve() follows every symlink on the way, so a link pointing out of the root is caught.
        real = candidate.resolve()
        if not real.is_relative_to(self.root):
            raise SandboxError(
                f"path {path!r} refused: it leads through a symlink to {real}, outside the "
                f"workspace {self.root}"
            )
        return real

    def read(self, path: str) -> str:
        real = self.resolve(path)
        if not real.is_file():
            raise FileNotFoundError(
                f"no file {path!r} in the workspace; `ls` or `glob` lists files"
            )
        return real.read_text(encoding="utf-8")

    def write(self, path: str, content: str) -> None:
        real = self.resolve(path)
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_text(content, encoding="utf-8")

    def paths(self) -> list[str]:
        found = []
        for directory, dirnames, filenames in os.walk(self.root):
            base = Path(directory)
            # Symlinked directories are not followed; symlinked files only when they stay inside.
            dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
            for filename in filenames:
                real = (base / filename).resolve()
                if real.is_relative_to(self.root) and real.is_file():
                    found.append((base / filename).relative_to(self.root).as_posix())
        return sorted(found)

    def dump_state(self) -> dict[str, Any]:
        # The files persist on disk by themselves; a checkpoint only needs to know where.
        return {"root": str(self.root)}

    def load_state(self, data: dict[str, Any]) -> None:
        return None


def _listing(paths: list[str], directory: str) -> list[str]:
    prefix = directory + "/" if directory else ""
    entries = set()
    for path in paths:
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        head, sep, _ = rest.partition("/")
        entries.add(prefix + head + ("/" if sep else ""))
    return sorted(entries)


def _glob_match(path: str, pattern: str) -> bool:
    pattern = pattern.lstrip("/")
    if fnmatch.fnmatchcase(path, pattern):
        return True
    # `**/x` also matches `x` at the top level.
    while pattern.startswith("**/"):
        pattern = pattern[3:]
        if fnmatch.fnmatchcase(path, pattern):
            return True
    return False


def filesystem_tools(backend: Backend) -> list[Tool]:
    """`write_file`, `read_file`, `ls`, `edit_file`, `glob`, `grep` over `backend`."""

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a file in your workspace with `content`."""
        backend.write(path, content)
        emit("deepagent.fs.write", tool="write_file", path=path, size=len(content))
        return f"wrote {len(content)} characters to {path}"

    def read_file(path: str, offset: int = 0, limit: int = 2000) -> str:
        """Read a file from your workspace: `limit` lines starting at line `offset` (0-based)."""
        content = backend.read(path)
        emit("deepagent.fs.read", tool="read_file", path=path)
        lines = content.splitlines(keepends=True)
        return "".join(lines[offset : offset + limit])

    def ls(path: str = "") -> list[str]:
        """List files and folders (folders end with '/') directly under `path` ('' = workspace root)."""
        directory = workspace_path(path, allow_leading_slash=True)
        emit("deepagent.fs.read", tool="ls", path=path)
        return _listing(backend.paths(), directory)

    def edit_file(path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        """Replace `old_string` with `new_string` in a file. `old_string` must occur exactly once
        unless `replace_all` is true."""
        content = backend.read(path)
        count = content.count(old_string) if old_string else 0
        if count == 0:
            raise ValueError(f"the text to replace was not found in {path}; read the file first")
        if count > 1 and not replace_all:
            raise ValueError(
                f"the text to replace occurs {count} times in {path}; give more context to make "
                "it unique, or set replace_all"
            )
        backend.write(path, content.replace(old_string, new_string))
        emit("deepagent.fs.write", tool="edit_file", path=path, replacements=count)
        return f"replaced {count} occurrence(s) in {path}"

    def glob(pattern: str) -> list[str]:
        """Workspace files whose path matches a glob pattern such as '**/*.md' or 'notes/*'."""
        emit("deepagent.fs.read", tool="glob", path=pattern)
        return [p for p in backend.paths() if _glob_match(p, pattern)]

    def grep(pattern: str, path: str = "", glob: str | None = None) -> list[dict[str, Any]]:
        """Lines matching the regular expression `pattern` in files under `path` (optionally only
        files matching `glob`). Returns up to 100 matches as {path, line, text}."""
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        directory = workspace_path(path, allow_leading_slash=True)
        emit("deepagent.fs.read", tool="grep", path=path or "", pattern=pattern)
        matches: list[dict[str, Any]] = []
        for file_path in backend.paths():
            if directory and not (file_path == directory or file_path.startswith(directory + "/")):
                continue
            if glob and not _glob_match(file_path, glob):
                continue
            for number, line in enumerate(backend.read(file_path).splitlines(), start=1):
                if regex.search(line):
                    matches.append({"path": file_path, "line": number, "text": line})
                    if len(matches) >= MAX_GREP_MATCHES:
                        return matches
        return matches

    return [Tool(f) for f in (write_file, read_file, ls, edit_file, glob, grep)]
