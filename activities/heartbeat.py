"""The heartbeat timer every long activity runs, and the checkpoint it carries for a retry."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from temporalio import activity

from sleuth.artifacts import ArtifactStore, get_json, put_json
from sleuth.state import LoopState

MIN_INTERVAL_SECONDS = 0.1


@contextlib.asynccontextmanager
async def heartbeating(
    details: Callable[[], Sequence[Any]] = tuple, *, every_seconds: float | None = None
) -> AsyncIterator[None]:
    """Heartbeat in the background while the block runs.

    A worker that dies mid-step is then noticed within the activity's heartbeat timeout, and one
    slow model or tool call does not get a live attempt declared dead. Beats at least three times
    per heartbeat timeout (and at least every `every_seconds` when given), each carrying
    `details()` — the latest checkpoint reference — so a timer beat never replaces the checkpoint
    a retried attempt would resume from. With neither a timeout nor `every_seconds` it does nothing.
    """
    timeout = activity.info().heartbeat_timeout
    candidates = [timeout.total_seconds() / 3 if timeout else None, every_seconds]
    intervals = [seconds for seconds in candidates if seconds]
    if not intervals:
        yield
        return
    interval = max(min(intervals), MIN_INTERVAL_SECONDS)

    async def beat() -> None:
        while True:
            activity.heartbeat(*details())
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


SaveCheckpoint = Callable[[LoopState], Awaitable[None]]


@contextlib.asynccontextmanager
async def checkpointing(
    store: ArtifactStore,
) -> AsyncIterator[tuple[LoopState | None, SaveCheckpoint]]:
    """The loop checkpoint a previous attempt heartbeated (None on a first attempt), and the hook
    that stores a new one and heartbeats its reference; a timer keeps beating meanwhile.

    A retried attempt resumes from the checkpoint, so a completed tool call is not made again.
    """
    details = activity.info().heartbeat_details
    latest: list[str] = [str(details[0])] if details else []
    checkpoint = (
        LoopState.model_validate(await asyncio.to_thread(get_json, store, latest[0]))
        if latest
        else None
    )

    async def save(state: LoopState) -> None:
        latest[:] = [await asyncio.to_thread(put_json, store, state)]
        activity.heartbeat(*latest)

    async with heartbeating(lambda: latest):
        yield checkpoint, save
