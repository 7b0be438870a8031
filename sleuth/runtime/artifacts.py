"""A content-addressed artifact store: large payloads live here, only their reference crosses the wire.

The embedded default is a local folder (`$SLEUTH_HOME/artifacts`, or `$SLEUTH_ARTIFACTS`). Workers on
many machines share one S3-compatible bucket (`SLEUTH_ARTIFACTS=s3://bucket/prefix`, see
`sleuth.runtime.artifacts_s3`) or one shared folder. A store is content addressing over an
`ArtifactBackend`, which keeps the bytes and the pointers.

Besides content, a store keeps *named pointers*: small values under a name, replaced only by an
atomic compare-and-swap. Durable activities keep their checkpoint journal there (see
`activities/checkpoints.py`), under a name that a retried attempt can compute for itself.

Every local write is atomic and durable: a temporary file is written and fsynced, renamed into place, and
its directory fsynced, so a crash leaves either the old file or the new one. Storing content whose
file exists but does not match its digest replaces the file. Files are created 0600 and folders
0700. With an encryption key configured, content is encrypted at rest (`sleuth.runtime.artifact_crypto`):
references stay the digests of the plaintext; pointers hold references, never content, and stay
plaintext.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from sleuth.runtime import artifact_crypto
from sleuth.runtime.artifact_keys import pointer_key
from sleuth.runtime.errors import SleuthError, UnsupportedArgumentError
from sleuth.runtime.paths import sleuth_home
from sleuth.runtime.settings import load_settings

REF_PREFIX = "sha256:"
_HEX = frozenset("0123456789abcdef")
_DIR_MODE = 0o700


class ArtifactReferenceError(SleuthError, ValueError):
    """A string that is not an artifact reference at all (no store can ever resolve it)."""


class ArtifactNotFoundError(SleuthError, LookupError):
    """A reference whose content is not in this store (a worker pointed at another store?)."""


class ArtifactCorruptError(ArtifactNotFoundError):
    """A reference whose file exists but no longer matches its digest."""


@runtime_checkable
class ArtifactStore(Protocol):
    """Content-addressed bytes and named pointers (see the module docstring)."""

    def put_bytes(self, data: bytes) -> str:
        """Store `data`; returns its reference. Storing it again repairs a damaged copy."""
        ...

    def get_bytes(self, ref: str) -> bytes:
        """The content of `ref`, checked against its digest."""
        ...

    def read_pointer(self, name: str) -> str | None:
        """The value last stored under the pointer `name`, or None if there is none."""
        ...

    def swap_pointer(self, name: str, expected: str | None, value: str) -> bool:
        """Set pointer `name` to `value` if it still holds `expected` (None: no pointer yet).
        Atomic against concurrent writers and crashes; returns whether it was set."""
        ...


def check_ref(ref: object) -> str:
    """`ref` if it is a well-formed reference (`sha256:` and 64 lowercase hex digits), else
    `ArtifactReferenceError`."""
    if (
        not isinstance(ref, str)
        or not ref.startswith(REF_PREFIX)
        or len(ref) != len(REF_PREFIX) + 64
        or not set(ref[len(REF_PREFIX) :]) <= _HEX
    ):
        raise ArtifactReferenceError(
            f"not an artifact reference: {ref!r} (expected 'sha256:<64 hex digits>', as an "
            "activity returned it)"
        )
    return ref


class ArtifactBackend(Protocol):
    """Where an `ArtifactStore` keeps its bytes: objects under content-addressed keys
    (`ab/cdef…`, the digest split after two characters) and named pointers.

    Every byte a store writes or reads passes through `write_object` / `read_object`, so a
    transform (encryption at rest, say) wraps a backend in one place.
    """

    location: str
    """Where the bytes are, for messages: a folder or an `s3://bucket/prefix` URL."""
    verifies_writes: bool
    """Whether an object once written can be trusted without reading it back (object storage
    checks every upload's checksum); a local file can be damaged later, so the local backend
    reads an existing object back before it skips a write."""

    def write_object(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, atomically and durably."""
        ...

    def read_object(self, key: str) -> bytes:
        """The bytes under `key`; `FileNotFoundError` if there are none."""
        ...

    def object_exists(self, key: str) -> bool: ...

    def read_pointer(self, name: str) -> str | None: ...

    def swap_pointer(self, name: str, expected: str | None, value: str) -> bool: ...


class BackedArtifactStore:
    """An `ArtifactStore` over an `ArtifactBackend`: content addressing and digest checks here,
    bytes and pointers in the backend."""

    def __init__(self, backend: ArtifactBackend):
        self.backend = backend

    def put_bytes(self, data: bytes) -> str:
        ref = REF_PREFIX + hashlib.sha256(data).hexdigest()
        key = object_key(ref)
        if not self._holds(key, ref):
            self.backend.write_object(key, artifact_crypto.seal(data))
        return ref

    def get_bytes(self, ref: str) -> bytes:
        key = object_key(ref)
        try:
            stored = self.backend.read_object(key)
        except FileNotFoundError:
            raise ArtifactNotFoundError(
                f"artifact {ref} is not in {self.backend.location}; workers must share one "
                "artifact store (set SLEUTH_ARTIFACTS to a shared folder or an s3:// URL)"
            ) from None
        data = artifact_crypto.open_sealed(stored, _is_content_of(ref), f"artifact {ref}")
        if data is None:
            raise ArtifactCorruptError(
                f"artifact {ref} in {self.backend.location} is corrupt (checksum mismatch): "
                f"{key} was damaged after it was written; storing the same content again "
                "repairs it"
            )
        return data

    def read_pointer(self, name: str) -> str | None:
        return self.backend.read_pointer(name)

    def swap_pointer(self, name: str, expected: str | None, value: str) -> bool:
        return self.backend.swap_pointer(name, expected, value)

    def _holds(self, key: str, ref: str) -> bool:
        if self.backend.verifies_writes:
            return self.backend.object_exists(key)
        try:
            stored = self.backend.read_object(key)
        except FileNotFoundError:
            return False
        # False for a damaged copy, a plaintext one written before a key was set, or one sealed
        # under an older key: writing it again repairs or re-seals it.
        return artifact_crypto.is_current(stored, _is_content_of(ref), f"artifact {ref}")


def object_key(ref: str) -> str:
    """The backend key of a reference: `ab/cdef…` (its digest, split after two characters)."""
    digest = check_ref(ref)[len(REF_PREFIX) :]
    return f"{digest[:2]}/{digest[2:]}"


class LocalBackend:
    """Objects and pointers as files under `root`, each written atomically and fsynced."""

    verifies_writes = False

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()
        self.root.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        self.location = str(self.root)

    def write_object(self, key: str, data: bytes) -> None:
        _write_atomically(self.root / key, data)

    def read_object(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def object_exists(self, key: str) -> bool:
        return (self.root / key).is_file()

    def read_pointer(self, name: str) -> str | None:
        try:
            return (self.root / pointer_key(name)).read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return None

    def swap_pointer(self, name: str, expected: str | None, value: str) -> bool:
        path = self.root / pointer_key(name)
        with self._pointer_lock(path):
            if self.read_pointer(name) != expected:
                return False
            _write_atomically(path, value.encode("utf-8"))
            return True

    @contextlib.contextmanager
    def _pointer_lock(self, path: Path) -> Iterator[None]:
        # One lock file per 256th of the names: swaps of different pointers rarely wait.
        path.parent.mkdir(mode=_DIR_MODE, exist_ok=True)
        descriptor = os.open(path.parent / f"{path.name[:2]}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)


def _is_content_of(ref: str) -> Callable[[bytes], bool]:
    return lambda data: REF_PREFIX + hashlib.sha256(data).hexdigest() == ref


class LocalArtifactStore(BackedArtifactStore):
    """Artifacts as files named by their SHA-256, written atomically; identical content is stored once."""

    def __init__(self, root: str | Path):
        self.local = LocalBackend(root)
        super().__init__(self.local)

    @property
    def root(self) -> Path:
        return self.local.root


def _write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a crash at any point leaves the old file or the new one."""
    path.parent.mkdir(mode=_DIR_MODE, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(path: Path) -> None:
    # The rename is durable only once the directory entry is on disk.
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def put_json(store: ArtifactStore, value: Any) -> str:
    """Store a JSON-serialisable value (pydantic models allowed); returns its reference."""
    if isinstance(value, BaseModel):
        payload = value.model_dump_json().encode()
    else:
        payload = json.dumps(value, ensure_ascii=False, sort_keys=True, default=_default).encode()
    return store.put_bytes(payload)


def get_json(store: ArtifactStore, ref: str) -> Any:
    """The JSON value `put_json` stored under `ref`."""
    return json.loads(store.get_bytes(ref))


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise UnsupportedArgumentError(
        f"cannot store {type(value).__name__} as JSON; store dicts, lists, strings, numbers, "
        "booleans or pydantic models"
    )


_default_store: ArtifactStore | None = None
_default_location: str | None = None


def default_artifact_store() -> ArtifactStore:
    """The process-wide store: `$SLEUTH_ARTIFACTS` (a folder, or `s3://bucket/prefix`) or
    `$SLEUTH_HOME/artifacts`."""
    global _default_store, _default_location
    configured = load_settings().artifacts
    location = str(configured or sleuth_home() / "artifacts")
    if _default_store is None or _default_location != location:
        if is_object_store_url(location):
            # Imported here: the S3 client is an optional extra (`sleuth[s3]`).
            from sleuth.runtime.artifacts_s3 import S3Backend

            _default_store = BackedArtifactStore(S3Backend.from_url(location))
        else:
            _default_store = LocalArtifactStore(Path(location).expanduser())
        _default_location = location
    return _default_store


def is_object_store_url(location: str) -> bool:
    """Whether `SLEUTH_ARTIFACTS` names object storage (`s3://…`) rather than a folder."""
    return "://" in location
