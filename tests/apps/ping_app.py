"""A minimal App and workflow for infrastructure tests (`--app tests.apps.ping_app:app`)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sleuth.app import App

app = App(task_queue="sleuth-ping", name="ping")


@workflow.defn(name="PingWorkflow")
class PingWorkflow:
    """Answers `pong: <text>` — proof that a worker serves the task queue."""

    @workflow.run
    async def run(self, text: str) -> str:
        return f"pong: {text}"
