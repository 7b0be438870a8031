"""`sleuth scan PROVIDER --follow` and `sleuth rows SCAN_ID` as a person runs them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.scan_models import ScanOutcome
from sleuth.workers.session import workflow_pollers
from sleuth.workers.worker import build_worker
from tests.helpers.apps.scan_app import build_app
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # runs the CLI in subprocesses


def sleuth(env: WorkflowEnvironment, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sleuth(
        [*args],
        env={
            **os.environ,
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "PYTHONPATH": str(ROOT),
        },
        timeout=scaled(180),
    )


async def test_scan_follow_then_rows_as_table_and_json(dev_env: WorkflowEnvironment, sleuth_home):
    task_queue = str(uuid.uuid4())
    scanned = sleuth(
        dev_env, "scan", "numbers", "--app", "tests.helpers.apps.scan_app:app", "--task-queue",
        task_queue, "--scan-id", "cli-scan", "--concurrency", "3", "--page-size", "10", "--follow",
    )  # fmt: skip

    assert scanned.returncode == 0, scanned.stderr
    # No worker polled the queue, so the command ran one and followed the scan to its end.
    assert "running one in this process" in scanned.stderr
    assert "25/25 done, 1 failed" in scanned.stderr
    assert "scan 'cli-scan' finished: 25 items, 24 researched, 0 already had rows, 1 failed" in (
        scanned.stdout
    )
    assert "failed: item-00003: RuntimeError: the model refuses this item" in scanned.stdout
    rows_path = sleuth_home / "rows.sqlite"
    assert f"rows are in {rows_path}; print them with: sleuth rows cli-scan" in scanned.stdout

    table = sleuth(dev_env, "rows", "cli-scan")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ITEM", "STATUS", "DATA"]
    assert len(lines) == 1 + 25 + 1 and lines[-1] == "25 items, 24 rows, 1 failed"
    assert lines[4].startswith("item-00003  failed  RuntimeError: the model refuses")
    assert lines[5].startswith("item-00004  ok") and "summary=" in lines[5]

    as_json = sleuth(dev_env, "rows", "cli-scan", "--json")
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["item_id"] for r in records] == [f"item-{n:05d}" for n in range(25)]
    assert records[4]["status"] == "ok" and "item-00004" in records[4]["data"]["summary"]

    # A fresh queue: the server lists the first command's worker as a poller for a while.
    again = sleuth(
        dev_env, "scan", "numbers", "--app", "tests.helpers.apps.scan_app:app", "--task-queue",
        str(uuid.uuid4()), "--scan-id", "cli-scan", "--follow",
    )  # fmt: skip
    assert "25 items, 0 researched, 24 already had rows, 1 failed" in again.stdout

    unknown = sleuth(dev_env, "rows", "no-such-scan")
    assert unknown.returncode == 1 and "no rows for scan 'no-such-scan'" in unknown.stderr


async def test_scan_without_follow_returns_at_once_and_says_where_rows_go(
    dev_env: WorkflowEnvironment, sleuth_home
):
    task_queue = str(uuid.uuid4())
    app = build_app(6)
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        while await workflow_pollers(dev_env.client, task_queue) == 0:
            await asyncio.sleep(0.05)
        started = sleuth(
            dev_env, "scan", "numbers", "--app", "tests.helpers.apps.scan_app:app",
            "--task-queue", task_queue, "--scan-id", "background",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        assert "running one in this process" not in started.stderr, "a worker already polls"
        assert "scan 'background' started: http" in started.stdout
        assert f"rows go to {sleuth_home / 'rows.sqlite'}" in started.stdout
        handle = dev_env.client.get_workflow_handle("scan-background", result_type=ScanOutcome)
        outcome = await handle.result()
    assert (outcome.items_total, outcome.rows_written) == (6, 6)


async def test_scan_of_an_unknown_provider_says_which_providers_exist(
    dev_env: WorkflowEnvironment, sleuth_home
):
    scanned = sleuth(
        dev_env, "scan", "no-such-provider", "--app", "tests.helpers.apps.scan_app:app",
        "--task-queue", str(uuid.uuid4()), "--follow",
    )  # fmt: skip
    assert scanned.returncode == 1, scanned.stderr
    # One line naming the cause, not the SDK's bare "Workflow execution failed".
    failed = [line for line in scanned.stderr.splitlines() if line.startswith("sleuth: scan ")]
    assert failed and "unknown provider 'no-such-provider'; registered: numbers" in failed[0]
    assert "Workflow execution failed" not in scanned.stderr
