"""What every command that talks to Temporal opens first: one client, and a worker if needed.

```python
async with open_session(args.app, task_queue=args.task_queue) as session:
    handle = await session.client.start_workflow(..., task_queue=session.task_queue)
```

A session connects once, with `SleuthPlugin` on the client. The App (`--app`, default the demo
app) is imported only when this command must run a worker itself, or — given `--app` but neither
`--task-queue` nor `$SLEUTH_TASK_QUEUE` — to read the App's task queue.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from sleuth.apps.app import App, load_app
from sleuth.runtime.settings import DEFAULT_TASK_QUEUE, load_settings
from sleuth.workers.cli_connection import add_connection_arguments
from sleuth.workers.embedded import connect_temporal
from sleuth.workers.plugin import SleuthPlugin
from sleuth.workers.worker import build_worker

POLLER_FRESHNESS_SECONDS = 90.0
"""A poller seen within this long counts as a live worker. Idle workers re-poll at least once a
minute (the server's long-poll timeout); the server lists pollers for minutes after they stop."""


@dataclass
class Session:
    """A connected client, its task queue, and whether this session runs the worker itself."""

    client: Client
    task_queue: str
    plugin: SleuthPlugin
    started_worker: bool = False

    @property
    def app(self) -> App:
        """The App (`--app pkg.module:app`, default the demo app), loaded on first use."""
        return self.plugin.app


async def workflow_pollers(client: Client, task_queue: str) -> int:
    """How many workers polled `task_queue` for workflow tasks recently (see POLLER_FRESHNESS_SECONDS)."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    cutoff = time.time() - POLLER_FRESHNESS_SECONDS
    return sum(
        1
        for poller in response.pollers
        if (not poller.HasField("last_access_time") or poller.last_access_time.seconds >= cutoff)
        and not poller_process_gone(poller.identity)
    )


def poller_process_gone(identity: str) -> bool:
    """True when a poller's identity names a process on this machine that no longer runs.

    Workers identify as `pid@hostname` by default. The server keeps listing a stopped worker for
    a while; without this check a command started right after another one's in-process worker
    exited would wait for a worker that is gone.
    """
    pid_text, separator, host = identity.partition("@")
    if not separator or host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def resolve_task_queue(explicit: str | None, app: App | None) -> str:
    """`--task-queue`, else `$SLEUTH_TASK_QUEUE`, else the App's queue, else "sleuth"."""
    return (
        explicit
        or load_settings().task_queue
        or (app.task_queue if app is not None else DEFAULT_TASK_QUEUE)
    )


def known_task_queue(explicit: str | None, app_target: str | App | None) -> str | None:
    """The task queue, when it is known without importing the App: `--task-queue`, else
    `$SLEUTH_TASK_QUEUE`, else the queue of an App object or of the demo app (`sleuth`); None
    when only the App's module can tell."""
    if isinstance(app_target, str):
        return explicit or load_settings().task_queue
    return resolve_task_queue(explicit, app_target)


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `--app` and `--task-queue` options every command that runs workflows takes, and
    the Temporal connection options (`workers/cli_connection.py`)."""
    parser.add_argument(
        "--app",
        metavar="PKG.MODULE:APP",
        help="the App to serve (default: the built-in demo app)",
    )
    parser.add_argument(
        "--task-queue",
        metavar="QUEUE",
        help="task queue (default: $SLEUTH_TASK_QUEUE, else the App's queue)",
    )
    add_connection_arguments(parser)


def cli_app(target: str | App | None) -> App:
    """The App a command serves: `--app module:attr` (imported from the working directory
    first), or the built-in demo app when no `--app` is given."""
    if target is None:
        from sleuth.apps.demo import build_demo_app

        return build_demo_app()
    return load_app(target)


@contextlib.asynccontextmanager
async def open_session(
    app_target: str | App | None,
    *,
    task_queue: str | None = None,
    need_worker: bool = True,
    address: str | None = None,
) -> AsyncIterator[Session]:
    """Connect to Temporal once (starting the embedded server if needed) and make sure a worker
    serves the task queue.

    The task queue is `task_queue`, else `$SLEUTH_TASK_QUEUE`, else the App's own queue. With
    `need_worker=True` and no worker polling that queue, a worker for the App runs in this process
    on the session's client until the session ends, and one line on stderr says so.
    """
    source = app_target if isinstance(app_target, App) else functools.partial(cli_app, app_target)
    plugin = SleuthPlugin(source)
    client = await connect_temporal(address, plugins=[plugin])
    queue = known_task_queue(task_queue, app_target) or plugin.app.task_queue
    session = Session(client=client, task_queue=queue, plugin=plugin)
    if not need_worker or await workflow_pollers(client, queue) > 0:
        yield session
        return
    worker = build_worker(client, task_queue=queue)
    print(
        f"sleuth: no worker polls task queue {queue!r} — running one in this process "
        f"for app {session.app.name!r} until this command ends",
        file=sys.stderr,
        flush=True,
    )
    session.started_worker = True
    worker_task = asyncio.create_task(worker.run())
    try:
        yield session
    finally:
        if not worker_task.done():
            await worker.shutdown()
        with contextlib.suppress(asyncio.CancelledError):
            await worker_task
