"""Decomposition activities: the agent's settings, the decision call, a leaf, a synthesis.

Each is a thin wrapper over the node functions of `sleuth.flows.decompose.DeepDecomposer`, the same
ones the in-process runner uses. The decision call and the two ReAct activities heartbeat on a
timer; the ReAct loops make a checkpoint durable in their journal after every model turn and tool
call (`sleuth.activities.checkpoints`), and a retried attempt resumes from it: a completed tool call is
not run again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from sleuth.activities.decompose_models import (
    AgentSettings,
    AgentSettingsInput,
    DecideInput,
    SolveInput,
    SynthesizeInput,
)
from sleuth.activities.errors import ConfigError, mapped_errors
from sleuth.activities.events import streams_events
from sleuth.activities.heartbeat import checkpointing, heartbeating
from sleuth.agent import Agent
from sleuth.apps.app import App
from sleuth.flows.decompose import Decision, DeepDecomposer, NodeOutcome
from sleuth.runtime.artifacts import default_artifact_store


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


class DecomposeActivities:
    """The activities `DecomposeWorkflow` schedules, bound to one App."""

    def __init__(self, app: App):
        self.app = app

    @activity.defn(name="decompose.settings")
    @mapped_errors
    @streams_events
    async def settings(self, request: AgentSettingsInput) -> AgentSettings:
        agent = decomposer_for(self.app, request.agent)
        return AgentSettings(
            max_depth=agent.max_depth, max_fan_out=agent.max_fan_out, budget=agent.budget
        )

    @activity.defn(name="decompose.decide")
    @mapped_errors
    @streams_events
    async def decide(self, request: DecideInput) -> Decision:
        agent = decomposer_for(self.app, request.agent)
        async with heartbeating():
            return await agent.decide(request.task, request.allowance)

    @activity.defn(name="decompose.solve")
    @mapped_errors
    @streams_events
    async def solve(self, request: SolveInput) -> NodeOutcome:
        agent = decomposer_for(self.app, request.agent)
        async with checkpointing(default_artifact_store()) as (checkpoint, save):
            return await agent.solve(
                request.task, request.allowance, checkpoint=checkpoint, on_checkpoint=save
            )

    @activity.defn(name="decompose.synthesize")
    @mapped_errors
    @streams_events
    async def synthesize(self, request: SynthesizeInput) -> NodeOutcome:
        agent = decomposer_for(self.app, request.agent)
        async with checkpointing(default_artifact_store()) as (checkpoint, save):
            return await agent.synthesize(
                request.task,
                [(r.task, r.result) for r in request.results],
                request.allowance,
                checkpoint=checkpoint,
                on_checkpoint=save,
            )

    def all(self) -> list[Callable[..., Any]]:
        return [self.settings, self.decide, self.solve, self.synthesize]
