"""DecomposeWorkflow: child workflows per subtask, retried activities, the shared budget, the tree query."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.decompose_models import DecomposeConfig, DecomposeInput
from sleuth.activities.policy import ActivitySettings, RetrySettings
from sleuth.apps.app import App
from sleuth.flows.decompose import Budget, DeepDecomposer
from sleuth.models import RetryableModelError
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.tools import tool
from sleuth.workers.worker import build_worker
from sleuth.workflows import DecomposeWorkflow
from tests.flows.test_decompose import decision_task, is_decision, split_into

FAST_RETRY = DecomposeConfig(
    solve=ActivitySettings(heartbeat_seconds=30, retry=RetrySettings(initial_interval_seconds=0.1)),
    decide=ActivitySettings(retry=RetrySettings(initial_interval_seconds=0.1)),
)


def first_user(call: ModelCall) -> str:
    return next(m.content for m in call.messages if m.role == "user")


def tree_app(children: dict[str, list[str]], *, fail_once: str | None = None, **deep: object):
    """An App with agent "deep": leaves call `lookup` once then answer; the `fail_once` leaf's
    model raises a retryable error once, after its tool call."""
    lookups: list[str] = []
    failures: list[str] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        lookups.append(topic)
        return f"fact about {topic}"

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if is_decision(call):
            return text(split_into(children)(decision_task(call)))
        task = first_user(call)
        if task.startswith("Original task:"):
            return text("synthesis of " + task.splitlines()[0][len("Original task: ") :])
        if call.messages[-1].role == "user":
            return tool_call("lookup", topic=task)
        if task == fail_once and not failures:  # after its tool call: the retry must resume
            failures.append(task)
            raise RetryableModelError("provider overloaded", status_code=529)
        return text(f"{task}: {call.messages[-1].content}")

    app = App()
    app.agent(
        "deep",
        lambda: DeepDecomposer(ScriptedModel(responder=respond), tools=[lookup], **deep),  # type: ignore[arg-type]
    )
    return app, lookups, failures


async def test_durable_tree_with_a_retried_leaf(dev_env: WorkflowEnvironment) -> None:
    app, lookups, failures = tree_app({"root": ["a", "b"], "a": ["a1", "a2"]}, fail_once="b")
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            DecomposeWorkflow.run,
            DecomposeInput(agent="deep", task="root", max_depth=2, config=FAST_RETRY),
            id=f"decompose-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        result = await handle.result()
        tree = await handle.query(DecomposeWorkflow.tree)
        child = dev_env.client.get_workflow_handle(f"{handle.id}.1")
        child_description = await child.describe()
        history = await handle.fetch_history()

    assert failures == ["b"]  # the leaf's activity failed once and its retry answered
    assert result.outcome == "completed"
    assert result.answer == "synthesis of root"
    # Each leaf's tool ran exactly once: b's retry resumed from the heartbeated checkpoint.
    assert sorted(lookups) == ["a1", "a2", "b"]
    assert result.spent.tool_calls == 3
    assert [c.task for c in tree.children] == ["a", "b"]
    assert [c.task for c in tree.children[0].children] == ["a1", "a2"]
    assert tree.children[0].workflow_id == f"{handle.id}.1"
    assert tree.children[0].children[1].workflow_id == f"{handle.id}.1.2"
    assert all(c.status == "done" for c in tree.children)
    assert await child_description.static_summary() == "subtask 1 at depth 1: a"
    summaries = [
        e.user_metadata.summary.data.decode()
        for e in history.events
        if e.HasField("user_metadata") and e.user_metadata.HasField("summary")
    ]
    assert any("decide (depth 0): root" in s for s in summaries)
    assert any("synthesize 2 results" in s for s in summaries)
    memo = await child_description.memo()
    assert memo["subtasks"] == 2 and memo["status"] == "done"


async def test_durable_shared_budget_stops_a_wide_tree(time_env: WorkflowEnvironment) -> None:
    app, lookups, _ = tree_app(
        {"root": [f"leaf{i}" for i in range(8)]}, max_fan_out=2, budget=Budget(max_tool_calls=3)
    )
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        result = await time_env.client.execute_workflow(
            DecomposeWorkflow.run,
            DecomposeInput(agent="deep", task="root"),
            id=f"decompose-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    assert len(lookups) <= 3
    assert result.spent.tool_calls == len(lookups)
    assert result.outcome == "budget_exhausted"
    assert result.tree.count("skipped") >= 5
    assert "the budget ran out" in result.answer.lower()


async def test_durable_depth_zero_means_three(time_env: WorkflowEnvironment) -> None:
    decisions: list[str] = []

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if is_decision(call):
            decisions.append(decision_task(call))
            return text(json.dumps({"direct": False, "subtasks": [decision_task(call) + "+"]}))
        return text("leaf answer")

    app = App()
    app.agent("deep", lambda: DeepDecomposer(ScriptedModel(responder=respond), max_depth=1))
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        result = await time_env.client.execute_workflow(
            DecomposeWorkflow.run,
            DecomposeInput(agent="deep", task="t", max_depth=0),
            id=f"decompose-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    assert decisions == ["t", "t+", "t++"]
    assert result.tree.children[0].children[0].children[0].mode == "direct"


async def test_tree_query_shows_the_tree_while_it_runs(time_env: WorkflowEnvironment) -> None:
    release = asyncio.Event()

    @tool
    async def slow_lookup(topic: str) -> str:
        """Look a topic up (waits until the test releases it)."""
        await release.wait()
        return f"fact about {topic}"

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if is_decision(call):
            return text(split_into({"root": ["x", "y"]})(decision_task(call)))
        if call.messages[-1].role == "user" and not first_user(call).startswith("Original"):
            return tool_call("slow_lookup", topic=first_user(call))
        return text("done")

    app = App()
    app.agent(
        "deep",
        lambda: DeepDecomposer(ScriptedModel(responder=respond), tools=[slow_lookup]),
    )
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        handle = await time_env.client.start_workflow(
            DecomposeWorkflow.run,
            DecomposeInput(agent="deep", task="root", max_depth=1),
            id=f"decompose-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        while True:
            tree = await handle.query(DecomposeWorkflow.tree)
            if len(tree.children) == 2 and all(c.status == "running" for c in tree.children):
                break
            await asyncio.sleep(0.05)
        assert tree.status == "running" and tree.mode == "decomposed"
        assert [c.workflow_id for c in tree.children] == [f"{handle.id}.1", f"{handle.id}.2"]
        release.set()
        result = await handle.result()
    assert [c.status for c in result.tree.children] == ["done", "done"]


async def test_unknown_agent_fails_at_once_naming_the_registered_ones(
    time_env: WorkflowEnvironment,
) -> None:
    app, _, _ = tree_app({})
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        with pytest.raises(WorkflowFailureError) as failure:
            await time_env.client.execute_workflow(
                DecomposeWorkflow.run,
                DecomposeInput(agent="nope", task="t"),
                id=f"decompose-{uuid.uuid4()}",
                task_queue=task_queue,
            )
    assert "unknown agent 'nope'; registered: deep" in str(failure.value.cause)
