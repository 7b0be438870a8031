"""Done-when test: a 1,000-item scan survives SIGKILL of its worker process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.scan_models import ScanRequest, ScanSettings
from sleuth.scans.sinks import SQLiteRowSink
from sleuth.workers.scans import run_chain, start_scan
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
WORKER_SCRIPT = ROOT / "tests" / "helpers" / "scan_worker.py"
ITEMS = 1000
FAILING = ["item-00007", "item-00500", "item-00998"]


def start_worker(address: str, task_queue: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(WORKER_SCRIPT), address, task_queue, str(ITEMS), *FAILING],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            # The scan's next workflow task waits this long for the killed worker's sticky queue.
            "SLEUTH_STICKY_QUEUE_TIMEOUT_SECONDS": str(scaled(1)),
        },
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready", "the worker process did not start"
    return process


@pytest.mark.slow
async def test_scan_survives_sigkill_of_its_worker(dev_env: WorkflowEnvironment):
    client = dev_env.client
    address = client.service_client.config.target_host
    task_queue = str(uuid.uuid4())
    settings = ScanSettings(
        history_event_budget=1200,
        item_heartbeat_seconds=2,
        item_timeout_seconds=10,
        item_initial_retry_seconds=0.1,
        item_max_attempts=2,
    )
    request = ScanRequest(provider="numbers", scan_id="crash", page_size=50, settings=settings)
    sink = SQLiteRowSink()

    def records_written() -> int:
        return len(sink.records("crash"))

    first = start_worker(address, task_queue)
    second = None
    try:
        handle = await start_scan(client, request, task_queue=task_queue)
        await wait_for(
            lambda: records_written() >= 300, "300 rows before the kill", timeout=scaled(180)
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        at_kill = records_written()
        assert at_kill < ITEMS, "the scan finished before the kill; the test proves nothing"

        second = start_worker(address, task_queue)
        outcome = await asyncio.wait_for(handle.result(), timeout=scaled(300))
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()

    records = sink.records("crash")
    assert [r.item_id for r in records] == [f"item-{n:05d}" for n in range(ITEMS)]
    assert sorted(r.item_id for r in records if r.status == "failed") == FAILING
    assert all(r.error and "refuses this item" in r.error for r in records if r.status == "failed")
    assert outcome.items_total == ITEMS
    assert (outcome.rows_written, outcome.skipped) == (ITEMS - len(FAILING), 0)
    assert outcome.failed_count == len(FAILING)
    assert sorted(f.item for f in outcome.failed) == FAILING

    chain = await run_chain(client, handle.id)
    assert len(chain) == outcome.runs >= 2, "the scan never continued as new"
    assert all(run.continued_as_new for run in chain[:-1]) and not chain[-1].continued_as_new
