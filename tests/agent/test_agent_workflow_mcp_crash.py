"""A worker process killed (SIGKILL) during an MCP call: its server process dies with it, and the
retried `agent.mcp_tool` step runs the call again on the next worker's server when the tool is
idempotent, or answers the model with a tool error without sending it again when it is not.

Real dev server, `sleuth worker --app tests.helpers.apps.mcp_app:app` as separate processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.agent_models import AgentRequest
from sleuth.agent.state import LoopState
from sleuth.runtime.artifacts import default_artifact_store, get_json
from sleuth.tools.mcp import MCP_CALL_LOST
from sleuth.workflows import AgentWorkflow
from tests.agent.test_agent_workflow_mcp import attempts, mcp_activities
from tests.helpers.apps.mcp_app import IDEMPOTENT_ENV, STATE_ENV
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import start_sleuth_worker, stop, wait_for

pytestmark = pytest.mark.slow

APP = "tests.helpers.apps.mcp_app:app"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _server_pid(line: str) -> int:
    return int(line.split("pid=")[1])


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
async def test_killing_the_worker_during_an_mcp_call(
    dev_env: WorkflowEnvironment, tmp_path: Path, idempotent: bool
) -> None:
    address = dev_env.client.service_client.config.target_host
    task_queue = f"mcp-crash-{uuid.uuid4()}"
    state, log = tmp_path / "state", tmp_path / "worker.log"
    extra = {
        STATE_ENV: str(state),
        IDEMPOTENT_ENV: "all" if idempotent else "none",
        "SLEUTH_STICKY_QUEUE_TIMEOUT_SECONDS": str(scaled(1)),
    }
    first = start_sleuth_worker(APP, address, task_queue, env=extra, log=log)
    second = None
    try:
        handle = await dev_env.client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(
                agent="researcher",
                prompt="Wait for the release",
                steps={"mcp": {"heartbeat_seconds": 2, "retry": {"initial_interval_seconds": 0.5}}},
            ),
            id=f"mcp-crash-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        waits = lambda: attempts(state, "wait_for_release")  # noqa: E731
        await wait_for(lambda: len(waits()) == 1, "the first MCP call", detail=log.read_text)
        first_server = _server_pid(waits()[0])
        stop(first, signal.SIGKILL)
        # The server process had one lifecycle with its worker.
        await wait_for(lambda: not _alive(first_server), "the first server to exit")

        second = start_sleuth_worker(APP, address, task_queue, env=extra, log=log)
        if idempotent:
            await wait_for(lambda: len(waits()) == 2, "the retried MCP call", detail=log.read_text)
            (state / "release").touch()
        outcome = await asyncio.wait_for(handle.result(), timeout=scaled(120))
    finally:
        stop(first, signal.SIGKILL)
        stop(second)

    [item] = LoopState.model_validate(
        get_json(default_artifact_store(), outcome.state_ref)
    ).evidence
    summaries, started = await mcp_activities(handle)
    assert summaries == ['mcp kb.wait_for_release({"key": "k1"})']
    assert max(started) == 2
    if idempotent:
        assert item.success and item.output == "released k1"
        tried = waits()
        assert len(tried) == 2 and _server_pid(tried[1]) != first_server
        assert outcome.message == "Answer: released k1"
    else:
        # Not sent again: the model was told the call may or may not have taken effect.
        assert len(waits()) == 1
        assert not item.success and item.error == MCP_CALL_LOST
        assert "was not retried" in outcome.message
