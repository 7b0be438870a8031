"""Temporal Schedules that start knowledge scans (e.g. every night at 02:00).

A schedule's action starts `KnowledgeScanWorkflow` with a `ScanRequest` that has no scan id, so
each run's scan id is its workflow id: `scan-<schedule name>-<scheduled time>`, a fresh set of
rows per run. The overlap policy is SKIP: while one scan of the schedule still runs, a due run
is skipped instead of piling up behind it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecution,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)

from sleuth.activities.scan_models import ScanRequest
from sleuth.runtime.errors import InvalidSettingError
from sleuth.workers.summaries import run_summary
from sleuth.workflows.scan import KnowledgeScanWorkflow


def scan_schedule(
    request: ScanRequest,
    *,
    name: str,
    cron: str,
    task_queue: str,
    timezone: str | None = None,
    note: str | None = None,
) -> Schedule:
    """The schedule that starts `request` on `cron` (five fields, e.g. "0 2 * * *")."""
    if len(cron.split()) != 5:
        raise InvalidSettingError(
            f"cron {cron!r} must have five fields: minute hour day-of-month month day-of-week "
            '(e.g. "0 2 * * *" for 02:00 every day)'
        )
    return Schedule(
        action=ScheduleActionStartWorkflow(
            KnowledgeScanWorkflow.run,
            request,
            id=f"scan-{name}",
            task_queue=task_queue,
            static_summary=run_summary([request]),
        ),
        spec=ScheduleSpec(cron_expressions=[cron], time_zone_name=timezone),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
        state=ScheduleState(note=note or f"scan {request.provider} with {request.runner}"),
    )


async def create_scan_schedule(
    client: Client,
    name: str,
    request: ScanRequest,
    *,
    cron: str,
    task_queue: str,
    timezone: str | None = None,
) -> ScheduleHandle:
    """Create schedule `name` (fails if it exists: delete it first, or pick another name)."""
    schedule = scan_schedule(
        request, name=name, cron=cron, task_queue=task_queue, timezone=timezone
    )
    return await client.create_schedule(name, schedule)


@dataclass
class ScheduleSummary:
    """What `sleuth schedule list/describe` shows about one schedule."""

    name: str
    paused: bool
    note: str
    cron: list[str]
    timezone: str
    workflow_type: str
    next_runs: list[datetime]
    recent_workflow_ids: list[str]
    running_workflow_ids: list[str]


def summarize(name: str, description: ScheduleDescription) -> ScheduleSummary:
    schedule = description.schedule
    action = schedule.action
    info = description.info
    return ScheduleSummary(
        name=name,
        paused=schedule.state.paused,
        note=schedule.state.note or "",
        cron=list(schedule.spec.cron_expressions),
        timezone=schedule.spec.time_zone_name or "UTC",
        workflow_type=(
            str(action.workflow) if isinstance(action, ScheduleActionStartWorkflow) else "?"
        ),
        next_runs=list(info.next_action_times[:3]),
        recent_workflow_ids=_workflow_ids(result.action for result in info.recent_actions),
        running_workflow_ids=_workflow_ids(info.running_actions),
    )


def _workflow_ids(executions: Iterable[ScheduleActionExecution]) -> list[str]:
    return [
        execution.workflow_id
        for execution in executions
        if isinstance(execution, ScheduleActionExecutionStartWorkflow)
    ]
