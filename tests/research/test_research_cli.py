"""Starting research runs from the outside: the `temporal` CLI with plain JSON, and `sleuth research`."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.research_models import ResearchOutcome
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.worker import build_worker
from tests.helpers.apps.research_app import FACT, TOOL_CALLS
from tests.helpers.apps.research_app import app as research_app
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tool_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tool-calls.txt"
    monkeypatch.setenv("RESEARCH_TOOL_LOG", str(path))
    monkeypatch.delenv("RESEARCH_HOLD", raising=False)
    return path


async def test_temporal_cli_starts_a_run_with_plain_json(
    dev_env: WorkflowEnvironment, tool_log: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    task_queue, workflow_id = str(uuid.uuid4()), f"research-cli-{uuid.uuid4()}"
    async with build_worker(dev_env.client, research_app, task_queue=task_queue):
        started = subprocess.run(
            [
                str(temporal_cli()),
                "workflow",
                "start",
                "--address",
                address,
                "--task-queue",
                task_queue,
                "--type",
                "ResearchWorkflow",
                "--workflow-id",
                workflow_id,
                "--input",
                '{"prompt": "How many widgets did Acme ship?", "research": "crash"}',
            ],
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert started.returncode == 0, started.stderr
        handle = dev_env.client.get_workflow_handle(workflow_id, result_type=ResearchOutcome)
        outcome = await handle.result()
    assert outcome.final_state["end_reason"] == "grounded"
    assert outcome.final_state["evidence_count"] == TOOL_CALLS
    assert len(tool_log.read_text().splitlines()) == TOOL_CALLS


def sleuth(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sleuth(
        [*args],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)},
        timeout=scaled(120),
    )


async def test_sleuth_research_prints_progress_and_report(
    dev_env: WorkflowEnvironment, tool_log: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    common = ["--app", "tests.helpers.apps.research_app:app", "--research", "crash"]
    shown = sleuth(address, "research", "Acme widgets?", *common, "--task-queue", str(uuid.uuid4()))
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    for expected in (
        "✓ execute",
        "✓ grounding eval — grounding score 100%",
        "Summary",
        "Findings",
        "acme-annual-report.pdf",
        "Grounding score: 100%",
        "Replans: 0",
        "Regenerations: 0",
        "Web UI: http",
    ):
        assert expected in out, f"{expected!r} missing from:\n{out}"
    assert "running one in this process" in shown.stderr

    as_json = sleuth(
        address, "research", "Acme widgets?", *common, "--json", "--task-queue", str(uuid.uuid4())
    )
    assert as_json.returncode == 0, as_json.stderr
    outcome = ResearchOutcome.model_validate(json.loads(as_json.stdout))
    assert outcome.final_state.end_reason == "grounded"
    assert outcome.final_state.sources == [f"acme-annual-report.pdf#chars 0-{len(FACT)}"]
    [claim] = outcome.final_state.claims
    assert [c.quote for c in claim.citations] == [FACT] and claim.evidence_text == [FACT]
    assert outcome.workflow_id.startswith("research-crash-")

    unknown = sleuth(
        address,
        "research",
        "q?",
        "--app",
        "tests.helpers.apps.research_app:app",
        "--research",
        "nope",
        "--task-queue",
        str(uuid.uuid4()),
    )
    assert unknown.returncode == 1
    assert "unknown research config 'nope'; registered: crash" in unknown.stderr


async def test_out_of_bounds_options_are_refused_before_a_run_starts(
    dev_env: WorkflowEnvironment,
) -> None:
    address = dev_env.client.service_client.config.target_host
    refused = sleuth(address, "research", "q?", "--max-replans", "50", "--no-wait")
    assert refused.returncode == 1
    assert "max_replans" in refused.stderr and "less than or equal to 10" in refused.stderr


async def test_no_wait_starts_the_run_for_a_separate_worker(
    dev_env: WorkflowEnvironment, tool_log: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    task_queue = str(uuid.uuid4())
    started = sleuth(
        address,
        "research",
        "Acme widgets?",
        "--research",
        "crash",
        "--no-wait",
        "--task-queue",
        task_queue,
    )
    assert started.returncode == 0, started.stderr
    assert f"no worker serves task queue {task_queue!r}" in started.stderr
    workflow_id = started.stdout.split()[2]
    assert tool_log.exists() is False
    async with build_worker(dev_env.client, research_app, task_queue=task_queue):
        handle = dev_env.client.get_workflow_handle(workflow_id, result_type=ResearchOutcome)
        outcome = await handle.result()
    assert outcome.final_state["end_reason"] == "grounded"
