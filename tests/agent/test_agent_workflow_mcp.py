"""MCP tool calls inside durable agent runs: each call is its own `agent.mcp_tool` activity on the
worker's connection to the real MCP test server (`tests.helpers.mcp_server`), over stdio and HTTP.

The model is scripted; the server's side effects and attempts are files the test reads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sleuth import App
from sleuth.activities.agent_models import AgentOutcome, AgentRequest
from sleuth.activities.errors import unwrap_cause
from sleuth.agent.state import LoopState
from sleuth.runtime.artifacts import default_artifact_store, get_json
from sleuth.tools.mcp import MCP_CALL_LOST
from sleuth.workers.worker import build_worker
from sleuth.workflows import AgentWorkflow
from tests.helpers.apps.mcp_app import ROOT, STATE_ENV, Plan, build_app
from tests.helpers.ports import free_ports
from tests.helpers.worker_processes import wait_for

# Retries a second apart at most: the crash tests retry once.
QUICK_RETRY = {"mcp": {"retry": {"initial_interval_seconds": 0.2, "maximum_interval_seconds": 1}}}


async def run(env: WorkflowEnvironment, app: App) -> tuple[AgentOutcome, WorkflowHandle[Any, Any]]:
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        handle = await env.client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="researcher", prompt="When was Acme founded?", steps=QUICK_RETRY),
            id=f"mcp-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        outcome = await handle.result()
    return outcome, handle


def evidence(outcome: AgentOutcome) -> LoopState:
    return LoopState.model_validate(get_json(default_artifact_store(), outcome.state_ref))


async def mcp_activities(handle: WorkflowHandle[Any, Any]) -> tuple[list[str], list[int]]:
    """The summaries of the scheduled `agent.mcp_tool` activities, and their attempt numbers."""
    summaries, attempts = [], []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name == "agent.mcp_tool":
                summaries.append(json.loads(event.user_metadata.summary.data))
        if event.HasField("activity_task_started_event_attributes"):
            attempts.append(event.activity_task_started_event_attributes.attempt)
    return summaries, attempts


def attempts(state: Path, tool: str) -> list[str]:
    log = state / "attempts"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(f"{tool} ")]


@pytest.fixture
def http_kb(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    state = tmp_path / "http-state"
    port = free_ports()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.mcp_server", "--http", str(port)],
        cwd=ROOT,
        env={**os.environ, STATE_ENV: str(state)},
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp", state
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


async def _listening(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as client:
            await client.get(url, timeout=1.0)
        return True
    except httpx.HTTPError:
        return False


SEARCH: Plan = [("kb_search", {"query": "acme"})]


async def test_a_durable_run_calls_an_mcp_tool_over_stdio(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    outcome, handle = await run(time_env, build_app(tmp_path, SEARCH))

    assert outcome.message == "Answer: kb hit for 'acme': Acme Corp was founded in 1987 in Oslo."
    [item] = evidence(outcome).evidence
    assert (item.tool, item.success, item.arguments) == ("kb_search", True, {"query": "acme"})
    assert "founded in 1987" in item.output
    summaries, _ = await mcp_activities(handle)
    assert summaries == ['mcp kb.search({"query": "acme"})']
    assert len(attempts(tmp_path, "search")) == 1


async def test_a_durable_run_calls_an_mcp_tool_over_streamable_http(
    time_env: WorkflowEnvironment, http_kb: tuple[str, Path]
) -> None:
    url, state = http_kb
    await wait_for(lambda: _listening(url), "the MCP HTTP server")
    outcome, handle = await run(time_env, build_app(state, SEARCH, url=url))

    assert "founded in 1987" in outcome.message
    [item] = evidence(outcome).evidence
    assert item.tool == "kb_search" and item.success
    summaries, _ = await mcp_activities(handle)
    assert summaries == ['mcp kb.search({"query": "acme"})']
    assert len(attempts(state, "search")) == 1


async def test_the_model_sees_an_mcp_tool_error(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    app = build_app(tmp_path, [("kb_fail", {"reason": "index offline"})])
    outcome, _ = await run(time_env, app)

    [item] = evidence(outcome).evidence
    assert not item.success
    assert "the knowledge base refused: index offline" in item.output
    # The scripted model answers with every tool output it was shown.
    assert "the knowledge base refused: index offline" in outcome.message


async def test_an_idempotent_call_is_retried_on_a_restarted_server_without_a_duplicate(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    app = build_app(tmp_path, [("kb_upsert", {"key": "acme", "value": "founded 1987"})])
    outcome, handle = await run(time_env, app)

    # The first attempt's server wrote, then died before answering; the retried activity ran the
    # call again on a new server process, and the keyed write left one record.
    tried = attempts(tmp_path, "upsert")
    assert len(tried) == 2
    assert tried[0].split("pid=")[1] != tried[1].split("pid=")[1]
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["acme"]
    assert (tmp_path / "store" / "acme").read_text() == "founded 1987"
    [item] = evidence(outcome).evidence
    assert item.success and item.output == "stored acme"
    summaries, started = await mcp_activities(handle)
    assert summaries == ['mcp kb.upsert({"key": "acme", "value": "founded 1987"})']
    assert max(started) == 2
    assert app.mcp.connection("kb").starts == 2


async def test_a_non_idempotent_call_whose_server_dies_is_a_tool_error_not_a_retry(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    app = build_app(tmp_path, [("kb_append", {"line": "invoice 7 paid"})])
    outcome, handle = await run(time_env, app)

    assert len(attempts(tmp_path, "append")) == 1
    assert (tmp_path / "ledger").read_text() == "invoice 7 paid\n"
    [item] = evidence(outcome).evidence
    assert not item.success and item.error == MCP_CALL_LOST
    assert "was not retried" in outcome.message
    _, started = await mcp_activities(handle)
    assert max(started) == 1


async def test_a_run_may_name_its_mcp_servers(
    time_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    app = build_app(tmp_path, SEARCH)
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        named = await time_env.client.execute_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="researcher", prompt="Acme?", mcp_servers=["kb"]),
            id=f"mcp-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        unknown = await time_env.client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="researcher", prompt="Acme?", mcp_servers=["tickets"]),
            id=f"mcp-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await unknown.result()
    assert "founded in 1987" in named.message
    assert "unknown MCP server 'tickets'; registered: kb" in str(unwrap_cause(failure.value))


@pytest.mark.parametrize(
    "given",
    [
        [{"name": "kb", "command": "sh", "args": ["-c", "touch /tmp/owned"]}],
        ["http://attacker.example/mcp"],
        ["npx some-server"],
    ],
    ids=["config", "url", "command"],
)
async def test_a_workflow_input_cannot_give_an_mcp_command_or_url(
    time_env: WorkflowEnvironment, tmp_path: Path, given: list[object]
) -> None:
    app = build_app(tmp_path, SEARCH)
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        handle = await time_env.client.start_workflow(
            "AgentWorkflow",
            {"agent": "researcher", "prompt": "Acme?", "mcp_servers": given},
            id=f"mcp-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    message = str(unwrap_cause(failure.value))
    assert "mcp_servers takes the names of MCP servers configured on the worker" in message
    assert "never a command, URL or config" in message
    assert not (tmp_path / "attempts").exists()  # no tool ran
