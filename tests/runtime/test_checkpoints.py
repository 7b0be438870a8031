"""Checkpoint journals: a retry resumes without any heartbeat, damaged checkpoints fall back, and an
attempt the server gave up on stops writing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from sleuth.activities.agent import AgentActivities
from sleuth.activities.agent_models import StepInput
from sleuth.activities.checkpoints import (
    Journal,
    SupersededAttemptError,
    current_journal_name,
    journal_name,
    journal_result,
)
from sleuth.activities.heartbeat import checkpointing
from sleuth.activities.research import ResearchActivities
from sleuth.activities.research_models import NodeInput
from sleuth.activities.scan import ScanActivities
from sleuth.activities.scan_models import ResearchItemInput
from sleuth.agent import Agent
from sleuth.agent.state import LoopState
from sleuth.apps.app import App
from sleuth.deepagent import SubAgentDef, create_deepagent
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import create_research_workflow, node_of_request
from sleuth.runtime.artifacts import LocalArtifactStore, default_artifact_store
from sleuth.scans.knowledge import ItemRef, KnowledgeProvider
from sleuth.tools import tool


def attempt(number: int, *, details: list[object] | None = None) -> ActivityEnvironment:
    """An activity environment for attempt `number` of one activity (the same journal)."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        attempt=number,
        heartbeat_details=details or [],
        heartbeat_timeout=timedelta(seconds=20),
    )
    env.beats = []  # type: ignore[attr-defined]
    env.on_heartbeat = lambda *args: env.beats.append(args)  # type: ignore[attr-defined]
    return env


async def save_iterations(store: LocalArtifactStore, counts: list[int]) -> list[str]:
    """Resume, then save a checkpoint per count; returns the references (as a loop would)."""
    refs = []
    async with checkpointing(store) as (_, save):
        for count in counts:
            await save(LoopState(iterations=count))
            refs.append(current_ref(store))
    return refs


async def resumed_iterations(store: LocalArtifactStore) -> int | None:
    async with checkpointing(store) as (checkpoint, _):
        return None if checkpoint is None else checkpoint.iterations


def current_ref(store: LocalArtifactStore) -> str:
    raw = store.read_pointer(current_journal_name())
    assert raw is not None
    return str(json.loads(raw)["checkpoints"][0])


def artifact_path(store: LocalArtifactStore, ref: str) -> Path:
    digest = ref.removeprefix("sha256:")
    return store.root / digest[:2] / digest[2:]


@pytest.fixture
def store(tmp_path: Path) -> LocalArtifactStore:
    return LocalArtifactStore(tmp_path / "artifacts")


async def test_a_retry_resumes_from_the_journal_when_no_heartbeat_reached_the_server(
    store: LocalArtifactStore,
) -> None:
    await attempt(1).run(save_iterations, store, [1, 2, 3])
    retry = attempt(2, details=[])
    assert await retry.run(resumed_iterations, store) == 3


