"""`DecomposeWorkflow`: hierarchical decomposition where every subtask is a child workflow.

Input `{"agent": "deep-researcher", "task": "...", "max_depth": 3}` (0 means 3). Below max depth
one activity decides; a split starts one child `DecomposeWorkflow` per subtask, at most the
agent's `max_fan_out` at once, each with its share of the tree's budget (`BudgetPool`: what a
child did not use flows back to later ones); the results go into the digest and a synthesis
activity answers. The `tree` query returns the tree so far; the memo shows the counters.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.decompose import DecomposeActivities
    from activities.decompose_models import (
        AgentSettingsInput,
        DecideInput,
        DecomposeConfig,
        DecomposeInput,
        DecomposeOutput,
        SolveInput,
        SubtaskResult,
        SynthesizeInput,
    )
    from sleuth.decompose import (
        NOT_RUN_TEXT,
        Budget,
        BudgetPool,
        NodeOutcome,
        Spend,
        TaskNode,
        effective_max_depth,
    )
    from sleuth.text import preview


@workflow.defn
class DecomposeWorkflow:
    """One task of a decomposition tree (the root, or a subtask started by its parent)."""

    def __init__(self) -> None:
        self._node = TaskNode(task="", depth=0)

    @workflow.query
    def tree(self) -> TaskNode:
        """The tree so far: this task, finished subtrees in full, running subtasks by workflow id."""
        return self._node

    @workflow.run
    async def run(self, request: DecomposeInput) -> DecomposeOutput:
        config = request.config or DecomposeConfig()
        node = self._node = TaskNode(
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
        self._memo(max_depth)

        spent, exhausted = Spend(), False
        if node.depth < max_depth:
            node.status = "deciding"
            decision = await workflow.execute_activity_method(
                DecomposeActivities.decide,
                DecideInput(agent=request.agent, task=request.task, allowance=allowance),
                summary=f"decide (depth {node.depth}): {preview(request.task, 80)}",
                **config.decide.activity_options(),
            )
            spent, exhausted = decision.spent, decision.budget_exhausted
            if not decision.direct:
                pool = BudgetPool(
                    allowance.minus(spent), consumers=len(decision.subtasks) + 1, at_once=fan_out
                )
                outcome = await self._split(
                    request, config, decision.subtasks, pool, max_depth, fan_out
                )
                return self._done(outcome, spent + pool.spent, exhausted, max_depth)
        node.status, node.mode = "solving", "direct"
        self._memo(max_depth)
        solved = await workflow.execute_activity_method(
            DecomposeActivities.solve,
            SolveInput(agent=request.agent, task=request.task, allowance=allowance.minus(spent)),
            summary=f"solve (depth {node.depth}): {preview(request.task, 80)}",
            **config.solve.activity_options(),
        )
        return self._done(solved, spent + solved.spent, exhausted, max_depth)

    async def _split(
        self,
        request: DecomposeInput,
        config: DecomposeConfig,
        subtasks: list[str],
        pool: BudgetPool,
        max_depth: int,
        fan_out: int,
    ) -> NodeOutcome:
        node = self._node
        node.status, node.mode = "running", "decomposed"
        node.children = [TaskNode(task=s, depth=node.depth + 1) for s in subtasks]
        self._memo(max_depth)
        gate = asyncio.Semaphore(fan_out)
        base_id = workflow.info().workflow_id

        async def run_child(number: int, child: TaskNode) -> NodeOutcome:
            async with gate:
                await workflow.wait_condition(lambda: not pool.must_wait())
                grant = pool.grant()
                if grant is None:
                    child.status, child.budget_exhausted = "skipped", True
                    child.result_preview = NOT_RUN_TEXT
                    workflow.logger.info("decompose skipped (budget spent): %s", child.task)
                    return NodeOutcome(text=NOT_RUN_TEXT, budget_exhausted=True, skipped=True)
                child.status, child.workflow_id = "running", f"{base_id}.{number}"
                result = await workflow.execute_child_workflow(
                    DecomposeWorkflow.run,
                    DecomposeInput(
                        agent=request.agent,
                        task=child.task,
                        max_depth=max_depth,
                        config=config,
                        depth=child.depth,
                        allowance=grant,
                        max_fan_out=fan_out,
                    ),
                    id=child.workflow_id,
                    static_summary=f"subtask {number} at depth {child.depth}: "
                    f"{preview(child.task, 100)}",
                )
                pool.settle(grant, result.spent)
                node.children[number - 1] = result.tree
                self._memo(max_depth)
                return NodeOutcome(
                    text=result.answer,
                    spent=result.spent,
                    budget_exhausted=result.outcome == "budget_exhausted",
                )

        outcomes = await asyncio.gather(
            *(run_child(number, child) for number, child in enumerate(node.children, start=1))
        )
        node.status = "synthesizing"
        self._memo(max_depth)
        grant = pool.grant()
        synthesis = await workflow.execute_activity_method(
            DecomposeActivities.synthesize,
            SynthesizeInput(
                agent=request.agent,
                task=request.task,
                results=[
                    SubtaskResult(task=s, result=o.text)
                    for s, o in zip(subtasks, outcomes, strict=True)
                ],
                allowance=grant or Budget(max_tool_calls=0),
            ),
            summary=f"synthesize {len(subtasks)} results: {preview(request.task, 80)}",
            **config.synthesize.activity_options(),
        )
        pool.settle(grant, synthesis.spent)
        exhausted = synthesis.budget_exhausted or any(o.budget_exhausted for o in outcomes)
        return NodeOutcome(text=synthesis.text, spent=synthesis.spent, budget_exhausted=exhausted)

    def _done(
        self, outcome: NodeOutcome, spent: Spend, exhausted: bool, max_depth: int
    ) -> DecomposeOutput:
        node = self._node
        exhausted = exhausted or outcome.budget_exhausted
        node.status = "skipped" if outcome.skipped else "done"
        node.spent, node.budget_exhausted = spent, exhausted
        node.result_preview = preview(outcome.text, 200)
        self._memo(max_depth)
        return DecomposeOutput(
            answer=outcome.text,
            outcome="budget_exhausted" if exhausted else "completed",
            spent=spent,
            tree=node,
        )

    def _memo(self, max_depth: int) -> None:
        node = self._node
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
