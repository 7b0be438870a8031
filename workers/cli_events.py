"""Live events in the terminal: each event of a durable run as one line, while it runs.

A research run shows as its steps (`showing_steps`), all read from the run's one event stream, so
they print in the order the workflow ran them: the workflow publishes a node's start before it
schedules the node's activity, the activity's events reach the stream before the activity
completes, and the workflow publishes the node's outcome once it has the result. On a terminal
the running step is one rich line with a spinner and its elapsed time that tick on their own;
a finished step is printed once, `✓`/`✗` and its outcome. Anywhere else (pipes, files, CI) the
same steps come as plain lines: `→ execute`, the agents' events, `✓ execute — …`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text
from temporalio.client import Client

from sleuth.runtime.events import Event
from sleuth.workers.events import follow_events
from sleuth.workers.render import terminal_console

LINE_CHARS = 140
DRAIN_SECONDS = 10.0
"""How long, once the run has ended, the display may take to read the events it has not shown."""


def describe_event(event: Event) -> str:
    """One line a person reads for `event` ("" for `research.node`, the counters a node's
    finished event says better)."""
    data = event.data
    node = str(data.get("node", "")).replace("_", " ")
    match event.event_type:
        case "research.node":
            return ""
        case "research.node.started":
            line = f"→ {node}"
        case "research.node.finished":
            outcome = step_outcome(data)
            line = f"✓ {node}" + (f" — {outcome}" if outcome else "")
        case "research.node.failed":
            line = f"✗ {node} — {data.get('error', 'failed')}"
        case "research.finished":
            score = data.get("grounding_score")
            grounding = f", grounding {score:.0%}" if isinstance(score, int | float) else ""
            line = f"■ finished: {data.get('status')}{grounding} ({data.get('end_reason')})"
        case "agent.reflexion":
            issues = "; ".join(str(i) for i in data.get("issues") or [])
            line = f"· reflexion {data.get('iteration')}: {data.get('verdict')}" + (
                f" — {issues}" if issues else ""
            )
        case "agent.iteration":
            calls = ", ".join(data.get("tool_calls") or []) or "an answer"
            line = f"· model turn {data.get('iteration')}: {calls}"
        case "agent.tool.called":
            outcome = "ok" if data.get("success") else "failed"
            arguments = json.dumps(data.get("arguments", {}), ensure_ascii=False)
            line = f"· {data.get('tool')}({arguments[1:-1]}) {outcome}"
        case "agent.tool.retry":
            line = (
                f"↻ {data.get('tool')} attempt {data.get('attempt')}/{data.get('max_attempts')} "
                f"after: {data.get('error')}"
            )
        case "agent.guardrail" | "agent.governance":
            line = f"! {event.event_type}: " + json.dumps(data, ensure_ascii=False)
        case "research.review.awaiting" | "agent.approval.awaiting":
            what = data.get("subject") or f"call {data.get('tool')}"
            line = (
                f"⏸ awaiting review {data.get('review_id')} ({what}): decide with "
                f"`sleuth review {event.run_id}`"
            )
        case "research.review":
            line = f"✓ review {data.get('review_id')}: {_decided(data)}"
        case "agent.approval":
            line = f"✓ call {data.get('tool')}: {_decided(data)}"
        case "agent.terminate":
            line = f"✓ {data.get('agent')} stopped: {data.get('stop_reason')}"
        case _:
            line = f"· {event.event_type} " + json.dumps(data, ensure_ascii=False, default=str)
    return "  " + (line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…")


def _decided(data: dict[str, object]) -> str:
    decision = str(data.get("decision"))
    return f"{decision} (timed out)" if data.get("timed_out") else decision


async def print_events(client: Client, workflow_id: str, out: TextIO) -> None:
    """Print the run's events as they arrive, until it has ended and all were read."""
    async for _, event in follow_events(client, workflow_id):
        line = describe_event(event)
        if line:
            out.write(line + "\n")
            out.flush()


@asynccontextmanager
async def showing_events(
    client: Client, workflow_id: str, out: TextIO | None
) -> AsyncIterator[None]:
    """Print the run's events to `out` (None: nothing) while the block waits for its result;
    on leaving, let the display catch up with the last events."""
    if out is None:
        yield
        return
    task = asyncio.create_task(print_events(client, workflow_id, out))
    try:
        yield
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(task), timeout=DRAIN_SECONDS)
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


STARTING = "starting the run"
BETWEEN_STEPS = "next step"


