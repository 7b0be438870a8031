"""Decompose ReAct activities heartbeat while one model call is slow, and keep the checkpoint."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.decompose import DecomposeActivities
from activities.decompose_models import SolveInput
from sleuth.app import App
from sleuth.decompose import Budget, DeepDecomposer
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


async def test_a_resumed_solve_keeps_heartbeating_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_HOME", str(tmp_path))
    lookups: list[str] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        lookups.append(topic)
        return f"fact about {topic}"

    async def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if call.messages[-1].role == "user":
            return tool_call("lookup", topic="t")
        await asyncio.sleep(1.0)
        return text("the answer")

    app = App()
    app.agent("deep", lambda: DeepDecomposer(ScriptedModel(responder=respond), tools=[lookup]))  # type: ignore[arg-type]
    first, first_beats = env_with(0.3, [])
    await first.run(
        DecomposeActivities(app).solve, SolveInput(agent="deep", task="t", allowance=Budget())
    )
    refs = list(dict.fromkeys(args[0] for args in first_beats if args))
    checkpoint = refs[1]  # after the model turn (refs[0]) and the tool call
    assert lookups == ["t"]

    resumed, beats = env_with(0.3, [checkpoint])
    result = await resumed.run(
        DecomposeActivities(app).solve, SolveInput(agent="deep", task="t", allowance=Budget())
    )
    assert result.text == "the answer"
    assert lookups == ["t"], "the resumed attempt ran the tool call again"
    # Every beat carries a checkpoint: an empty one would make a third attempt start over.
    assert len(beats) >= 3 and all(args for args in beats)