async def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(
    store: LocalArtifactStore, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = await attempt(1).run(save_iterations, store, [1, 2, 3])
    artifact_path(store, refs[2]).write_bytes(b'{"loop": {"iterations": 30}}')
    retry = attempt(2)
    assert await retry.run(resumed_iterations, store) == 2
    logged = capsys.readouterr()
    assert "checkpoint.fallback" in logged.out + logged.err
    # The timer's beats carry the checkpoint it resumed from and the warning, for the Web UI.
    beat = retry.beats[-1]  # type: ignore[attr-defined]
    assert beat[0] == refs[1] and "corrupt" in beat[1]

    artifact_path(store, refs[1]).unlink()
    assert await attempt(3).run(resumed_iterations, store) == 1


async def test_with_no_readable_checkpoint_the_step_starts_from_its_input_and_goes_on(
    store: LocalArtifactStore,
) -> None:
    refs = await attempt(1).run(save_iterations, store, [1, 2, 3])
    for ref in refs:
        artifact_path(store, ref).write_bytes(b"garbage")
    retry = attempt(2)
    assert await retry.run(resumed_iterations, store) is None
    assert any("starts again from its input" in w for w in retry.beats[-1])  # type: ignore[attr-defined]
    # The run goes on: the next attempt's checkpoints work as before.
    await attempt(3).run(save_iterations, store, [7])
    assert await attempt(4).run(resumed_iterations, store) == 7


async def test_a_damaged_journal_falls_back_to_the_heartbeated_checkpoint(
    store: LocalArtifactStore,
) -> None:
    refs = await attempt(1).run(save_iterations, store, [1, 2])
    pointer = next((store.root / "pointers").glob("[0-9a-f]" * 64))
    pointer.write_bytes(b'{"attempt": 1, "checkp')
    assert await attempt(2, details=[refs[0]]).run(resumed_iterations, store) == 1
    pointer.write_bytes(b"\xff\xfe not json")
    assert await attempt(3, details=["not a reference"]).run(resumed_iterations, store) is None


async def test_an_attempt_the_server_gave_up_on_stops_at_its_next_save(
    store: LocalArtifactStore,
) -> None:
    first_saved, second_claimed = asyncio.Event(), asyncio.Event()

    async def old_attempt() -> None:
        async with checkpointing(store) as (_, save):
            await save(LoopState(iterations=1))
            first_saved.set()
            await second_claimed.wait()
            await save(LoopState(iterations=2))

    async def new_attempt() -> int | None:
        await first_saved.wait()
        async with checkpointing(store) as (checkpoint, save):
            second_claimed.set()
            await save(LoopState(iterations=10))
            return None if checkpoint is None else checkpoint.iterations

    old, new = await asyncio.gather(
        attempt(1).run(old_attempt), attempt(2).run(new_attempt), return_exceptions=True
    )
    assert isinstance(old, SupersededAttemptError) and new == 1
    assert await attempt(2).run(resumed_iterations, store) == 10
    with pytest.raises(SupersededAttemptError):
        await attempt(1).run(resumed_iterations, store)


async def test_finished_subagent_loops_leave_the_journal_once_their_parent_saved(
    store: LocalArtifactStore,
) -> None:
    async def journal_steps() -> list[set[str]]:
        journal = await Journal.open(store)
        seen = []
        await journal.save_child("a", LoopState(iterations=1))
        await journal.save_child("a/b", LoopState(iterations=1))
        journal.child_finished("a/b")
        seen.append(set(journal._entries["children"]))
        await journal.save_child("a", LoopState(iterations=2))  # holds b's answer
        seen.append(set(journal._entries["children"]))
        journal.child_finished("a")
        assert journal.resume_child("a") is not None  # until the parent has saved
        await journal.save(loop=LoopState(iterations=3))
        seen.append(set(journal._entries.get("children", {})))
        return seen

    assert await attempt(1).run(journal_steps) == [{"a", "a/b"}, {"a"}, set()]


# -- real activities ------------------------------------------------------------------------------


async def test_research_execute_killed_after_tool_calls_does_not_repeat_them(
    sleuth_home: Path,
) -> None:
    """The issue's probe: the worker dies right after a tool call; the retry runs it again."""
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
            stop_when_covered=False,  # several tool calls in one execute step
            model=ScriptedModel(responder=respond),
            tools=[lookup],
        ),
    )
    request = NodeInput(research="r", prompt="How many widgets did Acme ship?")
    with pytest.raises(RuntimeError, match="SIGKILL"):
        await attempt(1).run(ResearchActivities(app).execute, request)
    output = await attempt(2).run(ResearchActivities(app).execute, request)
    assert calls == [f"item-{n}" for n in range(1, 6)]
    assert output.digest.evidence_count == 5


class Killed(BaseException):
    """Stands in for SIGKILL inside a tool: no `except Exception` in the loop can catch it."""


def market_app(child_calls: list[str], crashes: list[BaseException]) -> App:
    @tool
    def deep_dive(company: str) -> str:
        """Pricing of one company."""
        child_calls.append(company)
        return f"{company} charges $40"

    def parent(call: ModelCall) -> ModelResponse:
        if not any(m.role == "tool" for m in call.messages):
            return tool_call("task", subagent_type="pricing", description="What does Acme charge?")
        return text("Acme charges $40.")

    def child(call: ModelCall) -> ModelResponse:
        done = [m for m in call.messages if m.role == "tool"]
        if len(done) == 1 and crashes:
            raise crashes.pop()
        if len(done) < 2:
            return tool_call("deep_dive", company=f"Acme-{len(done) + 1}")
        return text("Acme charges $40")

    pricing = SubAgentDef(
        name="pricing",
        description="Finds pricing.",
        system_prompt="Find pricing.",
        tools=[deep_dive],
        model=ScriptedModel(responder=child),
    )
    app = App()
    app.agent(
        "market",
        lambda: create_deepagent(
            model=ScriptedModel(responder=parent),
            subagents=[pricing],
            grounding=False,
            name="market",
        ),
    )
    return app


