"""`sleuth research --review` and `sleuth review` from the outside, against the dev server: the
run pauses, the person reads what waits and decides from another terminal."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.flows.review import PendingReview
from sleuth.runtime.events import Event
from sleuth.workers.cli_events import describe_event
from tests.helpers.cli_process import popen_sleuth, run_sleuth
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import wait_for

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def env(address: str, tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "RESEARCH_TOOL_LOG": str(tmp_path / "tools.txt"),
    }


def sleuth(address: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sleuth([*args], cwd=ROOT, env=env(address, tmp_path), timeout=120)  # fmt: skip


async def test_a_person_reviews_a_running_research_from_another_terminal(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    research = popen_sleuth(
        ["research", "Acme widgets?", "--app", "tests.helpers.apps.research_app:app", "--research", "crash",
         "--review", "summary", "--task-queue", str(uuid.uuid4())],
        cwd=ROOT, env=env(address, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    # Read the run's output as it comes, as the person at its terminal does: they decide after
    # the command has said that a review waits, not merely once the workflow waits.
    lines: list[str] = []
    errors: list[str] = []
    assert research.stdout is not None and research.stderr is not None
    readers = [
        threading.Thread(target=lines.extend, args=(research.stdout,), daemon=True),
        threading.Thread(target=errors.extend, args=(research.stderr,), daemon=True),
    ]
    announced = "  … awaiting review: decide with `sleuth review "

    def told(times: int) -> bool:
        return sum(line.startswith(announced) for line in list(lines)) >= times

    try:
        for reader in readers:
            reader.start()
        await wait_for(lambda: bool(lines), "the run's first line")
        first = lines[0]
        assert first.startswith("research run ") and first.strip().endswith("started")
        run_id = first.split()[2]
        handle = dev_env.client.get_workflow_handle(run_id)

        async def waits(review_id: str) -> bool:
            pending = await handle.query("pending_review", result_type=PendingReview | None)  # type: ignore[arg-type]
            return pending is not None and pending.review_id == review_id  # type: ignore[union-attr]

        await wait_for(lambda: waits("summary-1"), "the summary review")
        await wait_for(
            lambda: told(1), "the command saying a review waits", detail=lambda: "".join(lines)
        )
        shown = sleuth(address, tmp_path, "review", run_id, "--json")
        assert shown.returncode == 0, shown.stderr
        pending = PendingReview.model_validate(json.loads(shown.stdout))
        assert pending.kind == "summary" and "40 thousand widgets" in pending.details["summary"]
        assert f"sleuth review {run_id} --approve" in shown.stderr

        revised = sleuth(address, tmp_path, "review", run_id, "--revise", "Cite the report.")
        assert revised.returncode == 0, revised.stderr
        assert f"revise: sent to {run_id} (summary-1)" in revised.stdout
        await wait_for(lambda: waits("summary-2"), "the revised summary's review")
        await wait_for(
            lambda: told(2),
            "the command saying the next review waits",
            detail=lambda: "".join(lines),
        )
        approved = sleuth(address, tmp_path, "review", run_id, "--approve")
        assert approved.returncode == 0, approved.stderr
        research.wait(timeout=scaled(120))
        for reader in readers:
            reader.join(timeout=scaled(30))
    finally:
        if research.poll() is None:
            research.kill()
            research.wait()
    assert research.returncode == 0, "".join(errors)
    report = "".join(lines)
    assert f"awaiting review: decide with `sleuth review {run_id}`" in report
    assert "Review summary-1: revise (Cite the report.)" in report
    assert "Review summary-2: approve" in report
    assert "Cost: $0\n" in report  # the scripted model is free

    nothing = sleuth(address, tmp_path, "review", run_id)
    assert nothing.returncode == 0
    assert f"nothing waits for review on {run_id} (status: completed)" in nothing.stdout
    missing = sleuth(address, tmp_path, "review", "research-nope")
    assert missing.returncode == 2 and "no run 'research-nope'" in missing.stderr


def test_the_event_lines_say_what_waits_and_how_it_was_decided() -> None:
    awaiting = Event(
        event_type="research.review.awaiting",
        run_id="research-market-1",
        timestamp=0.0,
        data={"review_id": "summary-1", "kind": "summary", "subject": "summary for 'q'"},
    )
    assert describe_event(awaiting) == (
        "  ⏸ awaiting review summary-1 (summary for 'q'): decide with "
        "`sleuth review research-market-1`"
    )
    tool = Event(
        event_type="agent.approval.awaiting",
        run_id="agent-1",
        timestamp=0.0,
        data={"agent": "mailer", "tool": "send_email", "review_id": "tool-call_1"},
    )
    assert "(call send_email)" in describe_event(tool)
    decided = Event(
        event_type="research.review",
        run_id="research-market-1",
        timestamp=0.0,
        data={"review_id": "summary-1", "decision": "reject", "timed_out": True},
    )
    assert describe_event(decided) == "  ✓ review summary-1: reject (timed out)"
    approved = Event(
        event_type="agent.approval",
        run_id="agent-1",
        timestamp=0.0,
        data={"tool": "send_email", "decision": "approve", "timed_out": False},
    )
    assert describe_event(approved) == "  ✓ call send_email: approve"