def step_outcome(data: dict[str, Any]) -> str:
    """The one-line outcome of a finished research node (its `research.node.finished` data)."""
    node = data.get("node")
    if node == "execute":
        evidence = data.get("evidence_count", 0)
        detail = f"evidence items so far: {evidence}"
        return detail + (" (no tool call has returned evidence yet)" if evidence == 0 else "")
    if node == "grounding_eval" and data.get("grounding_score") is not None:
        needs = data.get("grounding_threshold")
        score = f"grounding score {data['grounding_score']:.0%}"
        return score + (f" (needs {needs:.0%})" if needs is not None else "")
    why = f" ({data['reason']})" if data.get("reason") else ""
    if node == "replan":
        return f"replan {data.get('replan_count')}{why}"
    if node == "regenerate":
        return f"regeneration {data.get('regeneration_count')}{why}"
    return ""


@dataclass
class _Step:
    name: str
    started: float
    """Workflow time of the step's start (the event's timestamp)."""


class StepDisplay:
    """Shows a research run's events as its steps (see the module docstring): on `console` (a
    terminal) with a live spinner line, else as plain lines on `out`. `details=False` leaves
    out the agents' events under each step."""

    def __init__(
        self, out: TextIO, console: Console | None = None, *, details: bool = True
    ) -> None:
        self.out = out
        self.details = details
        self._step: _Step | None = None
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if console is not None:
            self._progress = Progress(
                TextColumn("  "),
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                refresh_per_second=8,
            )

    def __enter__(self) -> StepDisplay:
        if self._progress is not None:
            self._progress.start()
            self._running(STARTING)
        return self

    def __exit__(self, *_: object) -> None:
        if self._progress is not None:
            self._clear()
            self._progress.stop()

    def show(self, event: Event) -> None:
        """Show one event of the run."""
        data = event.data
        match event.event_type:
            case "research.node.started":
                name = str(data.get("node", "")).replace("_", " ")
                self._begin(_Step(name, event.timestamp), f"  → {name}", name)
            case "research.node.finished":
                self._end("✓", step_outcome(data), event.timestamp)
            case "research.node.failed":
                self._end("✗", str(data.get("error", "failed")), event.timestamp)
            case "research.review.awaiting":
                review_id = data.get("review_id")
                self._begin(
                    _Step(f"review {review_id}", event.timestamp),
                    f"  … awaiting review: decide with `sleuth review {event.run_id}`",
                    f"awaiting review {review_id} of the {data.get('kind')}",
                    announce=True,
                )
            case "research.review":
                self._end("✓", _decided(data), event.timestamp)
            case "research.finished":
                self._clear()
            case _ if self.details:
                line = describe_event(event)
                if line:
                    self._say("  " + line)  # under the step it belongs to

    def fail(self, reason: str) -> None:
        """Mark the running step failed (the run failed without saying which step did)."""
        if self._step is not None:
            self._end("✗", reason, None)

    def _begin(self, step: _Step, plain: str, running: str, *, announce: bool = False) -> None:
        """A step starts: its plain line in a pipe; on a terminal its live line (and the plain
        one above it when it tells the person something to do)."""
        self._step = step
        if self._progress is None or announce:
            self._say(plain)
        if self._progress is not None:
            self._running(running)

    def _end(self, mark: str, outcome: str, timestamp: float | None) -> None:
        step, self._step = self._step, None
        name = step.name if step is not None else "step"
        line = f"  {mark} {name}" + (f" — {outcome}" if outcome else "")
        if self._progress is None:
            self._say(line)
            return
        if step is not None and timestamp is not None:
            line += f" ({max(0.0, timestamp - step.started):.1f} s)"
        self._clear()
        self._say(line)
        self._running(BETWEEN_STEPS)

    def _running(self, description: str) -> None:
        assert self._progress is not None
        self._clear()
        self._task = self._progress.add_task(description, total=None)

    def _clear(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.remove_task(self._task)
            self._task = None

    def _say(self, line: str) -> None:
        if self._progress is not None:
            self._progress.console.print(Text(line), soft_wrap=True)
            return
        self.out.write(line + "\n")
        self.out.flush()


async def show_steps(client: Client, workflow_id: str, display: StepDisplay) -> None:
    """Show the run's events as steps as they arrive, until it has ended and all were read."""
    async for _, event in follow_events(client, workflow_id):
        display.show(event)


@asynccontextmanager
async def showing_steps(
    client: Client,
    workflow_id: str,
    out: TextIO,
    *,
    details: bool = True,
    console: Console | None = None,
) -> AsyncIterator[StepDisplay]:
    """Show the research run's steps on `out` (rich when it is a terminal, or on `console`)
    while the block waits for its result; on leaving, even when the run failed, let the display
    catch up with the last events."""
    with StepDisplay(out, console or terminal_console(out), details=details) as display:
        task = asyncio.create_task(show_steps(client, workflow_id, display))

        async def catch_up() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), timeout=DRAIN_SECONDS)

        try:
            yield display
        except Exception:
            await catch_up()
            raise
        else:
            await catch_up()
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
