"""Scan throughput: a 10,000-item KnowledgeScanWorkflow against raw no-op activities, side by side.

    python -m bench.scan_throughput [--items 10000] [--concurrency 8] [--noop 3000]

Starts its own Temporal dev server (in memory, with the same fast transfer-poll setting as the
test suite's `dev_env`) and one worker. The scan runs the real research graph
(`create_research_workflow`) over an instant scripted model and writes every row to a SQLite sink
in a temporary `$SLEUTH_HOME`. Then, on the same server, a workflow runs no-op activities with the
same concurrency, also in the workflow sandbox, on a worker with the same activity slots. Prints items/s, no-op activities/s, their ratio and the largest history (in
events) of any run in the scan's continue-as-new chain.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

ROOT = Path(__file__).resolve().parent.parent
FAST_DEV_SERVER_ARGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]


async def main(items: int, concurrency: int, noop_count: int) -> None:
    sys.path.insert(0, str(ROOT))
    from bench.noop_activities import NoopActivitiesWorkflow, noop
    from sleuth.activities.scan_models import ScanRequest
    from sleuth.scans.sinks import SQLiteRowSink
    from sleuth.workers.binaries import temporal_cli
    from sleuth.workers.scans import run_chain, start_scan
    from sleuth.workers.worker import build_worker
    from tests.helpers.apps.scan_app import build_app

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=FAST_DEV_SERVER_ARGS,
    )
    try:
        client = env.client
        task_queue = f"bench-{uuid.uuid4()}"
        print(f"dev server: in memory ({' '.join(FAST_DEV_SERVER_ARGS)}), one worker, 2-core box")

        async with build_worker(client, build_app(items), task_queue=task_queue):
            request = ScanRequest(provider="numbers", scan_id="bench", concurrency=concurrency)
            started = time.perf_counter()
            handle = await start_scan(client, request, task_queue=task_queue)
            outcome = await handle.result()
            scan_seconds = time.perf_counter() - started
        chain = await run_chain(client, handle.id)
        rows = len(SQLiteRowSink().records("bench"))
        assert rows == items == outcome.rows_written, (rows, items, outcome)

        async with Worker(
            client,
            task_queue=task_queue + "-noop",
            workflows=[NoopActivitiesWorkflow],
            activities=[noop],
            max_concurrent_activities=16,
        ):
            started = time.perf_counter()
            await client.execute_workflow(
                NoopActivitiesWorkflow.run,
                args=[noop_count, concurrency],
                id=f"bench-noop-{uuid.uuid4()}",
                task_queue=task_queue + "-noop",
            )
            noop_seconds = time.perf_counter() - started
    finally:
        await env.shutdown()

    items_per_second = items / scan_seconds
    noop_per_second = noop_count / noop_seconds
    print(f"scan:   {items} items in {scan_seconds:.1f}s = {items_per_second:.0f} items/s")
    print(f"        concurrency {concurrency}, {rows} rows in the SQLite sink")
    print(f"no-op:  {noop_count} activities in {noop_seconds:.1f}s = {noop_per_second:.0f}/s")
    print(f"ratio:  scan items/s / no-op activities/s = {items_per_second / noop_per_second:.2f}")
    print(
        f"chain:  {len(chain)} runs; largest history {max(run.events for run in chain)} events "
        f"(per run: {', '.join(str(run.events) for run in chain)})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--noop", type=int, default=3000, help="no-op activities to time")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as home:
        os.environ["SLEUTH_HOME"] = home
        asyncio.run(main(options.items, options.concurrency, options.noop))
    sys.stdout.flush()
    os._exit(0)
