"""Decompose ReAct activities heartbeat while one model call is slow, and keep the checkpoint."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from sleuth.activities.decompose import DecomposeActivities
from sleuth.activities.decompose_models import SolveInput
from sleuth.apps.app import App
from sleuth.flows.decompose import Budget, DeepDecomposer
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.tools import tool


def slow_app(delay: float) -> App:
    async def slow(call: ModelCall):  # type: ignore[no-untyped-def]
        await asyncio.sleep(delay)
        return text("the answer")

    app = App()
    app.agent("deep", lambda: DeepDecomposer(ScriptedModel(responder=slow)))  # type: ignore[arg-type]
    return app


def env_with(heartbeat_seconds: float, details: list[object]) -> tuple[ActivityEnvironment, list]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        heartbeat_timeout=timedelta(seconds=heartbeat_seconds),
        heartbeat_details=details,
    )
    beats: list = []
    env.on_heartbeat = lambda *args: beats.append(args)
    return env, beats


async def test_solve_heartbeats_during_a_model_call_longer_than_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path))
    env, beats = env_with(0.3, [])
    activities = DecomposeActivities(slow_app(1.0))
    result = await env.run(activities.solve, SolveInput(agent="deep", task="t", allowance=Budget()))
    assert result.text == "the answer"
    # Without a timer, nothing beats until the 1 s model call returns: the server would declare
    # the attempt dead after 0.3 s and retry it, again and again.
    assert len(beats) >= 3


async def test_a_retried_solve_resumes_from_its_journal_without_any_heartbeat_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path))
    lookups: list[str] = []
    crashes = [RuntimeError("the worker died")]

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        lookups.append(topic)
        return f"fact about {topic}"

    async def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if call.messages[-1].role == "user":
            return tool_call("lookup", topic="t")
        if crashes:
            raise crashes.pop()
        await asyncio.sleep(1.0)
        return text("the answer")

    app = App()
    app.agent("deep", lambda: DeepDecomposer(ScriptedModel(responder=respond), tools=[lookup]))  # type: ignore[arg-type]
    request = SolveInput(agent="deep", task="t", allowance=Budget())
    first, _ = env_with(0.3, [])
    with pytest.raises(RuntimeError, match="the worker died"):
        await first.run(DecomposeActivities(app).solve, request)
    assert lookups == ["t"]

    # No heartbeat of the first attempt reached the server: the retry finds the journal itself.
    retry, beats = env_with(0.3, [])
    retry.info = dataclasses.replace(retry.info, attempt=2)
    result = await retry.run(DecomposeActivities(app).solve, request)
    assert result.text == "the answer"
    assert lookups == ["t"], "the retried attempt ran the tool call again"
    # Every beat carries the checkpoint it resumed from, for people reading the pending activity.
    assert len(beats) >= 3 and all(args and args[0].startswith("sha256:") for args in beats)
