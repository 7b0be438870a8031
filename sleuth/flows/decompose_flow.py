"""The one control flow of a decomposition node: `next_decompose_step(run)` says what runs next.

A node of the tree decides (below `max_depth`), then either solves its task directly, or starts
its subtasks (at most `max_fan_out` at once, each with a share of the node's allowance from a
`BudgetPool`), waits for them, and synthesises their results. `NodeRun` is all of that node's
progress as plain data; `next_decompose_step` is a pure function of it, and the `NodeRun.start` /
`NodeRun.record_*` methods fold in what happened. `drive_node` is the loop over them, and both
runners call it with their own way of carrying out a step (`NodeSteps`): `DeepDecomposer.arun`
in-process (a subtask is a nested `drive_node`), `workflows.DecomposeWorkflow` durably (a
decision, a leaf and a synthesis are activities; a subtask is a child workflow).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from sleuth._util.text import preview
from sleuth.runtime.errors import SleuthError
from sleuth.usage.budget import Budget, BudgetPool, Spend

NOT_RUN_TEXT = "(not run: the shared budget ran out before this subtask started)"

NodeStatus = Literal["pending", "deciding", "solving", "running", "synthesizing", "done", "skipped"]


class TaskNode(BaseModel):
    """One task of the tree: what it is, how far it got, what it used."""

    task: str
    depth: int
    status: NodeStatus = "pending"
    mode: Literal["direct", "decomposed"] | None = None
    children: list[TaskNode] = Field(default_factory=list)
    result_preview: str = ""
    spent: Spend = Field(default_factory=Spend)
    budget_exhausted: bool = False
    workflow_id: str | None = None

    def count(self, status: NodeStatus) -> int:
        """How many nodes of this subtree have `status`."""
        return (self.status == status) + sum(c.count(status) for c in self.children)


class Decision(BaseModel):
    """The outcome of the decision call."""

    direct: bool
    subtasks: list[str] = Field(default_factory=list)
    reason: str = ""
    spent: Spend = Field(default_factory=Spend)
    budget_exhausted: bool = False


class NodeOutcome(BaseModel):
    """A leaf's or a synthesis's answer (and, once a node is finished, the node's)."""

    text: str
    spent: Spend = Field(default_factory=Spend)
    budget_exhausted: bool = False
    skipped: bool = False
    """The budget left was too small to start the work at all."""


# -- the steps ------------------------------------------------------------------------------------


class Decide(BaseModel):
    """Ask the model once: solve `task` directly, or split it?"""

    kind: Literal["decide"] = "decide"
    task: str
    allowance: Budget


class Solve(BaseModel):
    """Solve `task` with a ReAct loop within `allowance`."""

    kind: Literal["solve"] = "solve"
    task: str
    allowance: Budget


class StartSubtask(BaseModel):
    """Start subtask `index` (a node of its own, one level down) with `allowance`."""

    kind: Literal["start_subtask"] = "start_subtask"
    index: int
    task: str
    depth: int
    allowance: Budget


class SkipSubtask(BaseModel):
    """Subtask `index` cannot start: the budget is spent. Its result says so."""

    kind: Literal["skip_subtask"] = "skip_subtask"
    index: int


class AwaitSubtasks(BaseModel):
    """Wait until one of the `running` subtasks finishes."""

    kind: Literal["await_subtasks"] = "await_subtasks"
    running: list[int]


class Synthesize(BaseModel):
    """Write the answer from the subtask `results` ((subtask, result) pairs) with a ReAct loop."""

    kind: Literal["synthesize"] = "synthesize"
    task: str
    results: list[tuple[str, str]]
    grant: Budget | None
    """The synthesis's share of the pool; None when nothing was left."""

    @property
    def allowance(self) -> Budget:
        """What the synthesis may spend: its share, or no tool calls when nothing was left."""
        return self.grant or Budget(max_tool_calls=0)


class Finished(BaseModel):
    """The node is done: `outcome` is its answer, what its subtree spent, whether it ran out."""

    kind: Literal["finished"] = "finished"
    outcome: NodeOutcome


DecomposeStep = Decide | Solve | StartSubtask | SkipSubtask | AwaitSubtasks | Synthesize | Finished


# -- the state ------------------------------------------------------------------------------------


class NodeRun(BaseModel):
    """Everything `next_decompose_step` needs about one node of the tree. Plain data."""

    node: TaskNode
    """The node's tree: status, mode, children (finished subtrees in full) and counters."""
    max_depth: int
    max_fan_out: int
    allowance: Budget
    """What this node's subtree may spend."""
    decision: Decision | None = None
    pool: BudgetPool | None = None
    """Shares the allowance left after the decision among the subtasks and the synthesis."""
    running: list[int] = Field(default_factory=list)
    grants: dict[int, Budget] = Field(default_factory=dict)
    """The share each running subtask holds (settled when it finishes)."""
    results: dict[int, NodeOutcome] = Field(default_factory=dict)
    synthesis_grant: Budget | None = None
    answer: NodeOutcome | None = None
    """The node's outcome once its leaf loop or synthesis answered."""

    def start(self, step: DecomposeStep) -> None:
        """Mark `step` as started: the node's status, and any share it takes from the pool."""
        node = self.node
        if isinstance(step, Decide):
            node.status = "deciding"
        elif isinstance(step, Solve):
            node.status, node.mode = "solving", "direct"
        elif isinstance(step, StartSubtask):
            self._pool.take(step.allowance)
            self.running.append(step.index)
            self.grants[step.index] = step.allowance
            node.children[step.index].status = "running"
        elif isinstance(step, SkipSubtask):
            self._pool.take(None)
            child = node.children[step.index]
            child.status, child.budget_exhausted = "skipped", True
            child.result_preview = NOT_RUN_TEXT
            self.results[step.index] = NodeOutcome(
                text=NOT_RUN_TEXT, budget_exhausted=True, skipped=True
            )
        elif isinstance(step, Synthesize):
            self._pool.take(step.grant)
            self.synthesis_grant = step.grant
            node.status = "synthesizing"

    def subtask(self, step: StartSubtask) -> NodeRun:
        """The run of the subtask `step` starts (its node is this node's child, shared)."""
        return NodeRun(
            node=self.node.children[step.index],
            max_depth=self.max_depth,
            max_fan_out=self.max_fan_out,
            allowance=step.allowance,
        )

    def record_decision(self, decision: Decision) -> None:
        """Fold in the decision; a split creates the subtasks and the pool that shares the budget."""
        self.decision = decision
        if decision.direct:
            return
        node = self.node
        node.status, node.mode = "running", "decomposed"
        node.children = [TaskNode(task=s, depth=node.depth + 1) for s in decision.subtasks]
        self.pool = BudgetPool.open(
            self.allowance.minus(decision.spent),
            consumers=len(decision.subtasks) + 1,
            at_once=self.max_fan_out,
        )

    def record_subtask(self, index: int, outcome: NodeOutcome, tree: TaskNode) -> None:
        """Subtask `index` finished with `outcome`; `tree` is its final subtree."""
        self.running.remove(index)
        self._pool.settle(self.grants.pop(index), outcome.spent)
        self.results[index] = outcome
        self.node.children[index] = tree

    def record_answer(self, outcome: NodeOutcome) -> None:
        """The leaf loop or the synthesis answered: the node is finished."""
        decision = self.decision or Decision(direct=True)
        exhausted = decision.budget_exhausted or outcome.budget_exhausted
        if self.pool is None:
            spent = decision.spent + outcome.spent
        else:
            self.pool.settle(self.synthesis_grant, outcome.spent)
            spent = decision.spent + self.pool.spent
            exhausted = exhausted or any(r.budget_exhausted for r in self.results.values())
        node = self.node
        node.status = "skipped" if outcome.skipped else "done"
        node.spent, node.budget_exhausted = spent, exhausted
        node.result_preview = preview(outcome.text, 200)
        self.answer = NodeOutcome(
            text=outcome.text, spent=spent, budget_exhausted=exhausted, skipped=outcome.skipped
        )

    @property
    def _pool(self) -> BudgetPool:
        if self.pool is None:
            raise SleuthError(
                "this decomposition node has no subtasks yet: take the steps from "
                "next_decompose_step, which starts subtasks only after a split decision"
            )
        return self.pool


def next_decompose_step(run: NodeRun) -> DecomposeStep:
    """What runs next for this node. Pure: both runners drive it.

    Below max depth the node decides first; a direct decision (or max depth) solves; a split
    starts waiting subtasks in order while fewer than `max_fan_out` run and the pool has a share
    (a subtask the pool has nothing for is skipped), waits while subtasks run, then synthesises.
    """
    if run.answer is not None:
        return Finished(outcome=run.answer)
    node, decision = run.node, run.decision
    if decision is None and node.depth < run.max_depth:
        return Decide(task=node.task, allowance=run.allowance)
    if decision is None or decision.direct:
        spent = decision.spent if decision is not None else Spend()
        return Solve(task=node.task, allowance=run.allowance.minus(spent))
    pool = run._pool
    waiting = [
        index
        for index in range(len(node.children))
        if index not in run.results and index not in run.running
    ]
    if waiting and len(run.running) < run.max_fan_out and not pool.must_wait():
        share = pool.offer()
        if share is None:
            return SkipSubtask(index=waiting[0])
        child = node.children[waiting[0]]
        return StartSubtask(index=waiting[0], task=child.task, depth=child.depth, allowance=share)
    if run.running:
        return AwaitSubtasks(running=list(run.running))
    results = [(task, run.results[i].text) for i, task in enumerate(decision.subtasks)]
    return Synthesize(task=node.task, results=results, grant=pool.offer())


FinishedSubtask = tuple[NodeOutcome, TaskNode]
"""What a finished subtask gives back: its outcome and its final subtree."""


class NodeSteps(Protocol):
    """How one runner carries out the steps `drive_node` hands it."""

    async def decide(self, step: Decide) -> Decision: ...

    async def solve(self, step: Solve) -> NodeOutcome: ...

    async def synthesize(self, step: Synthesize) -> NodeOutcome: ...

    def start_subtask(self, run: NodeRun, step: StartSubtask) -> asyncio.Future[FinishedSubtask]:
        """Start the subtask in the background (`run.subtask(step)` is its run)."""
        ...

    def first_finished(
        self, running: Sequence[asyncio.Future[FinishedSubtask]]
    ) -> Awaitable[Sequence[asyncio.Future[FinishedSubtask]]]:
        """Wait until at least one of `running` is done; the done ones, in `running` order."""
        ...

    def observe(self, run: NodeRun, step: DecomposeStep, *, finished: bool) -> None:
        """Called when `step` started (`finished=False`) and when its result (for a subtask wait:
        each subtask's) was folded into `run` (`finished=True`): events, progress, memo."""
        ...


async def drive_node(run: NodeRun, steps: NodeSteps) -> NodeOutcome:
    """Run one node to its end: each step from `next_decompose_step`, carried out by `steps`.

    A subtask that fails fails the node: the other running subtasks are cancelled.
    """
    subtasks: dict[asyncio.Future[FinishedSubtask], int] = {}
    try:
        while True:
            step = next_decompose_step(run)
            run.start(step)
            steps.observe(run, step, finished=False)
            if isinstance(step, Finished):
                return step.outcome
            if isinstance(step, Decide):
                run.record_decision(await steps.decide(step))
            elif isinstance(step, Solve):
                run.record_answer(await steps.solve(step))
            elif isinstance(step, Synthesize):
                run.record_answer(await steps.synthesize(step))
            elif isinstance(step, StartSubtask):
                subtasks[steps.start_subtask(run, step)] = step.index
            elif isinstance(step, AwaitSubtasks):
                for done in await steps.first_finished(list(subtasks)):
                    run.record_subtask(subtasks.pop(done), *done.result())
                    steps.observe(run, step, finished=True)
                continue
            steps.observe(run, step, finished=True)
    finally:
        for pending in subtasks:
            pending.cancel()
