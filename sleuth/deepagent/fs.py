"""The filesystem layer: scratch files an agent writes and reads back through six tools.

`StateBackend` keeps files in memory for one run and travels in the loop checkpoint, so a durable
run keeps them across a worker restart. A file of `INLINE_FILE_BYTES` or more goes to the artifact
store (a claim check, as evidence does): the checkpoint holds only its reference, so the loop
state stays small whatever the agent writes. Its quotas (`WorkspaceQuota`: total bytes, file
count, path depth and length, from `SLEUTH_WORKSPACE_*`) refuse a write with a tool error the
model sees; the path quotas apply to `FilesystemBackend` too. `FilesystemBackend(root=...)` keeps them on disk and never
touches anything outside `root`: `..`, absolute paths and symlinks are refused, without a race.

The tools take their arguments from a model, so none of them can be made to run for long or return
without bound: files are capped at `MAX_FILE_BYTES`, reads at `MAX_READ_CHARS`, listings at
`MAX_LISTED`, grep at `MAX_GREP_MATCHES` lines of `MAX_GREP_LINE_CHARS`, and grep uses RE2.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import re
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

import re2

from sleuth.runtime.artifacts import ArtifactStore, default_artifact_store
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.events import emit
from sleuth.runtime.settings import load_settings
from sleuth.tools import Tool

MAX_GREP_MATCHES = 100
MAX_FILE_BYTES = 1_000_000
"""Largest file the tools write or read (1 MB): a workspace holds notes, not data sets."""
MAX_READ_CHARS = 100_000
"""Most characters one `read_file` call returns; read further with `offset`."""
MAX_GREP_LINE_CHARS = 400
"""A grep match shows at most this much of its line."""
MAX_LISTED = 1000
"""Most paths one `ls` or `glob` call returns (a last entry says how many more there are)."""
GREP_MEMORY_BYTES = 8 << 20
"""Memory RE2 may use for one compiled pattern (bigger patterns are refused)."""
INLINE_FILE_BYTES = 4096
"""A `StateBackend` file this big or bigger is kept in the artifact store, only its reference in
the checkpoint; smaller ones stay inline (a reference would not be much smaller)."""


class SandboxError(SleuthError, PermissionError):
    """A path that would leave the workspace, or is not a valid workspace path."""


class FileTooLargeError(SleuthError, ValueError):
    """A file over `MAX_FILE_BYTES`."""

    def __init__(self, path: str, size: int):
        super().__init__(
            f"{path!r} is {size:,} bytes; workspace files are limited to {MAX_FILE_BYTES:,} "
            "bytes: split it into smaller files"
        )


class WorkspaceQuotaError(SleuthError, ValueError):
    """A write the workspace's quota refuses; the message says which limit and what to do."""


