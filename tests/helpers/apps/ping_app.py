"""A minimal App and workflow for infrastructure tests (`--app tests.helpers.apps.ping_app:app`)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sleuth.apps.app import App

app = App(task_queue="sleuth-ping", name="ping")


@workflow.defn(name="PingWorkflow")
class PingWorkflow:
    """Answers `pong: <text>` — proof that a worker serves the task queue."""

    @workflow.run
    async def run(self, text: str) -> str:
        return f"pong: {text}"


@workflow.defn(name="NapWorkflow")
class NapWorkflow:
    """Sleeps for `hours` of workflow time, then reports the workflow clock's advance in hours."""

    @workflow.run
    async def run(self, hours: float) -> float:
        started = workflow.now()
        await workflow.sleep(timedelta(hours=hours))
        return (workflow.now() - started).total_seconds() / 3600
