"""Scan throughput: a 10,000-item KnowledgeScanWorkflow against raw no-op activities, side by side.

    python -m bench.scan_throughput [--items 10000] [--concurrency 8] [--noop 3000] [--no-docs]

Starts its own Temporal dev server (in memory, with the same fast transfer-poll setting as the
test suite's `dev_env`) and one worker. The scan runs the real research graph
(`create_research_workflow`) over an instant scripted model and writes every row to a SQLite sink
in a temporary `$SLEUTH_HOME`. Then, on the same server, a workflow runs no-op activities with the
same concurrency, also in the workflow sandbox, on a worker with the same activity slots
(`bench/noop_activities.py`: the raw fan-out floor). Prints items/s, no-op activities/s, their
ratio and the largest history (in events) of any run in the scan's continue-as-new chain, and
writes them into `docs/benchmarks.md` (its `bench:scan_throughput` section) unless `--no-docs`.
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

ROOT = Path(__file__).resolve().parent.parent
FAST_DEV_SERVER_ARGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]


async def main(items: int, concurrency: int, noop_count: int, docs: bool) -> None:
    sys.path.insert(0, str(ROOT))
    from bench._docs_table import write_section
    from bench.noop_activities import time_noop_activities
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

        noop_seconds = await time_noop_activities(client, noop_count, concurrency)
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
    if docs:
        table = [
            f"| at concurrency {concurrency} | count | seconds | per second | × raw fan-out |",
            "|---|---:|---:|---:|---:|",
            f"| scan (research graph per item) | {items} items | {scan_seconds:.1f} | "
            f"{items_per_second:.0f} | {items_per_second / noop_per_second:.2f}x |",
            f"| raw no-op activities | {noop_count} | {noop_seconds:.1f} | "
            f"{noop_per_second:.0f} | 1.00x |",
            "",
            f"The scan's continue-as-new chain: {len(chain)} runs, the largest history "
            f"{max(run.events for run in chain)} events.",
        ]
        command = " ".join(["python -m bench.scan_throughput", *sys.argv[1:]])
        page = write_section(
            "scan_throughput",
            "\n".join(table),
            command=command,
            title="Scan throughput against raw fan-out",
        )
        print(f"wrote the table into {page}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--noop", type=int, default=3000, help="no-op activities to time")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-") as home:
        os.environ["SLEUTH_HOME"] = home
        asyncio.run(main(options.items, options.concurrency, options.noop, not options.no_docs))
    sys.stdout.flush()
    os._exit(0)
