"""Scans whose items each run a registered agent (`{"agent": NAME}`), not a research config."""

from __future__ import annotations

import uuid

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.scan_models import ScanRequest
from sleuth.agent import Agent
from sleuth.apps.app import App
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, structured, text, tool_call
from sleuth.scans.knowledge import ItemRef, KnowledgeProvider, KnowledgeRow, agent_item
from sleuth.scans.sinks import SQLiteRowSink
from sleuth.tools import tool
from sleuth.workers.worker import build_worker
from sleuth.workflows import KnowledgeScanWorkflow

looked_up: list[str] = []


class HostFinding(BaseModel):
    summary: str
    risk: str


class Hosts(KnowledgeProvider):
    def list_items(self) -> list[ItemRef]:
        return [ItemRef(name=h, provider="hosts") for h in ("web-1", "db-1", "cache-1")]

    def describe_item(self, ref: ItemRef) -> str:
        return f"Assess host {ref.name}"

    def to_row(self, ref: ItemRef, result: HostFinding) -> KnowledgeRow:
        return KnowledgeRow(
            id=ref.name, data={**result.model_dump(), "kind": type(result).__name__}
        )


@tool
def inspect_host(host: str) -> str:
    """What the inventory knows about a host."""
    looked_up.append(host)
    return f"{host}: patched 3 days ago"


def _host_agent_turn(call: ModelCall) -> ModelResponse:
    host = call.messages[1].content.split()[-1]
    if not any(m.role == "tool" for m in call.messages):
        return tool_call("inspect_host", host=host)
    return structured({"summary": f"{host} is patched", "risk": "low"})


def host_agent() -> Agent:
    return Agent(
        ScriptedModel(responder=_host_agent_turn),
        tools=[inspect_host],
        output_schema=HostFinding,
        name="host-analyst",
    )


def agent_scan_app() -> App:
    app = App()
    app.provider("hosts", Hosts())
    app.agent("host-analyst", host_agent)
    return app


async def _run(env: WorkflowEnvironment, app: App, request: ScanRequest):
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        return await env.client.execute_workflow(
            KnowledgeScanWorkflow.run, request, id=f"scan-{uuid.uuid4()}", task_queue=task_queue
        )


async def test_a_scan_runs_a_registered_agent_per_item_with_a_row_each(
    dev_env: WorkflowEnvironment,
) -> None:
    looked_up.clear()
    request = ScanRequest(provider="hosts", agent="host-analyst", scan_id="hosts-1")
    outcome = await _run(dev_env, agent_scan_app(), request)
    assert (outcome.items_total, outcome.rows_written, outcome.failed_count) == (3, 3, 0)
    rows = {r.item_id: r.data for r in SQLiteRowSink().records("hosts-1")}
    assert rows["db-1"] == {"summary": "db-1 is patched", "risk": "low", "kind": "HostFinding"}
    assert sorted(looked_up) == ["cache-1", "db-1", "web-1"], "each item had its own agent run"


async def test_an_unknown_agent_fails_the_scan_at_once(dev_env: WorkflowEnvironment) -> None:
    with pytest.raises(WorkflowFailureError) as failure:
        await _run(dev_env, agent_scan_app(), ScanRequest(provider="hosts", agent="nobody"))
    assert "unknown agent 'nobody'; registered: host-analyst" in str(failure.value.cause)


def test_a_scan_names_research_or_agent_not_both() -> None:
    with pytest.raises(ValidationError, match="give research or agent, not both"):
        ScanRequest(provider="hosts", research="default", agent="host-analyst")
    assert ScanRequest(provider="hosts").research == "default"
    assert ScanRequest(provider="hosts", agent="a").research is None


async def test_agent_item_in_process_and_the_default_row_of_a_plain_answer() -> None:
    class Plain(KnowledgeProvider):
        def list_items(self) -> list[ItemRef]:
            return [ItemRef(id="x")]

        def describe_item(self, ref: ItemRef) -> str:
            return "say hi"

    agent = Agent(ScriptedModel([text("hi")]))
    row = await agent_item(Plain(), agent, ItemRef(id="x"))
    assert row.id == "x"
    assert row.data["message"] == "hi"
    assert row.data["stop_reason"] == "completed"
