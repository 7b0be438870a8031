"""Live events of durable runs: what an activity's agent code publishes goes to its workflow.

`@streams_events` wraps an activity so every event its code emits (`agent.*`, `research.node`,
`deepagent.*`, ...) is published to the workflow's stream (`temporalio.contrib.workflow_streams`,
topic `events`). Any client reads the stream from an offset (`sleuth.workers.events.follow_events`). A
failed publish is logged, never fails the activity: events are for watching a run, the run's
result does not depend on them.

Each batch is one `__temporal_workflow_stream_publish` signal, and each signal is a row of the
run's Web UI timeline and a workflow task. So batches grow as a step goes on (`flush_delays`): the
first events of a step wait `BATCH_SECONDS`, each later batch twice as long as the one before, up
to `MAX_BATCH_SECONDS`. What is left when the step ends rides in the activity's result when that
is a `CarriesEvents` model (the workflow publishes it, which adds nothing to the history: see
`sleuth.workflows.streams.publish_carried`), else goes as one last signal. A step of `d` seconds thus
sends at most `publish_bound(d)` signals (none under half a second, 4 in 10 s, 6 in a minute)
however many events it emits, where a fixed interval sent one per interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import ParamSpec, TypeVar

from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.contrib.workflow_streams import TopicHandle, WorkflowStreamClient

from sleuth.runtime.events import STREAM_TOPIC, Event, forward_events
from sleuth.runtime.log import get_logger

BATCH_SECONDS = 0.5
"""How long the first events of a step wait before they are signalled to the workflow."""
MAX_BATCH_SECONDS = 30.0
"""The longest an event of a long step waits before it is signalled."""
CARRY_LAST_BATCH = True
"""Whether a `CarriesEvents` result carries the step's last events (`bench.live_events` turns it
off to measure what that saves)."""
_NO_AUTOMATIC_FLUSH = timedelta(days=1)

P = ParamSpec("P")
R = TypeVar("R")
log = get_logger(__name__)


class CarriesEvents(BaseModel):
    """An activity output that carries its step's last events to the workflow (see the module
    docstring): a step that ends within `BATCH_SECONDS` sends no signal at all."""

    live_events: list[Event] = Field(default_factory=list)
    """The events not yet signalled when the activity returned, oldest first."""


class _Batches:
    """The events of one activity waiting to be published (added from any thread)."""

    def __init__(self, topic: TopicHandle[Event], workflow_id: str) -> None:
        self._topic = topic
        self._workflow_id = workflow_id
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._loop = asyncio.get_running_loop()
        self.waiting = asyncio.Event()

    def add(self, event: Event) -> None:
        with self._lock:
            self._events.append(event.model_copy(update={"run_id": self._workflow_id}))
        self._loop.call_soon_threadsafe(self.waiting.set)

    def take(self) -> list[Event]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def hand_to_stream(self) -> None:
        for event in self.take():
            self._topic.publish(event)


@asynccontextmanager
async def streaming_events() -> AsyncIterator[_Batches | None]:
    """Publish the events emitted inside the block to the running activity's workflow; yields
    their batches (None when there is no workflow to publish to), whose `take()` removes the
    events not signalled yet, to carry them in the activity's result instead."""
    info = activity.info()
    try:
        client = activity.client()
    except RuntimeError:  # an activity run outside a worker (tests): nobody to publish to
        client = None
    if client is None or not info.workflow_id:
        yield None
        return
    workflow_id = info.workflow_id
    # The stream's own timer would flush every interval; `_flush_growing` decides instead.
    stream = WorkflowStreamClient.create(client, workflow_id, batch_interval=_NO_AUTOMATIC_FLUSH)
    batches = _Batches(stream.topic(STREAM_TOPIC, type=Event), workflow_id)
    await stream.__aenter__()
    flusher = asyncio.create_task(_flush_growing(stream, batches, workflow_id))
    try:
        with forward_events(batches.add):
            yield batches
    finally:
        flusher.cancel()
        with contextlib.suppress(BaseException):
            await flusher
        batches.hand_to_stream()
        try:
            await stream.__aexit__(None, None, None)
        except Exception as exc:  # events are best effort; the step's result is what counts
            log.warning("events.publish_failed", workflow_id=workflow_id, error=str(exc))


def flush_delays() -> Iterator[float]:
    """How long each batch of a step waits after its first event: `BATCH_SECONDS`, then twice
    the previous wait, up to `MAX_BATCH_SECONDS`."""
    for delay in itertools.count():
        yield min(BATCH_SECONDS * 2**delay, MAX_BATCH_SECONDS)


def publish_bound(seconds: float, *, carried: bool = True) -> int:
    """The most publish signals a step of `seconds` sends: its batches, and a last one unless
    its output `carried` the rest (`CarriesEvents`)."""
    signals, spent = 0 if carried else 1, 0.0
    for delay in flush_delays():
        spent += delay
        if spent > seconds:
            return signals
        signals += 1
    raise AssertionError("unreachable")  # flush_delays never ends


async def _flush_growing(stream: WorkflowStreamClient, batches: _Batches, workflow_id: str) -> None:
    for delay in flush_delays():
        await batches.waiting.wait()
        await asyncio.sleep(delay)
        batches.waiting.clear()
        batches.hand_to_stream()
        try:
            await stream.flush()
        except Exception as exc:  # the stream retries the batch with the next one
            log.warning("events.publish_failed", workflow_id=workflow_id, error=str(exc))


def streams_events(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate an async activity so its events reach its workflow's stream."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        async with streaming_events() as batches:
            result = await fn(*args, **kwargs)
            if batches is not None and CARRY_LAST_BATCH and isinstance(result, CarriesEvents):
                carried = [*result.live_events, *batches.take()]
                return result.model_copy(update={"live_events": carried})
            return result

    return wrapper
