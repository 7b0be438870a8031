"""`sleuth research` progress: one line per step, in order, from the run's one event stream; on a
terminal a spinner and the elapsed time tick through a slow step. And the Web UI's story of a run:
its `static_summary`, its `current_details`, and a bounded number of publish signals per step."""

from __future__ import annotations

import io
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, ScheduleActionStartWorkflow, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sleuth import App, tool
from sleuth.activities.agent_models import AgentRequest
from sleuth.activities.decompose_models import DecomposeInput
from sleuth.activities.events import publish_bound
from sleuth.activities.pipeline_models import PipelineInput
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.activities.scan_models import ScanRequest
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import Node, create_research_workflow
from sleuth.runtime.events import Event, emit
from sleuth.workers.cli_events import StepDisplay, showing_steps, step_outcome
from sleuth.workers.schedules import scan_schedule
from sleuth.workers.summaries import SUMMARY_CHARS, SummaryInterceptor, run_summary
from sleuth.workers.worker import build_worker
from sleuth.workflows import ResearchWorkflow
from tests.helpers.research_scripts import FACT, ResearchScript, lookup, tool_rounds
from tests.helpers.worker_processes import wait_for

QUESTION = "How fast did the CRM market grow in 2024?"
_gate = threading.Event()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@tool
def slow(topic: str) -> str:
    """Read the long market report; reports its progress until the test lets it finish."""
    part = 0
    while not _gate.wait(0.1):  # the tool's own progress cadence, not a synchronisation
        part += 1
        emit("tool.progress", tool="slow", part=part)
    return json.dumps({"topic": topic, "text": FACT, "source": "market-report.pdf"})


def execute_turn(call: ModelCall) -> ModelResponse:
    """Look the topic up, then read the slow report, then answer."""
    done = tool_rounds(call)
    if done == 0:
        return tool_call("lookup", topic="crm")
    if done == 1:
        return tool_call("slow", topic="crm-report")
    return text("Findings: " + FACT)


def progress_app() -> App:
    app = App()
    app.research(
        "progress",
        create_research_workflow(
            model=ScriptedModel(responder=ResearchScript(execute_turn=execute_turn)),
            tools=[lookup, slow],
            stop_when_covered=False,
        ),
    )
    return app


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    _gate.clear()
    try:
        yield _gate
    finally:
        _gate.set()  # never leave a worker thread waiting


@asynccontextmanager
async def research_run(
    env: WorkflowEnvironment, prompt: str = QUESTION
) -> AsyncIterator[tuple[Client, WorkflowHandle[Any, ResearchOutcome]]]:
    """A research run of `progress_app` started by a client as Sleuth connects one."""
    client = Client(
        env.client.service_client,
        namespace=env.client.namespace,
        data_converter=env.client.data_converter,
        interceptors=[SummaryInterceptor()],
    )
    task_queue = str(uuid.uuid4())
    async with build_worker(client, progress_app(), task_queue=task_queue):
        handle = await client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt=prompt, research="progress"),
            id=f"research-progress-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        yield client, handle


CARRYING = {f"research.{n.value}" for n in Node if n not in (Node.START, Node.REVIEW, Node.DONE)}
"""The activities whose output carries their last events (`NodeOutput`)."""


async def publish_signals_and_bound(handle: WorkflowHandle[Any, Any]) -> tuple[int, int]:
    """The run's `__temporal_workflow_stream_publish` signals, and the most its steps may send:
    `publish_bound` of each activity's time from scheduled to completed."""
    signals, bound = 0, 0
    scheduled: dict[int, tuple[float, bool]] = {}
    async for event in handle.fetch_history_events():
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            name = event.workflow_execution_signaled_event_attributes.signal_name
            signals += name == "__temporal_workflow_stream_publish"
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            scheduled[event.event_id] = (
                event.event_time.ToDatetime().timestamp(),
                name in CARRYING,
            )
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            start, carried = scheduled[
                event.activity_task_completed_event_attributes.scheduled_event_id
            ]
            seconds = event.event_time.ToDatetime().timestamp() - start
            bound += publish_bound(seconds, carried=carried)
    return signals, bound


async def stream_polls(handle: WorkflowHandle[Any, Any]) -> int:
    """The stream poll updates in the run's history (each a row of its Web UI timeline)."""
    polls = 0
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            polls += request.input.name == "__temporal_workflow_stream_poll"
    return polls


