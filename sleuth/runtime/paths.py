"""Where Sleuth keeps its data and where the Web UI shows a run (from `sleuth.runtime.settings`)."""

from __future__ import annotations

import os
from pathlib import Path

from sleuth.runtime.settings import DEFAULT_EMBEDDED_ADDRESS, DEFAULT_TASK_QUEUE, load_settings

DEFAULT_TEMPORAL_ADDRESS = DEFAULT_EMBEDDED_ADDRESS
DEFAULT_NAMESPACE = "default"


PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def sleuth_home() -> Path:
    """The data directory: `$SLEUTH_HOME`, default `~/.sleuth` (created 0700 on first use)."""
    return private_dir(load_settings().home_dir)


def private_dir(path: Path) -> Path:
    """`path`, created with its missing parents readable by the owner only (0700)."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    return path


def private_file(path: Path) -> Path:
    """`path`, created empty and owner-only (0600) if it does not exist; its folder made too.

    SQLite gives its `-wal` and `-shm` files the mode of the database, so creating a database
    file this way before connecting keeps all three private."""
    private_dir(path.parent)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE))
    return path


def temporal_address() -> str:
    """`$TEMPORAL_ADDRESS`, else localhost:7233 (what Web UI links are derived from)."""
    return os.environ.get("TEMPORAL_ADDRESS") or DEFAULT_TEMPORAL_ADDRESS


def temporal_namespace() -> str:
    """`$TEMPORAL_NAMESPACE`, else `default` (the namespace Web UI links name)."""
    return os.environ.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE


def task_queue() -> str:
    """`$SLEUTH_TASK_QUEUE`, else `sleuth`."""
    return load_settings().task_queue or DEFAULT_TASK_QUEUE


WEB_UI_RECORDS = "web-ui"
"""Folder of `$SLEUTH_HOME` where each dev server `sleuth server` runs records its Web UI."""


def web_ui_record(port: int) -> Path:
    """The file naming the Web UI of the dev server Sleuth runs on gRPC port `port`."""
    return load_settings().home_dir / WEB_UI_RECORDS / f"{port}.url"


def record_web_ui(port: int, url: str) -> None:
    """Note that the dev server on gRPC `port` serves its Web UI at `url` (`--ui-port`)."""
    private_file(web_ui_record(port)).write_text(url)


def forget_web_ui(port: int) -> None:
    web_ui_record(port).unlink(missing_ok=True)


def web_ui_url() -> str:
    """`$SLEUTH_WEB_UI`; else, for a local Temporal, the Web UI that `sleuth server` recorded for
    its gRPC port, or the dev server's default UI port (gRPC port + 1000)."""
    explicit = load_settings().web_ui
    if explicit:
        return explicit
    host, _, port = temporal_address().rpartition(":")
    if host in ("localhost", "127.0.0.1") and port.isdigit():
        try:
            recorded = web_ui_record(int(port)).read_text().strip()
        except OSError:
            recorded = ""
        return recorded or f"http://localhost:{int(port) + 1000}"
    return "http://localhost:8233"


def workflow_link(workflow_id: str, run_id: str | None = None, namespace: str | None = None) -> str:
    """The Web UI page of one workflow run."""
    base = f"{web_ui_url()}/namespaces/{namespace or temporal_namespace()}/workflows/{workflow_id}"
    return f"{base}/{run_id}/history" if run_id else base