@dataclass(frozen=True)
class WorkspaceQuota:
    """What one workspace may hold. The defaults come from the `SLEUTH_WORKSPACE_*` settings."""

    max_bytes: int
    """Total bytes of all files (UTF-8)."""
    max_files: int
    max_depth: int
    """Folders a path may be nested in: `a/b/c.txt` is 2 deep."""
    max_path_chars: int

    @classmethod
    def from_settings(cls) -> WorkspaceQuota:
        settings = load_settings()
        return cls(
            max_bytes=settings.workspace_max_bytes,
            max_files=settings.workspace_max_files,
            max_depth=settings.workspace_max_depth,
            max_path_chars=settings.workspace_max_path_chars,
        )

    def check_path(self, path: str) -> None:
        """Refuse a normalised path that is too long or too deeply nested."""
        if len(path) > self.max_path_chars:
            raise WorkspaceQuotaError(
                f"path of {len(path):,} characters refused: workspace paths are limited to "
                f"{self.max_path_chars:,} characters (SLEUTH_WORKSPACE_MAX_PATH_CHARS); use a "
                "shorter name"
            )
        depth = path.count("/")
        if depth > self.max_depth:
            raise WorkspaceQuotaError(
                f"path {depth:,} folders deep refused: workspace paths may be nested at most "
                f"{self.max_depth} folders deep (SLEUTH_WORKSPACE_MAX_DEPTH); use a flatter layout"
            )


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
    """Files in memory, for one run. `dump_state()` / `load_state()` carry them in checkpoints,
    files of `INLINE_FILE_BYTES` or more by reference to the artifact store."""

    def __init__(
        self,
        files: dict[str, str] | None = None,
        *,
        store: ArtifactStore | None = None,
        quota: WorkspaceQuota | None = None,
    ):
        """`store` keeps the large files (default: the process's artifact store, looked up when a
        checkpoint is taken); `quota` defaults to the `SLEUTH_WORKSPACE_*` settings."""
        self.files: dict[str, str] = {}
        self._store = store
        self._quota = quota
        self._refs: dict[str, str] = {}
        for path, content in (files or {}).items():
            self.write(path, content)

    @property
    def quota(self) -> WorkspaceQuota:
        return self._quota or WorkspaceQuota.from_settings()

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
        key = self._path(path)
        size = len(content.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise FileTooLargeError(path, size)
        quota = self.quota
        quota.check_path(key)
        if key not in self.files and len(self.files) >= quota.max_files:
            raise WorkspaceQuotaError(
                f"the workspace holds {len(self.files):,} files, its limit "
                f"(SLEUTH_WORKSPACE_MAX_FILES); overwrite or combine files instead of adding one"
            )
        replaced = len(self.files[key].encode("utf-8")) if key in self.files else 0
        total = self.total_bytes() - replaced + size
        if total > quota.max_bytes:
            raise WorkspaceQuotaError(
                f"writing {size:,} bytes to {key!r} would bring the workspace to {total:,} bytes, "
                f"over its limit of {quota.max_bytes:,} (SLEUTH_WORKSPACE_MAX_BYTES); write less, "
                "or shorten files you no longer need"
            )
        self.files[key] = content
        self._refs.pop(key, None)

    def total_bytes(self) -> int:
        return sum(len(content.encode("utf-8")) for content in self.files.values())

    def paths(self) -> list[str]:
        return sorted(self.files)

    def dump_state(self) -> dict[str, Any]:
        inline: dict[str, str] = {}
        for path, content in self.files.items():
            data = content.encode("utf-8")
            if len(data) < INLINE_FILE_BYTES:
                inline[path] = content
            elif path not in self._refs:
                self._refs[path] = (self._store or default_artifact_store()).put_bytes(data)
        state: dict[str, Any] = {"files": inline}
        refs = {path: ref for path, ref in self._refs.items() if path in self.files}
        if refs:
            state["refs"] = dict(sorted(refs.items()))
        return state

    def load_state(self, data: dict[str, Any]) -> None:
        files = dict(data.get("files", {}))
        refs = dict(data.get("refs", {}))
        if refs:
            store = self._store or default_artifact_store()
            for path, ref in refs.items():
                files[path] = store.get_bytes(ref).decode("utf-8")
        self.files = files
        self._refs = refs


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class FilesystemBackend:
    """Files under `root` on disk. Nothing outside `root` is ever read or written.

    Every access walks down from `root` one component at a time with directory file descriptors
    opened `O_NOFOLLOW`, and opens the file itself `O_NOFOLLOW` relative to its directory: no
    symlink is followed at any point of the path, so a link swapped in between a check and a use
    cannot lead out. Writes go to a temporary file renamed over the name (a rename replaces a
    link, it never writes through one). Symlinks inside the workspace are refused, not followed.
    """

    def __init__(self, root: str | Path, *, quota: WorkspaceQuota | None = None):
        """`quota`'s path limits refuse too deep or too long paths (default: the
        `SLEUTH_WORKSPACE_*` settings); the disk holds the bytes, so those limits are not applied."""
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._quota = quota

    def _relative(self, path: str) -> list[str]:
        relative = workspace_path(path, allow_leading_slash=False)
        if not relative:
            raise SandboxError("a file path is required, not the workspace root")
        (self._quota or WorkspaceQuota.from_settings()).check_path(relative)
        return relative.split("/")

    def _open_directory(self, path: str, parts: list[str], *, create: bool) -> int:
        """A descriptor of the directory holding `parts[-1]`, reached without following links."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for index, part in enumerate(parts[:-1]):
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o700, dir_fd=fd)
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    raise FileNotFoundError(
                        f"no file {path!r} in the workspace; `ls` or `glob` lists files"
                    ) from None
                except OSError as exc:
                    raise self._refusal(path, parts[: index + 1], fd, part, exc) from None
                os.close(fd)
                fd = child
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _refusal(self, path: str, shown: list[str], fd: int, name: str, exc: OSError) -> Exception:
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        if is_link or exc.errno == errno.ELOOP:
            return SandboxError(
                f"path {path!r} refused: {'/'.join(shown)!r} is a symlink, and the workspace "
                "follows no symlinks; use a path to a real file or folder inside it"
            )
        return SandboxError(f"path {path!r} refused: {'/'.join(shown)!r} is not a folder")

    def read(self, path: str) -> str:
        parts = self._relative(path)
        directory = self._open_directory(path, parts, create=False)
        try:
            try:
                fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=directory)
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"no file {path!r} in the workspace; `ls` or `glob` lists files"
                ) from None
            except OSError as exc:
                raise self._refusal(path, parts, directory, parts[-1], exc) from None
        finally:
            os.close(directory)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise FileNotFoundError(f"{path!r} is not a file; `ls` or `glob` lists files")
            if info.st_size > MAX_FILE_BYTES:
                raise FileTooLargeError(path, info.st_size)
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise FileTooLargeError(path, len(data))
        return data.decode("utf-8", errors="replace")

    def write(self, path: str, content: str) -> None:
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise FileTooLargeError(path, len(data))
        parts = self._relative(path)
        directory = self._open_directory(path, parts, create=True)
        try:
            with contextlib.suppress(FileNotFoundError):
                existing = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
                if stat.S_ISLNK(existing.st_mode):
                    raise self._refusal(
                        path, parts, directory, parts[-1], OSError(errno.ELOOP, "symlink")
                    )
                if stat.S_ISDIR(existing.st_mode):
                    raise IsADirectoryError(f"{path!r} is a folder; write to a file inside it")
            temporary = f".{parts[-1]}.{uuid.uuid4().hex}.tmp"
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=directory,
            )
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(temporary, parts[-1], src_dir_fd=directory, dst_dir_fd=directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=directory)
                raise
        finally:
            os.close(directory)

    def paths(self) -> list[str]:
        found = []
        deepest = (self._quota or WorkspaceQuota.from_settings()).max_depth
        # fwalk hands out directory descriptors and does not descend into symlinked folders.
        for directory, dirnames, filenames, dir_fd in os.fwalk(self.root, follow_symlinks=False):
            base = Path(directory).relative_to(self.root)
            if len(base.parts) >= deepest:
                # A tree made outside the tools can be deeper than any path they accept: it is
                # not walked further, so a listing stays bounded (and holds few descriptors).
                dirnames.clear()
            for filename in filenames:
                with contextlib.suppress(OSError):
                    mode = os.stat(filename, dir_fd=dir_fd, follow_symlinks=False).st_mode
                    if stat.S_ISREG(mode):
                        found.append((base / filename).as_posix())
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


def _capped(paths: list[str]) -> list[str]:
    if len(paths) <= MAX_LISTED:
        return paths
    return [
        *paths[:MAX_LISTED],
        f"... and {len(paths) - MAX_LISTED} more: narrow the path or pattern",
    ]


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


def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled by RE2, which matches in time linear in the text: a pattern from a
    model such as `(a+)+$` cannot freeze the worker the way a backtracking engine can."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = GREP_MEMORY_BYTES
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(
            f"invalid regular expression {pattern!r}: {detail} (grep uses RE2 syntax: no "
            "backreferences or lookarounds)"
        ) from None


def filesystem_tools(backend: Backend) -> list[Tool]:  # noqa: C901 (six small nested tools)
    """`write_file`, `read_file`, `ls`, `edit_file`, `glob`, `grep` over `backend`."""

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a file in your workspace with `content`."""
        backend.write(path, content)
        emit("deepagent.fs.write", tool="write_file", path=path, size=len(content))
        return f"wrote {len(content)} characters to {path}"

    def read_file(path: str, offset: int = 0, limit: int = 2000) -> str:
        """Read a file from your workspace: `limit` lines starting at line `offset` (0-based).
        At most 100,000 characters come back; read on with a larger `offset`."""
        content = backend.read(path)
        emit("deepagent.fs.read", tool="read_file", path=path)
        lines = content.splitlines(keepends=True)
        start = max(offset, 0)
        shown: list[str] = []
        size = 0
        for number, line in enumerate(lines[start : start + max(limit, 0)], start=start):
            if size + len(line) > MAX_READ_CHARS:
                shown.append(
                    f"\n[output cut at {MAX_READ_CHARS:,} characters: read on with offset={number}]"
                )
                break
            shown.append(line)
            size += len(line)
        return "".join(shown)

    def ls(path: str = "") -> list[str]:
        """List files and folders (folders end with '/') directly under `path` ('' = workspace root)."""
        directory = workspace_path(path, allow_leading_slash=True)
        emit("deepagent.fs.read", tool="ls", path=path)
        return _capped(_listing(backend.paths(), directory))

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
        return _capped([p for p in backend.paths() if _glob_match(p, pattern)])

    def grep(pattern: str, path: str = "", glob: str | None = None) -> list[dict[str, Any]]:
        """Lines matching the regular expression `pattern` (RE2 syntax: no backreferences or
        lookarounds) in files under `path` (optionally only files matching `glob`). Returns up to
        100 matches as {path, line, text}."""
        regex = compile_pattern(pattern)
        directory = workspace_path(path, allow_leading_slash=True)
        emit("deepagent.fs.read", tool="grep", path=path or "", pattern=pattern)
        matches: list[dict[str, Any]] = []
        for file_path in backend.paths():
            if directory and not (file_path == directory or file_path.startswith(directory + "/")):
                continue
            if glob and not _glob_match(file_path, glob):
                continue
            try:
                content = backend.read(file_path)
            except (FileTooLargeError, OSError):
                continue
            for number, line in enumerate(content.splitlines(), start=1):
                if regex.search(line):
                    text = line[:MAX_GREP_LINE_CHARS]
                    matches.append({"path": file_path, "line": number, "text": text})
                    if len(matches) >= MAX_GREP_MATCHES:
                        return matches
        return matches

    return [Tool(f) for f in (write_file, read_file, ls, edit_file, glob, grep)]
