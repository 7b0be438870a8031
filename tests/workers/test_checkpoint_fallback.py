"""The documented trade-off of a corrupt newest checkpoint (docs/architecture.md, "Checkpoints"):
the retry falls back to the checkpoint before it and runs exactly the one tool call between the
two again; every call before it stays done, and the step finishes."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

from temporalio.testing import ActivityEnvironment

from sleuth.activities.checkpoints import journal_name
from sleuth.activities.research import ResearchActivities
from sleuth.activities.research_models import NodeInput
from sleuth.apps.app import App
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import create_research_workflow, node_of_request
from sleuth.runtime.artifacts import LocalArtifactStore, default_artifact_store
from sleuth.tools import tool


def _attempt(number: int) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, attempt=number, heartbeat_details=[], heartbeat_timeout=timedelta(seconds=20)
    )
    return env


async def test_a_corrupt_newest_checkpoint_repeats_exactly_the_last_tool_call() -> None:
    calls: list[str] = []
    crashes = [RuntimeError("SIGKILL")]

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        calls.append(topic)
        return f"{topic}: Acme shipped 40 thousand widgets"

    def respond(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) != "execute":
            return text("Acme shipped 40 thousand widgets.")
        done = sum(1 for m in call.messages if m.role == "tool")
        if done == 3 and crashes:
            raise crashes.pop()
        return tool_call("lookup", topic=f"item-{done + 1}") if done < 5 else text("done")

    app = App()
    app.research(
        "r",
        create_research_workflow(
            stop_when_covered=False, model=ScriptedModel(responder=respond), tools=[lookup]
        ),
    )
    request = NodeInput(research="r", prompt="How many widgets did Acme ship?")
    first = _attempt(1)
    try:
        await first.run(ResearchActivities(app).execute, request)
    except RuntimeError as exc:
        assert "SIGKILL" in str(exc)
    assert calls == ["item-1", "item-2", "item-3"]

    store = default_artifact_store()
    assert isinstance(store, LocalArtifactStore)
    info = first.info
    pointer = store.read_pointer(
        journal_name(
            info.workflow_namespace, info.workflow_id, info.workflow_run_id, info.activity_id
        )
    )
    assert pointer is not None
    newest = str(json.loads(pointer)["checkpoints"][0]).removeprefix("sha256:")
    (store.root / newest[:2] / newest[2:]).write_bytes(b'{"damaged": true}')

    output = await _attempt(2).run(ResearchActivities(app).execute, request)
    assert calls == ["item-1", "item-2", "item-3", "item-3", "item-4", "item-5"]
    assert output.digest.evidence_count == 5, "the repeated call's evidence is counted once"
