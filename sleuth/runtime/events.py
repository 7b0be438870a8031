"""The in-process event bus: `run_context()` scopes a run id, `subscribe(rid)` streams its events.

Agents publish `agent.*`, deep agents `deepagent.*`, pipelines `composition.*`. Publishing outside
a run context is a no-op, so code that emits events costs nothing when nobody listens.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from pydantic import BaseModel, Field

STREAM_TOPIC = "events"
"""The topic of a durable run's workflow stream that its events go to (`sleuth.workflows.streams`)."""

_current_run_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "sleuth_run_id", default=None
)
_captures: contextvars.ContextVar[tuple[Callable[[Event], None], ...]] = contextvars.ContextVar(
    "sleuth_event_captures", default=()
)


class Event(BaseModel):
    """One published event."""

    event_type: str
    run_id: str
    data: dict[str, Any] = Field(default_factory=dict)
    timestamp: float


class _Closed:
    pass


_CLOSED = _Closed()


class EventBus:
    """Fan-out of events per run id to any number of subscribers (and global listeners)."""

    def __init__(self) -> None:
        self._queues: dict[str, list[asyncio.Queue[Event | _Closed]]] = defaultdict(list)
        self._listeners: list[Callable[[Event], None]] = []

    def publish(
        self, event_type: str, data: dict[str, Any] | None = None, *, run_id: str | None = None
    ) -> None:
        """Publish to the given run, or to the current `run_context()`; dropped outside one unless
        a `capture_events()` of the calling context takes it."""
        rid = run_id or _current_run_id.get()
        captures = _captures.get()
        if rid is None and not captures:
            return
        event = Event(
            event_type=event_type, run_id=rid or "", data=data or {}, timestamp=time.time()
        )
        for capture in captures:
            capture(event)
        if rid is None:
            return
        for listener in list(self._listeners):
            listener(event)
        for queue in list(self._queues.get(rid, ())):
            queue.put_nowait(event)

    def subscribe(self, run_id: str) -> AsyncIterator[Event]:
        """Iterate the run's events until `close_stream(run_id)`.

        The subscription starts when this is called, not at the first iteration, so a caller can
        subscribe, start the run, and only then hand the iterator to a consumer task.
        """
        queue: asyncio.Queue[Event | _Closed] = asyncio.Queue()
        self._queues[run_id].append(queue)
        return self._drain(run_id, queue)

    async def _drain(
        self, run_id: str, queue: asyncio.Queue[Event | _Closed]
    ) -> AsyncIterator[Event]:
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _Closed):
                    return
                yield item
        finally:
            queues = self._queues.get(run_id)
            if queues and queue in queues:
                queues.remove(queue)
            if not queues:
                self._queues.pop(run_id, None)

    def subscriber_count(self, run_id: str) -> int:
        return len(self._queues.get(run_id, ()))

    async def close_stream(self, run_id: str) -> None:
        """End every subscriber's iterator for this run."""
        for queue in list(self._queues.get(run_id, ())):
            queue.put_nowait(_CLOSED)

    def add_listener(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call `listener` for every event of every run; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)


_bus = EventBus()


def get_event_bus() -> EventBus:
    """The process's event bus, which `emit` publishes to."""
    return _bus


def current_run_id() -> str | None:
    """The id of the run `run_context()` set for this context, or None outside one."""
    return _current_run_id.get()


def emit(event_type: str, **data: Any) -> None:
    """Publish an event to the current run (no-op outside `run_context()`)."""
    _bus.publish(event_type, data)


@contextmanager
def forward_events(deliver: Callable[[Event], None]) -> Iterator[None]:
    """Call `deliver` with every event published in this context (tasks and threads started from
    it included), with or without a `run_context()`. `deliver` may run on a tool's thread."""
    token = _captures.set((*_captures.get(), deliver))
    try:
        yield
    finally:
        _captures.reset(token)


@contextmanager
def capture_events() -> Iterator[asyncio.Queue[Event]]:
    """Also deliver every event published in this context to the yielded queue (from any
    thread). `Agent.run` uses it."""
    queue: asyncio.Queue[Event] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def deliver(event: Event) -> None:
        if threading.get_ident() == loop_thread:
            queue.put_nowait(event)
        else:  # a sync tool on a worker thread
            loop.call_soon_threadsafe(queue.put_nowait, event)

    with forward_events(deliver):
        yield queue


@asynccontextmanager
async def run_context(run_id: str | None = None) -> AsyncIterator[str]:
    """Scope a run id: events emitted inside go to its subscribers. Yields the run id."""
    rid = run_id or uuid.uuid4().hex
    token = _current_run_id.set(rid)
    try:
        yield rid
    finally:
        _current_run_id.reset(token)
