"""Schedules that start scans: `sleuth schedule ...` and the scans page's `temporal schedule create`."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, ScheduleActionStartWorkflow, ScheduleOverlapPolicy
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.scan_models import ScanOutcome, ScanRequest
from sleuth.scans.sinks import SQLiteRowSink
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.worker import build_worker
from tests.helpers.apps.scan_app import build_app, build_packages_app
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # runs the CLI in subprocesses


def cli_env(client: Client) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "PYTHONPATH": str(ROOT),
    }


def sleuth(client: Client, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sleuth([*args], env=cli_env(client), timeout=scaled(120))


async def first_scan_of(client: Client, schedule_id: str) -> ScanOutcome:
    """Wait for the schedule's first started workflow and return its outcome."""
    handle = client.get_schedule_handle(schedule_id)
    for _ in range(600):
        recent = (await handle.describe()).info.recent_actions
        if recent:
            workflow_id = recent[0].action.workflow_id  # type: ignore[attr-defined]
            scan = client.get_workflow_handle(workflow_id, result_type=ScanOutcome)
            return await asyncio.wait_for(scan.result(), timeout=scaled(120))
        await asyncio.sleep(0.1)
    raise AssertionError(f"schedule {schedule_id} never started a scan")


async def test_sleuth_schedule_commands_create_trigger_and_manage(dev_env: WorkflowEnvironment):
    client = dev_env.client
    task_queue = str(uuid.uuid4())
    name = f"nightly-{uuid.uuid4().hex[:8]}"

    created = sleuth(
        client, "schedule", "create", name, "--scan", "numbers", "--cron", "0 2 * * *",
        "--timezone", "Europe/Paris", "--task-queue", task_queue,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert f"schedule {name!r} created" in created.stdout
    description = await client.get_schedule_handle(name).describe()
    assert description.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert description.schedule.spec.time_zone_name == "Europe/Paris"
    next_run = description.info.next_action_times[0]
    assert (next_run.hour, next_run.minute) in {(0, 0), (1, 0)}, "02:00 Paris is 00:00/01:00 UTC"

    async with build_worker(client, build_app(20), task_queue=task_queue):
        triggered = sleuth(client, "schedule", "trigger", name)
        assert triggered.returncode == 0, triggered.stderr
        outcome = await first_scan_of(client, name)

    assert (outcome.items_total, outcome.rows_written) == (20, 20)
    assert outcome.scan_id.startswith(f"scan-{name}-"), "each scheduled run is its own scan"
    assert len(SQLiteRowSink().records(outcome.scan_id)) == 20

    described = sleuth(client, "schedule", "describe", name)
    assert described.returncode == 0, described.stderr
    assert "(active)" in described.stdout and outcome.scan_id in described.stdout
    assert sleuth(client, "schedule", "pause", name, "--note", "maintenance").returncode == 0
    assert (await client.get_schedule_handle(name).describe()).schedule.state.paused
    listed = sleuth(client, "schedule", "list")
    assert re.search(rf"^{name}  paused  ", listed.stdout, re.M), listed.stdout
    assert sleuth(client, "schedule", "unpause", name).returncode == 0
    assert not (await client.get_schedule_handle(name).describe()).schedule.state.paused
    assert sleuth(client, "schedule", "delete", name).returncode == 0
    missing = sleuth(client, "schedule", "describe", name)
    assert missing.returncode == 1 and "no schedule named" in missing.stderr


def readme_temporal_line() -> str:
    page = (ROOT / "docs" / "scans.md").read_text()
    lines = [line for line in page.splitlines() if line.startswith("temporal schedule create")]
    assert len(lines) == 1, "the scans page shows one `temporal schedule create` line"
    return lines[0]


async def test_readme_temporal_schedule_line_matches_sleuth_and_runs(
    dev_env: WorkflowEnvironment,
):
    client = dev_env.client
    line = readme_temporal_line()
    env = {**cli_env(client), "PATH": f"{temporal_cli().parent}:{os.environ['PATH']}"}
    made = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    schedule_id = re.search(r"--schedule-id (\S+)", line).group(1)  # type: ignore[union-attr]

    # `sleuth schedule create` with the page's options makes the same schedule.
    twin = f"{schedule_id}-twin"
    assert sleuth(
        client, "schedule", "create", twin, "--scan", "python-packages", "--research",
        "package-risk", "--cron", "0 2 * * *", "--timezone", "Europe/Paris",
        "--task-queue", "sleuth",
    ).returncode == 0  # fmt: skip
    try:
        ours, theirs = [
            (await client.get_schedule_handle(name).describe()).schedule
            for name in (twin, schedule_id)
        ]
        assert ours.policy.overlap == theirs.policy.overlap == ScheduleOverlapPolicy.SKIP
        assert ours.spec.time_zone_name == theirs.spec.time_zone_name == "Europe/Paris"
        assert ours.spec.calendars == theirs.spec.calendars
        assert ours.spec.cron_expressions == theirs.spec.cron_expressions
        for schedule in (ours, theirs):
            assert isinstance(schedule.action, ScheduleActionStartWorkflow)
            assert schedule.action.workflow == "KnowledgeScanWorkflow"
            assert schedule.action.task_queue == "sleuth"
        requests = [
            (await client.data_converter.decode(s.action.args, [ScanRequest]))[0]  # type: ignore[union-attr,arg-type]
            for s in (ours, theirs)
        ]
        assert requests[0] == requests[1]
        assert theirs.action.id == f"scan-{schedule_id}"  # type: ignore[union-attr]
    finally:
        await client.get_schedule_handle(twin).delete()

    # Trigger the page's schedule and watch the demo's package scan run.
    app = build_packages_app("sleuth")
    installed = app.get_provider("python-packages").list_items()
    try:
        async with build_worker(client, app, task_queue="sleuth"):
            trigger = subprocess.run(
                ["temporal", "schedule", "trigger", "--schedule-id", schedule_id],
                env=env, capture_output=True, text=True,
            )  # fmt: skip
            assert trigger.returncode == 0, trigger.stderr
            outcome = await first_scan_of(client, schedule_id)
    finally:
        await client.get_schedule_handle(schedule_id).delete()

    assert outcome.items_total == len(installed) > 10
    assert (outcome.rows_written, outcome.failed_count) == (len(installed), 0)
    rows = {r.item_id: r for r in SQLiteRowSink().records(outcome.scan_id)}
    httpx_row = rows["httpx"].data
    # httpx 0.29 declares a License-Expression and no License field; the provider reads the
    # expression first.
    meta = importlib.metadata.metadata("httpx")
    declared = meta["License-Expression"] or meta["License"]
    required = [r for r in importlib.metadata.requires("httpx") or [] if "extra ==" not in r]
    assert httpx_row["license"] == declared
    assert httpx_row["assessment"]["licence"] == declared, "the model read it with a tool"
    assert httpx_row["dependency_count"] == len(required)
