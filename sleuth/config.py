"""Where Sleuth keeps its data and how it finds Temporal (environment-driven, one place)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_TEMPORAL_ADDRESS = "localhost:7233"
DEFAULT_TASK_QUEUE = "sleuth"
DEFAULT_NAMESPACE = "default"


def sleuth_home() -> Path:
    """The data directory: `$SLEUTH_HOME`, default `~/.sleuth` (created on first use)."""
    home = Path(os.environ.get("SLEUTH_HOME") or Path.home() / ".sleuth").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def temporal_address() -> str:
    return os.environ.get("TEMPORAL_ADDRESS") or DEFAULT_TEMPORAL_ADDRESS


def temporal_namespace() -> str:
    return os.environ.get("TEMPORAL_NAMESPACE") or DEFAULT_NAMESPACE


def task_queue() -> str:
    return os.environ.get("SLEUTH_TASK_QUEUE") or DEFAULT_TASK_QUEUE


def web_ui_url() -> str:
    """`$SLEUTH_WEB_UI`; else, for a local Temporal, the dev server's UI port (gRPC port + 1000)."""
    explicit = os.environ.get("SLEUTH_WEB_UI")
    if explicit:
        return explicit
    host, _, port = temporal_address().rpartition(":")
    if host in ("localhost", "127.0.0.1") and port.isdigit():
        return f"http://localhost:{int(port) + 1000}"
    return "http://localhost:8233"


def workflow_link(workflow_id: str, run_id: str | None = None, namespace: str | None = None) -> str:
    """The Web UI page of one workflow run."""
    base = f"{web_ui_url()}/namespaces/{namespace or temporal_namespace()}/workflows/{workflow_id}"
    return f"{base}/{run_id}/history" if run_id else base
