"""Processes for crash tests: start `sleuth worker` (and `sleuth server`) apart from the test, kill
or stop them, wait, and read what a killed step left behind (its checkpoint journal)."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle

from sleuth.activities.checkpoints import journal_name, read_journal
from sleuth.runtime.artifacts import default_artifact_store
from tests.helpers.cli_process import popen_sleuth
from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


def start_sleuth_worker(
    app_target: str,
    address: str,
    task_queue: str,
    *,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    args: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """`sleuth worker --app APP --task-queue Q [ARGS]` against `address`, in its own process
    group."""
    output = log.open("ab") if log is not None else None
    try:
        return popen_sleuth(  # type: ignore[return-value]
            ["worker", "--app", app_target, "--task-queue", task_queue, *args],
            cwd=ROOT,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                **(env or {}),
                "TEMPORAL_ADDRESS": address,
            },
            stdout=output,
            stderr=subprocess.STDOUT if output is not None else None,
            start_new_session=True,
        )
    finally:
        if output is not None:
            output.close()


def stop(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    """Signal the worker's process group (SIGKILL is a crash) and reap it."""
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, sig)
    try:
        process.wait(timeout=scaled(30))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


async def wait_for(
    condition: Callable[[], bool | Awaitable[bool]],
    what: str,
    *,
    timeout: float | None = None,
    detail: Callable[[], str] | None = None,
) -> None:
    """Poll `condition` (sync or async) until it holds, for `timeout` seconds (default
    `scaled(90)`); fail naming `what` (and `detail()`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (timeout if timeout is not None else scaled(90))
    while True:
        outcome = condition()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if loop.time() > deadline:
            extra = f"\n{detail()}" if detail is not None else ""
            raise AssertionError(f"timed out waiting for {what}{extra}")
        await asyncio.sleep(0.05)


async def pending_journal(handle: WorkflowHandle, activity_type: str) -> dict[str, Any] | None:
    """The newest durable checkpoint of the workflow's running `activity_type` activity (None
    while it has none), read from the artifact store as a retried attempt would."""
    description = await handle.describe()
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name == activity_type:
            name = journal_name(
                handle._client.namespace, description.id, description.run_id, pending.activity_id
            )
            return await asyncio.to_thread(read_journal, default_artifact_store(), name)
    return None


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def free_port_pair() -> int:
    """A free port P whose Web UI port P + 1000 is free too."""
    return free_ports(1000)


def start_foreground_server(
    *args: str, command: list[str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Run `sleuth server ARGS` (or `command`); returns the process and its output once it says
    it is ready."""
    if command is None:
        process: Any = popen_sleuth(
            ["server", *args], env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
    else:
        process = subprocess.Popen(
            command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith("Ctrl-C stops it."):
            return process, "".join(seen)
    process.kill()
    raise AssertionError("`sleuth server` never became ready:\n" + "".join(seen))


def stop_foreground_server(process: subprocess.Popen[str], sig: int = signal.SIGINT) -> str:
    """Ctrl-C (or `sig`) for `sleuth server`; returns the rest of its output."""
    process.send_signal(sig)
    output, _ = process.communicate(timeout=scaled(60))
    assert process.returncode == 0, output
    return output
