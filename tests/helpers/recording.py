"""What every history-recording script shares: a worker on a fresh time-skipping server, and
writing a run's history next to the script. Run the scripts from the repository root."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from sleuth.apps.app import App
from sleuth.workers.binaries import temporal_cli, temporal_test_server
from sleuth.workers.worker import build_worker


@contextlib.asynccontextmanager
async def worker_on_test_server(app: App) -> AsyncIterator[tuple[Client, str]]:
    """A client and a task queue that a worker for `app` serves, on a fresh time-skipping server."""
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-history-"))
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server()),
        data_converter=pydantic_data_converter,
    )
    try:
        task_queue = str(uuid.uuid4())
        async with build_worker(env.client, app, task_queue=task_queue):
            yield env.client, task_queue
    finally:
        await env.shutdown()


@contextlib.asynccontextmanager
async def worker_on_dev_server(
    app: App, extra_args: list[str] | None = None
) -> AsyncIterator[tuple[Client, str]]:
    """Like `worker_on_test_server`, on a fresh in-memory dev server started with `extra_args`
    (a history with search-attribute upserts needs a server that has the attributes)."""
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-history-"))
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=extra_args or [],
    )
    try:
        task_queue = str(uuid.uuid4())
        async with build_worker(env.client, app, task_queue=task_queue):
            yield env.client, task_queue
    finally:
        await env.shutdown()


async def save_history(handle: WorkflowHandle[Any, Any], path: Path) -> int:
    """Write the run's history as JSON to `path`; returns its number of events."""
    history = await handle.fetch_history()
    path.write_text(history.to_json())
    return len(history.events)


def run_script(record: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(record())  # type: ignore[arg-type]
    sys.stdout.flush()
    os._exit(0)  # temporalio may abort at interpreter exit otherwise
