"""The embedded Temporal dev server: `sleuth server`, `connect_temporal`, background start/stop."""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sleuth.workers.client import connect
from sleuth.workers.embedded import (
    EmbeddedServerError,
    connect_temporal,
    pid_file,
    port_open,
    read_background_server,
    temporal_answers,
)
from tests.helpers.apps.ping_app import NapWorkflow, PingWorkflow
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import (
    cli_env,
    free_port_pair,
    start_foreground_server,
    stop_foreground_server,
)

pytestmark = pytest.mark.slow
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def embedded_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Make a free local port the embedded address (conftest stops what the test starts)."""
    port = free_port_pair()
    monkeypatch.setenv("SLEUTH_EMBEDDED_ADDRESS", f"localhost:{port}")
    monkeypatch.setenv("TEMPORAL_ADDRESS", f"localhost:{port}")
    yield port


async def test_connect_temporal_starts_the_embedded_server_once_then_reuses_it(
    embedded_port: int, sleuth_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    address = f"localhost:{embedded_port}"
    assert not port_open("127.0.0.1", embedded_port)

    assert (await connect_temporal()).service_client.config.target_host == address
    announced = capfd.readouterr().err
    assert f"no Temporal at {address}" in announced
    assert f"http://localhost:{embedded_port + 1000}" in announced
    record = read_background_server()
    assert record is not None and record.address == address
    assert Path(record.database or "") == (sleuth_home / "temporal.sqlite").resolve()

    client = await connect(address)
    handle = await client.start_workflow(
        "NobodyServesThis", id=f"wf-{uuid.uuid4()}", task_queue=str(uuid.uuid4())
    )
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

    assert (await connect_temporal()).service_client.config.target_host == address
    assert "started the embedded server" not in capfd.readouterr().err
    again = read_background_server()
    assert again is not None and again.pid == record.pid

    status = run_sleuth(["server", "--status"], env=cli_env())
    assert status.returncode == 0, status.stderr
    assert f"running (pid {record.pid})" in status.stdout

    stopped = run_sleuth(["server", "--stop"], env=cli_env())
    assert stopped.returncode == 0, stopped.stderr
    assert f"pid {record.pid}" in stopped.stdout
    assert not pid_file().exists()
    assert not port_open("127.0.0.1", embedded_port)
    assert (sleuth_home / "temporal.sqlite").stat().st_size > 0


async def test_sleuth_server_background_starts_a_detached_server_that_commands_reuse(
    embedded_port: int, capfd: pytest.CaptureFixture[str]
) -> None:
    started = run_sleuth(
        ["server", "--background", "--in-memory"], env=cli_env(), timeout=scaled(120)
    )
    assert started.returncode == 0, started.stderr
    record = read_background_server()
    assert record is not None and f"(pid {record.pid})" in started.stdout
    assert f"gRPC    localhost:{embedded_port}" in started.stdout
    assert record.database is None

    reused = await connect_temporal()
    assert reused.service_client.config.target_host == f"localhost:{embedded_port}"
    assert "started the embedded server" not in capfd.readouterr().err

    again = run_sleuth(["server", "--background"], env=cli_env())
    assert again.returncode == 0 and "already running" in again.stdout
    assert read_background_server() == record


async def test_connect_temporal_uses_a_server_that_answers_without_starting_one(
    dev_env: WorkflowEnvironment, capfd: pytest.CaptureFixture[str]
) -> None:
    address = dev_env.client.service_client.config.target_host
    assert (await connect_temporal(address)).service_client.config.target_host == address
    assert "embedded" not in capfd.readouterr().err
    assert read_background_server() is None


async def test_a_non_embedded_address_that_does_not_answer_is_a_clear_error(
    embedded_port: int,
) -> None:
    elsewhere = f"localhost:{free_port_pair()}"
    with pytest.raises(
        EmbeddedServerError, match="no Temporal server answers at .*TEMPORAL_ADDRESS"
    ):
        await connect_temporal(elsewhere)
    assert read_background_server() is None
    assert not port_open("127.0.0.1", int(elsewhere.rsplit(":", 1)[1]))


async def wait_for_status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    deadline = time.monotonic() + scaled(30)
    while True:
        try:
            return (await client.get_workflow_handle(workflow_id).describe()).status
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_sleuth_server_serves_the_web_ui_and_persists_to_sqlite(tmp_path: Path) -> None:
    port = free_port_pair()
    db_file = tmp_path / "server" / "temporal.sqlite"
    process, banner = start_foreground_server(
        "--port", str(port), "--ui-port", str(port + 1000), "--db-file", str(db_file)
    )
    try:
        with urllib.request.urlopen(
            f"http://localhost:{port + 1000}/", timeout=scaled(10)
        ) as response:
            assert response.status == 200
            assert b"<html" in response.read().lower()
        client = await connect(f"localhost:{port}")
        workflow_id = f"persisted-{uuid.uuid4()}"
        await client.start_workflow("NobodyServesThis", id=workflow_id, task_queue="nobody")
    finally:
        stop_foreground_server(process)
    assert f"gRPC    localhost:{port}" in banner and f"data    {db_file}" in banner
    assert db_file.stat().st_size > 0
    assert not port_open("127.0.0.1", port)

    process, _ = start_foreground_server(
        "--port", str(port), "--ui-port", str(port + 1000), "--db-file", str(db_file)
    )
    try:
        client = await connect(f"localhost:{port}")
        assert await wait_for_status(client, workflow_id) == WorkflowExecutionStatus.RUNNING
        await client.get_workflow_handle(workflow_id).terminate("test done")
    finally:
        stop_foreground_server(process)


async def test_sleuth_server_defaults_to_7233_and_the_web_ui_on_8233(
    sleuth_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if port_open("127.0.0.1", 7233) or port_open("127.0.0.1", 8233):
        pytest.skip("a server already uses the default ports 7233/8233 on this machine")
    monkeypatch.delenv("SLEUTH_EMBEDDED_ADDRESS", raising=False)
    process, banner = start_foreground_server()
    try:
        with urllib.request.urlopen("http://localhost:8233/", timeout=scaled(10)) as response:
            assert response.status == 200
        assert await temporal_answers("localhost:7233")
    finally:
        stop_foreground_server(process)
    assert "gRPC    localhost:7233" in banner
    assert "Web UI  http://localhost:8233" in banner
    assert f"data    {(sleuth_home / 'temporal.sqlite').resolve()}" in banner


def test_sleuth_server_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_sleuth(
            ["server", "--port", str(port), "--db-file", str(tmp_path / "t.db")],
            env=cli_env(),
            timeout=scaled(60),
        )
    assert result.returncode == 1
    assert f"port {port}" in result.stderr and "sleuth server --status" in result.stderr


async def test_the_time_skipping_server_from_pypi_skips_timers(
    time_env: WorkflowEnvironment,
) -> None:
    assert time_env.client.data_converter is pydantic_data_converter
    task_queue = str(uuid.uuid4())
    async with Worker(time_env.client, task_queue=task_queue, workflows=[NapWorkflow]):
        # A day of workflow time passes at once: the server skips the timer.
        slept = await time_env.client.execute_workflow(
            NapWorkflow.run, 24.0, id=f"nap-{uuid.uuid4()}", task_queue=task_queue
        )
    assert slept >= 24.0


async def test_the_dev_server_from_pypi_runs_workflows(dev_env: WorkflowEnvironment) -> None:
    assert dev_env.client.data_converter is pydantic_data_converter
    task_queue = str(uuid.uuid4())
    async with Worker(dev_env.client, task_queue=task_queue, workflows=[PingWorkflow]):
        answer = await dev_env.client.execute_workflow(
            PingWorkflow.run, "hi", id=f"ping-{uuid.uuid4()}", task_queue=task_queue
        )
    assert answer == "pong: hi"
