"""Where a backend of the artifact store keeps a named pointer; shared by every backend
(`sleuth.runtime.artifacts`, `sleuth.runtime.artifacts_s3`), so no backend imports the store."""

from __future__ import annotations

import hashlib


def pointer_key(name: str) -> str:
    """The backend key of the pointer `name`: `pointers/<sha256 of name>`."""
    # Hashed: a name (a workflow id, say) can hold any character without leaving the store.
    return "pointers/" + hashlib.sha256(name.encode("utf-8")).hexdigest()
