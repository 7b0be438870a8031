"""`DecomposeWorkflow`: hierarchical decomposition where every subtask is a child workflow.

Input `{"agent": "deep-researcher", "task": "...", "max_depth": 3}` (0 means 3). Below max depth
one activity decides; a split starts one child `DecomposeWorkflow` per subtask, at most the
agent's `max_fan_out` at once, each with its share of the tree's budget (`BudgetPool`: what a
child did not use flows back to later ones); the results go into the digest and a synthesis
activity answers. The control flow is the in-process decomposer's own
(`sleuth.flows.decompose_flow.drive_node` over `next_decompose_step`); this module only says how each
step runs durably. The `tree` query returns the tree so far; the memo shows the counters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

with workflow.unsafe.imports_passed_through():
    from sleuth._util.text import preview
    from sleuth.activities.decompose import DecomposeActivities
    from sleuth.activities.decompose_models import (
        AgentSettingsInput,
        DecideInput,
        DecomposeConfig,
        DecomposeInput,
        DecomposeOutput,
        SolveInput,
        SubtaskResult,
        SynthesizeInput,
    )
    from sleuth.flows import decompose_flow as flow
    from sleuth.flows.decompose import effective_max_depth
    from sleuth.usage.budget import Budget


@workflow.defn
class DecomposeWorkflow:
    """One task of a decomposition tree (the root, or a subtask started by its parent)."""

    def __init__(self) -> None:
        self._stream = WorkflowStream()
        self._node = flow.TaskNode(task="", depth=0)

    @workflow.query
    def tree(self) -> flow.TaskNode:
        """The tree so far: this task, finished subtrees in full, running subtasks by workflow id."""
        return self._node

    @workflow.run
    async def run(self, request: DecomposeInput) -> DecomposeOutput:
        config = request.config or DecomposeConfig()
        node = self._node = flow.TaskNode(
            task=request.task, depth=request.depth, workflow_id=workflow.info().workflow_id
        )
        if request.allowance is None:
            settings = await workflow.execute_activity_method(
                DecomposeActivities.settings,
                AgentSettingsInput(agent=request.agent),
                summary=f"read the settings of agent {request.agent}",
                **config.settings.activity_options(),
            )
            max_depth = effective_max_depth(request.max_depth, settings.max_depth)
            allowance = request.budget or settings.budget or Budget()
            fan_out = settings.max_fan_out
        else:
            max_depth = effective_max_depth(request.max_depth)
            allowance = request.allowance
            fan_out = request.max_fan_out or 1
        workflow.logger.info(
            "decompose depth=%d/%d task=%s", node.depth, max_depth, preview(request.task)
        )
        _memo(node, max_depth)
        run = flow.NodeRun(node=node, max_depth=max_depth, max_fan_out=fan_out, allowance=allowance)
        outcome = await flow.drive_node(run, _Durable(request, config))
        return DecomposeOutput(
            answer=outcome.text,
            outcome="budget_exhausted" if outcome.budget_exhausted else "completed",
            spent=outcome.spent,
            tree=node,
        )


@dataclass
class _Durable:
    """Carries out `drive_node`'s steps durably (`NodeSteps`): activities and child workflows."""

    request: DecomposeInput
    config: DecomposeConfig

    async def decide(self, step: flow.Decide) -> flow.Decision:
        return await workflow.execute_activity_method(
            DecomposeActivities.decide,
            DecideInput(agent=self.request.agent, task=step.task, allowance=step.allowance),
            summary=f"decide (depth {self.request.depth}): {preview(step.task, 80)}",
            **self.config.decide.activity_options(),
        )

    async def solve(self, step: flow.Solve) -> flow.NodeOutcome:
        return await workflow.execute_activity_method(
            DecomposeActivities.solve,
            SolveInput(agent=self.request.agent, task=step.task, allowance=step.allowance),
            summary=f"solve (depth {self.request.depth}): {preview(step.task, 80)}",
            **self.config.solve.activity_options(),
        )

    async def synthesize(self, step: flow.Synthesize) -> flow.NodeOutcome:
        return await workflow.execute_activity_method(
            DecomposeActivities.synthesize,
            SynthesizeInput(
                agent=self.request.agent,
                task=step.task,
                results=[SubtaskResult(task=task, result=text) for task, text in step.results],
                allowance=step.allowance,
            ),
            summary=f"synthesize {len(step.results)} results: {preview(step.task, 80)}",
            **self.config.synthesize.activity_options(),
        )

    def start_subtask(
        self, run: flow.NodeRun, step: flow.StartSubtask
    ) -> asyncio.Future[flow.FinishedSubtask]:
        number = step.index + 1
        child = run.node.children[step.index]
        child.workflow_id = f"{workflow.info().workflow_id}.{number}"
        started = workflow.execute_child_workflow(
            DecomposeWorkflow.run,
            DecomposeInput(
                agent=self.request.agent,
                task=step.task,
                max_depth=run.max_depth,
                config=self.config,
                depth=step.depth,
                allowance=step.allowance,
                max_fan_out=run.max_fan_out,
            ),
            id=child.workflow_id,
            static_summary=f"subtask {number} at depth {step.depth}: {preview(step.task, 100)}",
        )
        return asyncio.ensure_future(_subtask_result(started))

    async def first_finished(
        self, running: Sequence[asyncio.Future[flow.FinishedSubtask]]
    ) -> list[asyncio.Future[flow.FinishedSubtask]]:
        done, _ = await workflow.wait(running, return_when=asyncio.FIRST_COMPLETED)
        return list(done)

    def observe(self, run: flow.NodeRun, step: flow.DecomposeStep, *, finished: bool) -> None:
        """Upsert the memo where the tree visibly changes: a split, a finished subtask, a leaf
        loop or the synthesis starting, the node done (the points recorded histories expect)."""
        if isinstance(step, flow.SkipSubtask) and not finished:
            skipped = run.node.children[step.index]
            workflow.logger.info("decompose skipped (budget spent): %s", skipped.task)
        started = not finished and isinstance(step, flow.Solve | flow.Synthesize | flow.Finished)
        split = finished and isinstance(step, flow.Decide) and run.pool is not None
        if started or split or (finished and isinstance(step, flow.AwaitSubtasks)):
            _memo(run.node, run.max_depth)


async def _subtask_result(started: Awaitable[DecomposeOutput]) -> flow.FinishedSubtask:
    result = await started
    outcome = flow.NodeOutcome(
        text=result.answer,
        spent=result.spent,
        budget_exhausted=result.outcome == "budget_exhausted",
    )
    return outcome, result.tree


def _memo(node: flow.TaskNode, max_depth: int) -> None:
    workflow.upsert_memo(
        {
            "task": preview(node.task, 200),
            "depth": node.depth,
            "max_depth": max_depth,
            "status": node.status,
            "subtasks": len(node.children),
            "subtasks_done": sum(c.status in ("done", "skipped") for c in node.children),
            "tool_calls": node.spent.tool_calls,
            "input_tokens": node.spent.input_tokens,
            "output_tokens": node.spent.output_tokens,
            "budget_exhausted": node.budget_exhausted,
        }
    )
