"""The heartbeat timer every long activity runs, and the checkpoint journal a retry resumes from."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from temporalio import activity

from sleuth.activities.checkpoints import Journal
from sleuth.agent.state import LoopState
from sleuth.deepagent.subagents import resumable_children
from sleuth.runtime.artifacts import ArtifactStore

HEARTBEAT_SECONDS = 20.0
"""The default heartbeat timeout of every long activity: a worker that dies is noticed this long
after its last heartbeat, and the step is retried elsewhere."""
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


@contextlib.asynccontextmanager
async def journaled(
    store: ArtifactStore, *, every_seconds: float | None = None
) -> AsyncIterator[Journal]:
    """The running activity's checkpoint journal (see `sleuth.activities.checkpoints`), with the heartbeat
    timer on and the subagents dispatched inside the block resuming from it."""
    journal = await Journal.open(store)
    # Say at once where this attempt resumes from, and what was wrong on the way.
    activity.heartbeat(*journal.details())
    with resumable_children(journal):
        async with heartbeating(journal.details, every_seconds=every_seconds):
            yield journal


SaveCheckpoint = Callable[[LoopState], Awaitable[None]]


@contextlib.asynccontextmanager
async def checkpointing(
    store: ArtifactStore, *, every_seconds: float | None = None
) -> AsyncIterator[tuple[LoopState | None, SaveCheckpoint]]:
    """The tool loop's checkpoint from an earlier attempt (None on a first attempt), and the hook
    that makes a new one durable before the loop goes on; a timer heartbeats meanwhile.

    A retried attempt resumes from the checkpoint, so a completed tool call is not made again.
    """
    async with journaled(store, every_seconds=every_seconds) as journal:

        async def save(state: LoopState) -> None:
            await journal.save(loop=state)

        yield journal.get("loop", LoopState), save
