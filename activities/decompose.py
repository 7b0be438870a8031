"""Decomposition activities: the agent's settings, the decision call, a leaf, a synthesis.

Each is a thin wrapper over the node functions of `sleuth.decompose.DeepDecomposer`, the same
ones the in-process runner uses. The two ReAct activities heartbeat a reference to their loop's
checkpoint, and a retried attempt resumes from it: a completed tool call is not run again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from temporalio import activity

from activities.decompose_models import (
    AgentSettings,
    AgentSettingsInput,
    DecideInput,
    SolveInput,
    SynthesizeInput,
)
from activities.errors import ConfigError, mapped_errors
from sleuth.agent import Agent
from sleuth.app import App
from sleuth.artifacts import default_artifact_store, get_json, put_json
from sleuth.decompose import Decision, DeepDecomposer, NodeOutcome
from sleuth.state import LoopState


def decomposer_for(app: App, name: str) -> DeepDecomposer:
    """The named agent as a `DeepDecomposer` (a plain `Agent` is wrapped with its settings)."""
    agent = app.new_agent(name)
    if isinstance(agent, DeepDecomposer):
        return agent
    if isinstance(agent, Agent):
        return DeepDecomposer(
            agent.model,
            list(agent.tools.values()),
            agent.system_prompt,
            max_iterations=agent.max_iterations,
            max_output_tokens=agent.max_output_tokens,
            name=agent.name,
        )
    raise ConfigError(
        f"agent {name!r} is a {type(agent).__name__}; DecomposeWorkflow needs a DeepDecomposer "
        "(type: deep in YAML) or a sleuth.Agent"
    )


DEFAULT_HEARTBEAT_INTERVAL = 10.0


@contextlib.asynccontextmanager
async def _checkpointing() -> AsyncIterator[
    tuple[LoopState | None, Callable[[LoopState], Awaitable[None] | None]]
]:
    """The checkpoint a previous attempt heartbeated (if any), and the hook that heartbeats.

    While the block runs, a timer re-heartbeats the latest checkpoint reference, so one model
    call or tool call longer than the heartbeat timeout does not get the attempt declared dead
    (and a resumed attempt keeps its checkpoint in the details until it writes a newer one)."""
    store = default_artifact_store()
    details = activity.info().heartbeat_details
    latest: list[str] = [str(details[0])] if details else []
    checkpoint = LoopState.model_validate(get_json(store, latest[0])) if latest else None

    def save(state: LoopState) -> None:
        latest[:] = [put_json(store, state)]
        activity.heartbeat(*latest)

    timeout = activity.info().heartbeat_timeout
    interval = timeout.total_seconds() / 3 if timeout else DEFAULT_HEARTBEAT_INTERVAL

    async def beat() -> None:
        while True:
            activity.heartbeat(*latest)
            await asyncio.sleep(interval)

    beating = asyncio.create_task(beat())
    try:
        yield checkpoint, save
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating


class DecomposeActivities:
    """The activities `DecomposeWorkflow` schedules, bound to one App."""

    def __init__(self, app: App):
        self.app = app

    @activity.defn(name="decompose.settings")
    @mapped_errors
    async def settings(self, request: AgentSettingsInput) -> AgentSettings:
        agent = decomposer_for(self.app, request.agent)
        return AgentSettings(
            max_depth=agent.max_depth, max_fan_out=agent.max_fan_out, budget=agent.budget
        )

    @activity.defn(name="decompose.decide")
    @mapped_errors
    async def decide(self, request: DecideInput) -> Decision:
        agent = decomposer_for(self.app, request.agent)
        return await agent.decide(request.task, request.allowance)

    @activity.defn(name="decompose.solve")
    @mapped_errors
    async def solve(self, request: SolveInput) -> NodeOutcome:
        agent = decomposer_for(self.app, request.agent)
        async with _checkpointing() as (checkpoint, save):
            return await agent.solve(
                request.task, request.allowance, checkpoint=checkpoint, on_checkpoint=save
            )

    @activity.defn(name="decompose.synthesize")
    @mapped_errors
    async def synthesize(self, request: SynthesizeInput) -> NodeOutcome:
        agent = decomposer_for(self.app, request.agent)
        async with _checkpointing() as (checkpoint, save):
            return await agent.synthesize(
                request.task,
                [(r.task, r.result) for r in request.results],
                request.allowance,
                checkpoint=checkpoint,
                on_checkpoint=save,
            )

    def all(self) -> list[Callable[..., Any]]:
        return [self.settings, self.decide, self.solve, self.synthesize]
