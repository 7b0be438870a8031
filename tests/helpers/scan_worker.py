"""A worker process for the scan crash test: `python tests/helpers/scan_worker.py ADDRESS TASK_QUEUE COUNT
[FAILING_ID ...]`. Prints "ready" once it polls; runs until killed."""

from __future__ import annotations

import asyncio
import sys

from sleuth.workers.client import connect
from sleuth.workers.worker import build_worker
from tests.helpers.apps.scan_app import build_app


async def main(address: str, task_queue: str, count: int, failing: list[str]) -> None:
    client = await connect(address)
    worker = build_worker(client, build_app(count, frozenset(failing)), task_queue=task_queue)
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]))
