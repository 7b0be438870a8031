"""A pipeline stage heartbeats within its heartbeat timeout, whatever `heartbeat_every_seconds` says."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

from temporalio.testing import ActivityEnvironment

from sleuth.activities.pipeline import PipelineActivities
from sleuth.activities.pipeline_models import StageInput
from sleuth.apps.app import App
from sleuth.flows.composition import SequentialPipeline


async def test_stage_heartbeats_faster_than_a_short_heartbeat_timeout() -> None:
    async def slow(task: str) -> str:
        await asyncio.sleep(1.0)
        return f"done({task})"

    app = App()
    app.agent("slow", lambda: slow)
    app.pipeline("p", SequentialPipeline(agents=["slow"]))
    env = ActivityEnvironment()
    # A crash test (or an impatient deploy) sets stage.heartbeat_seconds low and leaves the
    # default heartbeat_every_seconds (10 s): the stage must still beat within the timeout.
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=0.3))
    beats: list[tuple[object, ...]] = []
    env.on_heartbeat = lambda *args: beats.append(args)
    request = StageInput(pipeline="p", path=[], index=0, task="t", heartbeat_every_seconds=10.0)
    output = await env.run(PipelineActivities(app).stage, request)
    assert output.output == "done(t)"
    assert len(beats) >= 3