async def test_a_retried_subagent_step_resumes_the_child_where_it_stopped(
    sleuth_home: Path,
) -> None:
    child_calls: list[str] = []
    app = market_app(child_calls, [Killed()])
    activities = AgentActivities(app)
    turn = attempt(1)
    turn.info = dataclasses.replace(turn.info, activity_id="1")
    first = await turn.run(
        activities.model_turn, StepInput(agent="market", kind="model", prompt="Price Acme")
    )
    assert first.next.kind == "subagent"
    request = StepInput(
        agent="market", kind="subagent", state_ref=first.state_ref, call_id=first.next.call_id
    )
    with pytest.raises(Killed):
        await attempt(1).run(activities.subagent, request)
    assert child_calls == ["Acme-1"]
    done = await attempt(2).run(activities.subagent, request)
    assert child_calls == ["Acme-1", "Acme-2"], "the resumed child ran its first call again"
    assert done.next.kind == "model"
    # The journal records the step's result: a third attempt would return it as it is.
    assert journal_result(default_artifact_store(), current_name(attempt(2))) == done.state_ref


async def test_a_tool_step_that_finished_but_never_reported_is_not_run_again(
    sleuth_home: Path,
) -> None:
    lookups: list[str] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        lookups.append(topic)
        return f"{topic}: 12%"

    def respond(call: ModelCall) -> ModelResponse:
        if call.messages[-1].role == "user":
            return tool_call("lookup", topic="crm")
        return text("12%")

    app = App()
    app.agent("a", lambda: Agent(model=ScriptedModel(responder=respond), tools=[lookup]))
    activities = AgentActivities(app)
    turn = attempt(1)
    turn.info = dataclasses.replace(turn.info, activity_id="1")
    first = await turn.run(activities.model_turn, StepInput(agent="a", kind="model", prompt="?"))
    request = StepInput(
        agent="a", kind="tool", state_ref=first.state_ref, call_id=first.next.call_id
    )
    ran = await attempt(1).run(activities.tool, request)
    # The worker died before the server heard of the result: Temporal runs attempt 2.
    again = await attempt(2).run(activities.tool, request)
    assert lookups == ["crm"]
    assert again.state_ref == ran.state_ref and again.next.kind == "model"


def current_name(env: ActivityEnvironment) -> str:
    info = env.info
    return journal_name(
        info.workflow_namespace or "",
        info.workflow_id or "",
        info.workflow_run_id or "",
        info.activity_id,
    )


async def test_a_retried_scan_item_resumes_its_research_where_it_stopped(
    sleuth_home: Path,
) -> None:
    calls: list[str] = []
    crashes = [Killed()]

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        calls.append(topic)
        return f"{topic}: Acme shipped 40 thousand widgets"

    def respond(call: ModelCall) -> ModelResponse:
        done = sum(1 for m in call.messages if m.role == "tool")
        if node_of_request(call.messages) != "execute":
            return text("Acme shipped 40 thousand widgets.")
        if done == 2 and crashes:
            raise crashes.pop()
        return tool_call("lookup", topic=f"q{done + 1}") if done < 3 else text("done")

    class One(KnowledgeProvider):
        def list_items(self) -> list[ItemRef]:
            return [ItemRef(id="acme")]

        def describe_item(self, ref: ItemRef) -> str:
            return "How many widgets did Acme ship?"

    app = App()
    app.provider("one", One())
    app.research(
        "r",
        create_research_workflow(
            stop_when_covered=False,  # several tool calls in one execute step
            # One execute round: the tool calls counted are the resumed round's alone.
            model=ScriptedModel(responder=respond),
            tools=[lookup],
            judge_model=False,
            max_replans=0,
        ),
    )
    request = ResearchItemInput(
        provider="one", research="r", scan_id="s", sink=None, item=ItemRef(id="acme")
    )
    with pytest.raises(Killed):
        await attempt(1).run(ScanActivities(app).research_item, request)
    await attempt(2).run(ScanActivities(app).research_item, request)
    assert calls == ["q1", "q2", "q3"]