async def current_details(handle: WorkflowHandle[Any, Any]) -> str:
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


def step_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line[2:3] in ("→", "✓", "✗")]


async def test_in_a_pipe_each_step_prints_its_start_events_and_outcome_in_order(
    dev_env: WorkflowEnvironment, gate: threading.Event
) -> None:
    out = io.StringIO()
    async with research_run(dev_env) as (client, handle), showing_steps(client, handle.id, out):
        # The lookup's line comes while execute still runs (the slow tool holds it).
        await wait_for(lambda: '· lookup("topic": "crm") ok' in out.getvalue(), "the lookup")
        assert "✓ execute" not in out.getvalue()
        gate.set()
        outcome = await handle.result()
    lines = step_lines(out.getvalue())
    nodes = [node.value.replace("_", " ") for node in outcome.final_state.nodes]
    assert [line.split(" — ")[0] for line in lines] == [
        line for node in nodes for line in (f"→ {node}", f"✓ {node}")
    ]
    assert "✓ execute — evidence items so far: 2" in lines
    assert "✓ grounding eval — grounding score 100% (needs 65%)" in lines
    text_out = out.getvalue()
    start, end = text_out.index("→ execute"), text_out.index("✓ execute")
    for detail in ('· lookup("topic": "crm") ok', '· slow("topic": "crm-report") ok'):
        assert start < text_out.index(detail) < end, text_out


async def test_on_a_terminal_a_slow_step_shows_a_ticking_spinner_and_few_publishes(
    dev_env: WorkflowEnvironment, gate: threading.Event
) -> None:
    screen = io.StringIO()
    console = Console(force_terminal=True, file=screen, width=120, color_system=None)

    def frames() -> list[str]:
        return [f for f in re.split(r"[\r\n]", ANSI.sub("", screen.getvalue())) if f.strip()]

    def running_execute(seconds: int) -> bool:
        pattern = re.compile(rf"[{SPINNER}] execute\s+0:00:0{seconds}")
        return any(pattern.search(frame) for frame in frames())

    async with research_run(dev_env) as (client, handle):
        async with showing_steps(client, handle.id, io.StringIO(), console=console):
            # Nothing reaches the display while the slow tool works: the line ticks by itself.
            await wait_for(
                lambda: running_execute(3), "the execute line at 3 s", detail=screen.getvalue
            )
            assert running_execute(1) and running_execute(2)
            spinning = {f[f.index("execute") - 2] for f in frames() if " execute " in f}
            assert len(spinning & set(SPINNER)) >= 2, "the spinner turns"
            assert "**Running:** execute" in await current_details(handle)
            gate.set()
            outcome = await handle.result()
        signals, bound = await publish_signals_and_bound(handle)
        polls = await stream_polls(handle)
        done_details = await current_details(handle)
    printed = frames()
    finished = [f.strip() for f in printed if f[2:4] == "✓ "]
    nodes = [node.value.replace("_", " ") for node in outcome.final_state.nodes]
    assert [re.sub(r" — .*| \(\d+\.\d s\)$", "", f) for f in dict.fromkeys(finished)] == [
        f"✓ {node}" for node in nodes
    ]
    [execute] = [f for f in dict.fromkeys(finished) if f.startswith("✓ execute")]
    assert re.fullmatch(r"✓ execute — evidence items so far: 2 \((\d+\.\d) s\)", execute)
    assert float(execute.rsplit("(", 1)[1].split()[0]) >= 3.0
    assert any('· slow("topic": "crm-report") ok' in f for f in printed)
    # The slow tool published an event every 0.1 s for 3+ s; the step sent a few batches.
    assert 0 < signals <= bound, (signals, bound)
    # The display followed the whole run by queries: no poll rows in its timeline.
    assert polls == 0
    assert done_details.startswith("**Done:** grounded")
    assert "grounding score: 100% (needs 65%)" in done_details
    assert "evidence items: 2" in done_details


async def test_every_run_has_the_question_as_its_summary(
    dev_env: WorkflowEnvironment, gate: threading.Event
) -> None:
    gate.set()
    long_question = "Which CRM vendors grew fastest? " * 20
    async with research_run(dev_env, long_question) as (_, handle):
        await handle.result()
        summary = await (await handle.describe()).static_summary()
    assert summary is not None and summary.startswith("research progress: Which CRM vendors")
    assert len(summary) == SUMMARY_CHARS and summary.endswith("…")


