"""Live events of durable runs: what an activity's agent code publishes goes to its workflow.

`@streams_events` wraps an activity so every event its code emits (`agent.*`, `research.node`,
`deepagent.*`, ...) is published to the workflow's stream (`temporalio.contrib.workflow_streams`,
topic `events`) in batches of at most `BATCH_SECONDS`, each batch one signal. Any client reads the
stream from an offset (`sleuth.workers.events.follow_events`). A failed publish is logged, never fails
the activity: events are for watching a run, the run's result does not depend on them.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import ParamSpec, TypeVar

from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from sleuth.runtime.events import STREAM_TOPIC, Event, forward_events
from sleuth.runtime.log import get_logger

BATCH_SECONDS = 0.5
"""Longest an event waits in the activity before it is signalled to the workflow."""

P = ParamSpec("P")
R = TypeVar("R")
log = get_logger(__name__)


@asynccontextmanager
async def streaming_events() -> AsyncIterator[None]:
    """Publish the events emitted inside the block to the running activity's workflow."""
    info = activity.info()
    try:
        client = activity.client()
    except RuntimeError:  # an activity run outside a worker (tests): nobody to publish to
        client = None
    if client is None or not info.workflow_id:
        yield
        return
    workflow_id = info.workflow_id
    stream = WorkflowStreamClient.create(
        client, workflow_id, batch_interval=timedelta(seconds=BATCH_SECONDS)
    )
    topic = stream.topic(STREAM_TOPIC, type=Event)

    def publish(event: Event) -> None:
        topic.publish(event.model_copy(update={"run_id": workflow_id}))

    await stream.__aenter__()
    try:
        with forward_events(publish):
            yield
    finally:
        try:
            await stream.__aexit__(None, None, None)
        except Exception as exc:  # events are best effort; the step's result is what counts
            log.warning("events.publish_failed", workflow_id=workflow_id, error=str(exc))


def streams_events(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate an async activity so its events reach its workflow's stream."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        async with streaming_events():
            return await fn(*args, **kwargs)

    return wrapper
