"""Issue #13's fault matrix: SIGKILL every workflow type in every kind of step, mid-step and right
after a tool call returned, with the default settings; a new worker finishes every run, no tool
call runs twice, and every step resumes within its heartbeat timeout plus 10 s."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.helpers.fault_matrix import default_heartbeats, run_matrix
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow

TOOL_STEPS = {
    "research.execute",
    "agent.tool",
    "agent.subagent",
    "scan.research_item",
    "decompose.solve",
    "decompose.synthesize",
    "pipeline.stage",
}
"""The steps that run tool calls: each is also killed right after one returned."""


async def test_every_workflow_type_survives_sigkill_at_every_kind_of_step(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    folder = tmp_path / "fault"
    folder.mkdir()
    report = await run_matrix(dev_env.client, folder)
    outcomes = report.outcomes

    killed_mid = {o.cell.activity for o in outcomes if o.cell.kill == "mid-step"}
    killed_after_tool = {o.cell.activity for o in outcomes if o.cell.kill == "after-tool"}
    assert killed_mid == set(default_heartbeats()), "a heartbeating step kind is not in the matrix"
    assert killed_after_tool == TOOL_STEPS
    assert {o.cell.workflow for o in outcomes} == {
        "research",
        "agent",
        "scan",
        "decompose",
        "pipeline",
    }

    assert not report.runs_lost(), [(o.cell.name, o.error) for o in outcomes if o.error]
    repeated = {o.cell.name: o.returns for o in outcomes if o.repeated_calls and not o.cell.corrupt}
    assert not repeated, f"tool calls ran twice: {repeated}"
    slow = {
        o.cell.name: o.resumed_after
        for o in outcomes
        if o.resumed_after is None or o.resumed_after > o.heartbeat_seconds + scaled(10)
    }
    assert not slow, (
        f"steps that did not resume within their heartbeat timeout + {scaled(10):.0f} s: {slow}"
    )
    # Every cell ran its tool calls (a kill mid-tool lets the retry complete that call once).
    assert all(o.calls for o in outcomes if o.cell.hold != "sink")

    # A damaged newest checkpoint costs the calls after the one before it, never the run.
    (corrupt,) = [o for o in outcomes if o.cell.corrupt]
    assert corrupt.error is None and corrupt.repeated_calls == 1
    assert "checkpoint.fallback" in report.worker_log and "corrupt" in report.worker_log
