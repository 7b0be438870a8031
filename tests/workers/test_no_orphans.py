"""The Temporal dev server under a foreground `sleuth server` dies with it (issue 45, part 5).

SIGKILL gives `sleuth server` no chance to stop its child; without the tie the dev server lived
on and kept its ports, and the next `sleuth server` refused to start ("port already in use").
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sleuth.workers.embedded import port_open
from sleuth.workers.lifeline import popen_tied, release
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import (
    free_port_pair,
    start_foreground_server,
    stop_foreground_server,
)

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped yet has released its ports and counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(condition: object, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} within {timeout:.0f} s")


def _server_command(port: int) -> list[str]:
    code = "from sleuth.workers.cli import main; main()"
    return [sys.executable, "-c", code, "server", "--port", str(port), "--in-memory"]


def test_sigkill_of_a_foreground_server_takes_its_temporal_child_along() -> None:
    port = free_port_pair()
    process, banner = start_foreground_server(command=_server_command(port))
    found = re.search(r"ready \(pid (\d+)\)", banner)
    assert found, banner
    child = int(found.group(1))
    assert alive(child)

    process.kill()
    process.wait(timeout=scaled(30))
    try:
        wait_until(
            lambda: not alive(child), "the dev server did not die with its parent", scaled(30)
        )
        wait_until(
            lambda: not port_open("127.0.0.1", port) and not port_open("127.0.0.1", port + 1000),
            "the dev server's ports were not freed",
            scaled(30),
        )
    finally:
        if alive(child):  # an orphan of a failed tie: never leave it running
            os.kill(child, signal.SIGKILL)
    again, banner = start_foreground_server(command=_server_command(port))
    assert f"gRPC    localhost:{port}" in banner
    assert "Temporal dev server stopped." in stop_foreground_server(again, signal.SIGTERM)


# A parent that starts a tied `sleep`, prints its pid, then waits to be killed.
_PARENT = """\
import sys, time
from sleuth.workers.lifeline import popen_tied
child = popen_tied(["sleep", "600"], use_prctl={use_prctl})
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("use_prctl", [True, False], ids=["prctl", "watchdog-pipe"])
def test_a_tied_child_dies_when_its_parent_is_killed(use_prctl: bool) -> None:
    if use_prctl and not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux-only")
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT.format(use_prctl=use_prctl)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.kill()
        parent.wait(timeout=scaled(30))
        wait_until(lambda: not alive(child), "the tied child outlived its parent", scaled(30))
    finally:
        parent.kill()
        parent.wait()


def test_a_released_child_leaves_no_watchdog_behind() -> None:
    process = popen_tied(["sleep", "600"], use_prctl=False)
    _, watchdog = process.lifeline  # type: ignore[attr-defined]
    process.kill()
    process.wait()
    release(process)
    assert watchdog.returncode is not None
