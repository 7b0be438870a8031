"""Live events in the terminal: each event of a durable run as one line, while it runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

from temporalio.client import Client

from sleuth.runtime.events import Event
from sleuth.workers.events import follow_events

LINE_CHARS = 140
DRAIN_SECONDS = 10.0
"""How long, once the run has ended, the display may take to read the events it has not shown."""


def describe_event(event: Event) -> str:
    """One line a person reads for `event`."""
    data = event.data
    match event.event_type:
        case "research.node.started":
            line = f"→ {str(data.get('node', '')).replace('_', ' ')}"
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
        out.write(describe_event(event) + "\n")
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
