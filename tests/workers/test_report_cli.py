"""`sleuth research --output FILE` and `sleuth report RUN_ID --output FILE` against a real dev
server: the file for a finished run, and clear refusals for a bad name, a run still running, a
failed run and an unknown one."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.workers.worker import build_worker
from tests.helpers.apps import live_app
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def sleuth(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sleuth(
        [*args],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)},
        timeout=scaled(120),
    )


async def test_sleuth_research_writes_the_report_file(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    target = tmp_path / "report.md"
    common = ["--app", "tests.helpers.apps.live_app:app", "--research", "prices"]
    refused = sleuth(address, "research", "Prices?", *common, "--output", str(tmp_path / "r.pdf"))
    assert refused.returncode == 2
    assert (
        "cannot tell the report format of" in refused.stderr
        and "r.pdf': end the file name with .md" in refused.stderr
    )
    assert "research run" not in refused.stdout  # refused before any run started

    done = sleuth(
        address, "research", "Price Acme and Globex", *common, "--output", str(target),
        "--task-queue", str(uuid.uuid4()),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"report written to {target}" in done.stderr
    text = target.read_text()
    workflow_id = next(
        line.split()[2] for line in done.stdout.splitlines() if line.startswith("research run")
    )
    assert "**Question:** Price Acme and Globex" in text
    assert "Acme charges $40 per seat and Globex $55 per seat." in text
    assert f"- Workflow: `{workflow_id}`" in text and "- Web UI: <http" in text


async def test_sleuth_report_writes_a_finished_runs_report_and_refuses_others(
    dev_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv(live_app.GATE_ENV, str(gate))
    address = dev_env.client.service_client.config.target_host
    task_queue = str(uuid.uuid4())
    client = dev_env.client
    async with build_worker(client, live_app.app, task_queue=task_queue):
        running = await client.start_workflow(
            "ResearchWorkflow",
            ResearchRequest(prompt="Price Acme and Globex", research="prices"),
            id=f"report-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
            result_type=ResearchOutcome,
        )
        target = tmp_path / "out" / "report.html"
        target.parent.mkdir()
        waiting = sleuth(address, "report", running.id, "--output", str(target))
        assert waiting.returncode == 1
        assert f"run {running.id!r} is still running: wait for it to finish" in waiting.stderr
        assert not target.exists()

        (gate / "release").touch()
        outcome = await running.result()
        written = sleuth(address, "report", running.id, "-o", str(target))
        assert written.returncode == 0, written.stderr
        html = target.read_text()
        assert outcome.final_state.claims and outcome.final_state.claims[0].claim in html
        assert f"<code>{running.id}</code>" in html and '<a href="http' in html
        again = sleuth(address, "report", running.id, "-o", str(tmp_path / "out" / "r.json"))
        assert again.returncode == 0, again.stderr
        data = json.loads((tmp_path / "out" / "r.json").read_text())
        assert data["workflow_id"] == running.id and data["question"] == "Price Acme and Globex"
        replaced = sleuth(address, "report", running.id, "-o", str(target))
        assert "(replaced the file that was there)" in replaced.stderr

        failed = await client.start_workflow(
            "ResearchWorkflow",
            ResearchRequest(prompt="q?", research="no-such-config"),
            id=f"report-failed-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError):
            await failed.result()
    refused = sleuth(address, "report", failed.id, "-o", str(tmp_path / "f.md"))
    assert refused.returncode == 1
    assert f"run {failed.id!r} ended without a report (failed)" in refused.stderr
    assert "unknown research config 'no-such-config'" in refused.stderr
    unknown = sleuth(address, "report", "no-such-run", "-o", str(tmp_path / "f.md"))
    assert unknown.returncode == 1 and "no run 'no-such-run'" in unknown.stderr
    assert not (tmp_path / "f.md").exists()