def test_each_workflow_input_has_a_summary() -> None:
    assert run_summary([ResearchRequest(prompt=QUESTION, research="market")]) == (
        f"research market: {QUESTION}"
    )
    assert run_summary([AgentRequest(agent="helper", prompt="Price\n  Acme")]) == (
        "agent helper: Price Acme"
    )
    assert run_summary([DecomposeInput(agent="deep", task="Size CRM")]) == "agent deep: Size CRM"
    assert run_summary([PipelineInput(pipeline="brief", task="Brief me")]) == (
        "pipeline brief: Brief me"
    )
    assert run_summary([ScanRequest(provider="rows", research="market")]) == (
        "scan rows with research market"
    )
    assert run_summary([]) is None and run_summary([{"prompt": "x"}]) is None


def test_each_step_outcome_says_what_the_step_found() -> None:
    assert step_outcome({"node": "execute", "evidence_count": 0}) == (
        "evidence items so far: 0 (no tool call has returned evidence yet)"
    )
    assert step_outcome(
        {"node": "grounding_eval", "grounding_score": 0.4, "grounding_threshold": 0.65}
    ) == ("grounding score 40% (needs 65%)")
    assert (
        step_outcome(
            {
                "node": "replan",
                "replan_count": 1,
                "reason": "score 40% < 65%; 1/2 sub-questions not found",
            }
        )
        == "replan 1 (score 40% < 65%; 1/2 sub-questions not found)"
    )
    assert step_outcome({"node": "regenerate", "regeneration_count": 2, "reason": None}) == (
        "regeneration 2"
    )
    assert step_outcome({"node": "summarize"}) == ""


def test_a_failed_step_and_a_review_show_as_steps() -> None:
    out = io.StringIO()

    def event(event_type: str, at: float, **data: object) -> Event:
        return Event(event_type=event_type, run_id="research-1", data=data, timestamp=at)

    with StepDisplay(out) as display:
        display.show(event("research.node.started", 1.0, node="summarize"))
        display.show(event("research.node.finished", 2.0, node="summarize"))
        display.show(event("research.review.awaiting", 3.0, review_id="summary-1", kind="summary"))
        display.show(event("research.review", 4.0, review_id="summary-1", decision="approve"))
        display.show(event("research.node.started", 5.0, node="grounding_eval"))
        display.show(event("research.node.failed", 6.0, node="grounding_eval", error="judge down"))
    assert out.getvalue().splitlines() == [
        "  → summarize",
        "  ✓ summarize",
        "  … awaiting review: decide with `sleuth review research-1`",
        "  ✓ review summary-1 — approve",
        "  → grounding eval",
        "  ✗ grounding eval — judge down",
    ]


def test_a_scheduled_scan_has_a_summary() -> None:
    schedule = scan_schedule(
        ScanRequest(provider="rows"), name="nightly", cron="0 2 * * *", task_queue="q"
    )
    assert isinstance(schedule.action, ScheduleActionStartWorkflow)
    assert schedule.action.static_summary == "scan rows with research default"


def test_the_run_page_gets_the_same_step_lines_as_the_terminal() -> None:
    """`describe_event` (the `line` of each SSE message `sleuth serve` sends its run page) says
    what a step found as the terminal's step lines do, and gives the node counters no line."""
    from sleuth.workers.cli_events import describe_event

    def line(event_type: str, **data: Any) -> str:
        return describe_event(
            Event(event_type=event_type, run_id="r", data=data, timestamp=0.0)
        ).strip()

    assert line("research.node.started", node="grounding_eval") == "→ grounding eval"
    assert line(
        "research.node.finished", node="grounding_eval", grounding_score=0.5,
        grounding_threshold=0.65,
    ) == "✓ grounding eval — grounding score 50% (needs 65%)"  # fmt: skip
    assert line("research.node.failed", node="execute", error="boom") == "✗ execute — boom"
    assert line("research.node", node="execute", replan_count=0) == ""
    assert line(
        "research.finished", status="partial", grounding_score=1.0, end_reason="max_replans"
    ) == "■ finished: partial, grounding 100% (max_replans)"  # fmt: skip
    assert line("agent.reflexion", iteration=2, verdict="revise", issues=["empty result"]) == (
        "· reflexion 2: revise — empty result"
    )
