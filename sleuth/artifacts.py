"""A content-addressed artifact store: large payloads live here, only their reference crosses the wire.

The embedded default is a local folder (`$SLEUTH_HOME/artifacts`, or `$SLEUTH_ARTIFACTS`). Workers on
many machines point it at a shared folder, or implement `ArtifactStore` over a shared service.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from sleuth.config import sleuth_home
from sleuth.errors import SleuthError

REF_PREFIX = "sha256:"


class ArtifactNotFoundError(SleuthError, LookupError):
    """A reference whose content is not in this store (a worker pointed at another store?)."""


@runtime_checkable
class ArtifactStore(Protocol):
    def put_bytes(self, data: bytes) -> str: ...

    def get_bytes(self, ref: str) -> bytes: ...


class LocalArtifactStore:
    """Artifacts as files named by their SHA-256, written atomically; identical content is stored once."""

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, ref: str) -> Path:
        if not ref.startswith(REF_PREFIX) or len(ref) != len(REF_PREFIX) + 64:
            raise ValueError(
                f"not an artifact reference: {ref!r} (expected 'sha256:<64 hex digits>')"
            )
        digest = ref[len(REF_PREFIX) :]
        if not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"not an artifact reference: {ref!r}")
        return self.root / digest[:2] / digest[2:]

    def put_bytes(self, data: bytes) -> str:
        ref = REF_PREFIX + hashlib.sha256(data).hexdigest()
        path = self._path(ref)
        if path.exists():
            return ref
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return ref

    def get_bytes(self, ref: str) -> bytes:
        path = self._path(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFoundError(
                f"artifact {ref} is not in {self.root}; workers must share one artifact store "
                "(set SLEUTH_ARTIFACTS to a shared folder)"
            ) from None
        if REF_PREFIX + hashlib.sha256(data).hexdigest() != ref:
            raise ArtifactNotFoundError(
                f"artifact {ref} in {self.root} is corrupt (checksum mismatch)"
            )
        return data


def put_json(store: ArtifactStore, value: Any) -> str:
    """Store a JSON-serialisable value (pydantic models allowed); returns its reference."""
    if isinstance(value, BaseModel):
        payload = value.model_dump_json().encode()
    else:
        payload = json.dumps(value, ensure_ascii=False, sort_keys=True, default=_default).encode()
    return store.put_bytes(payload)


def get_json(store: ArtifactStore, ref: str) -> Any:
    return json.loads(store.get_bytes(ref))


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


_default_store: ArtifactStore | None = None


def default_artifact_store() -> ArtifactStore:
    """The process-wide store: `$SLEUTH_ARTIFACTS` or `$SLEUTH_HOME/artifacts`."""
    global _default_store
    root = Path(os.environ.get("SLEUTH_ARTIFACTS") or sleuth_home() / "artifacts")
    if not isinstance(_default_store, LocalArtifactStore) or _default_store.root != root:
        _default_store = LocalArtifactStore(root)
    return _default_store
