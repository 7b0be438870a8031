"""The CLI's "Web UI:" link points at the UI port the server was started with (`--ui-port`),
not at gRPC port + 1000 (issue 45, smaller ones)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sleuth import config
from tests.helpers.cli_process import run_sleuth
from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import start_foreground_server, stop_foreground_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _started_link(port: int) -> str:
    started = run_sleuth(
        ["research", "Where is the Web UI?", "--no-wait", "--task-queue", "web-ui-link"],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": f"localhost:{port}", "PYTHONPATH": str(ROOT)},
        timeout=scaled(120),
    )
    output = started.stdout + started.stderr
    assert started.returncode == 0, output
    [line] = [line for line in output.splitlines() if "Web UI:" in line]
    return line.split("Web UI:")[1].strip()


def test_a_foreground_server_with_its_own_ui_port_gets_links_to_it() -> None:
    port = free_ports(7, 1000)
    ui_port = port + 7
    process, banner = start_foreground_server(
        "--port", str(port), "--ui-port", str(ui_port), "--in-memory"
    )
    try:
        assert f"Web UI  http://localhost:{ui_port}" in banner
        assert _started_link(port).startswith(f"http://localhost:{ui_port}/namespaces/default/")
    finally:
        stop_foreground_server(process, signal.SIGTERM)
    assert not config.web_ui_record(port).exists(), "a stopped server's record is removed"


def test_a_background_server_with_its_own_ui_port_gets_links_to_it() -> None:
    port = free_ports(9, 1000)
    ui_port = port + 9
    started = run_sleuth(
        ["server", "--background", "--port", str(port), "--ui-port", str(ui_port), "--in-memory"],
        timeout=scaled(120),
    )
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        assert _started_link(port).startswith(f"http://localhost:{ui_port}/namespaces/default/")
    finally:
        run_sleuth(["server", "--stop"], timeout=scaled(120))
    assert not config.web_ui_record(port).exists()


def test_without_a_record_the_link_keeps_the_dev_server_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "localhost:17233")
    assert config.web_ui_url() == "http://localhost:18233"
    monkeypatch.setenv("SLEUTH_WEB_UI", "https://temporal.example.com")
    assert config.web_ui_url() == "https://temporal.example.com"
