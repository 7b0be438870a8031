"""`sleuth server` stops on SIGTERM even when the dev server ignores it: SIGTERM, then SIGKILL to
the dev server's process group after `STOP_GRACE_SECONDS`."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from sleuth.workers.binaries import temporal_cli
from sleuth.workers.cli_server import STOP_GRACE_SECONDS
from sleuth.workers.embedded import port_open
from tests.helpers.worker_processes import (
    free_port_pair,
    start_foreground_server,
    stop_foreground_server,
)

pytestmark = pytest.mark.slow

# Starts the real dev server as its child, then ignores SIGTERM and SIGINT and never exits on its
# own: only SIGKILL ends it. The real server (its child, in its process group) stops on SIGTERM.
STUBBORN_DEV_SERVER = """\
import os, signal, subprocess, sys
real = subprocess.Popen([{real!r}, *sys.argv[1:]])
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
with open({pids!r}, "w") as pids:
    pids.write(f"{{os.getpid()}} {{real.pid}}")
real.wait()
while True:
    signal.pause()
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_sigterm_escalates_to_sigkill_when_the_dev_server_ignores_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    fake = tmp_path / "temporal"
    fake.write_text(
        f"#!{sys.executable}\n"
        + STUBBORN_DEV_SERVER.format(real=str(temporal_cli()), pids=str(pids))
    )
    fake.chmod(0o755)
    port = free_port_pair()
    # `sleuth server` as the console script runs it, with the dev server binary swapped.
    code = (
        "import pathlib, sleuth.workers.embedded as embedded; "
        f"embedded.temporal_cli = lambda: pathlib.Path({str(fake)!r}); "
        "from sleuth.workers.cli import main; main()"
    )
    command = [sys.executable, "-c", code, "server", "--port", str(port), "--in-memory"]
    process, banner = start_foreground_server(command=command)
    assert f"gRPC    localhost:{port}" in banner
    stubborn_pid, real_pid = (int(pid) for pid in pids.read_text().split())

    output = stop_foreground_server(process, signal.SIGTERM)

    assert f"did not stop within {STOP_GRACE_SECONDS:.0f} s of SIGTERM; killing it" in output
    assert "Temporal dev server stopped." in output
    assert not alive(stubborn_pid) and not alive(real_pid)
    assert not port_open("127.0.0.1", port)
