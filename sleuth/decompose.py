"""Hierarchical task decomposition (`type: deep`): decide, recurse, synthesise, within one budget.

A `DeepDecomposer` asks its model once whether a task can be solved directly. If not, the model
lists subtasks; each is decomposed the same way (in parallel, at most `max_fan_out` at once), down
to `max_depth`, where tasks are always solved directly with a ReAct loop. The subtask results are
gathered into a digest (`## Subtask 1: <text>` …) and a final ReAct loop, with tools, synthesises
the answer.

The `Budget` (`sleuth.budget`) covers the whole tree, not each node. Each node has an *allowance*: a
parent shares its own allowance among its subtasks and then its synthesis with a `BudgetPool`,
which only hands out what nobody else holds, and takes back what a finished subtask did not use. So
parallel subtasks cannot together spend more than the tree has. Tool calls are counted exactly (a
call past the allowance is refused, not run); a model call starts only while tokens are left and
its prompt fits (estimated at four characters a token), so the tree can pass its token budget only
by what that estimate misses. When the budget is spent the remaining work ends with what is
known, and the result says `outcome="budget_exhausted"`.

The same node functions (`decide`, `solve`, `synthesize`) and the same `BudgetPool` serve both
runners: `DeepDecomposer.arun` in-process and `workflows.DecomposeWorkflow` durably.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.agent import CheckpointHook
from sleuth.budget import (
    BUDGET_REFUSED,
    Budget,
    BudgetPool,
    OutOfTokens,
    Spend,
    budgeted_loop,
    what_is_known,
)
from sleuth.events import emit
from sleuth.models import resolve
from sleuth.models.base import Message, Model
from sleuth.state import LoopState
from sleuth.text import preview
from sleuth.tools import Tool, as_tool

DEFAULT_MAX_DEPTH = 3
NOT_RUN_TEXT = "(not run: the shared budget ran out before this subtask started)"

_DECISION_PROMPT = """Decide how to handle the task below.
If you can solve it directly, answer with exactly: {{"direct": true}}
If it should be split into smaller subtasks, answer with exactly:
  {{"direct": false, "subtasks": ["first subtask", "second subtask", ...]}}
Answer with the JSON object only.
Task: {task}"""


def decision_prompt(task: str) -> str:
    """The one-call decision prompt for `task`."""
    return _DECISION_PROMPT.format(task=task)


def synthesis_prompt(task: str, digest: str) -> str:
    """The prompt of the synthesis ReAct loop: the original task and the subtask digest."""
    return (
        f"Original task: {task}\nSubtask results:\n{digest}\n"
        "Synthesize a final comprehensive answer."
    )


def build_digest(results: Sequence[tuple[str, str]]) -> str:
    """The markdown digest of (subtask, result) pairs: `## Subtask 1: <text>\\n<result>` …"""
    return "\n\n".join(
        f"## Subtask {number}: {subtask}\n{result}"
        for number, (subtask, result) in enumerate(results, start=1)
    )


def effective_max_depth(value: int | None, default: int = DEFAULT_MAX_DEPTH) -> int:
    """`None` means `default`; 0 means 3 (as a YAML `deep_max_depth: 0` does)."""
    if value is None:
        value = default
    if value < 0:
        raise ValueError(f"max_depth must be 0 or more, not {value}")
    return value or DEFAULT_MAX_DEPTH


# -- results and the tree ---------------------------------------------------------------------

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
    """A leaf's or a synthesis's answer."""

    text: str
    spent: Spend = Field(default_factory=Spend)
    budget_exhausted: bool = False
    skipped: bool = False
    """The budget left was too small to start the work at all."""


class DecomposeResult(BaseModel):
    """What a decomposition produced."""

    answer: str
    outcome: Literal["completed", "budget_exhausted"]
    spent: Spend
    tree: TaskNode

    @property
    def message(self) -> str:
        """The answer (so a decomposition can be a pipeline stage like any agent)."""
        return self.answer

    @property
    def budget_exhausted(self) -> bool:
        return self.outcome == "budget_exhausted"


def parse_decision(text: str) -> tuple[bool, list[str], str]:
    """(direct, subtasks, reason). Anything but a well-formed split means: solve directly."""
    cleaned = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    try:
        data = json.loads(cleaned)
    except (json.JSONDecodeError, ValueError):
        return True, [], "malformed decision JSON"
    if not isinstance(data, dict):
        return True, [], "decision is not a JSON object"
    if data.get("direct") is not False:
        return True, [], "model chose to solve directly"
    subtasks = data.get("subtasks")
    if not isinstance(subtasks, list):
        return True, [], "decision has no subtask list"
    cleaned_subtasks = [s.strip() for s in subtasks if isinstance(s, str) and s.strip()]
    if not cleaned_subtasks:
        return True, [], "decision has no subtasks"
    return False, cleaned_subtasks, f"split into {len(cleaned_subtasks)} subtasks"


# -- the decomposer ---------------------------------------------------------------------------


class DeepDecomposer:
    """An agent that decomposes tasks recursively, solves the leaves and synthesises the results.

    `model`, `tools`, `system_prompt` and `max_iterations` (per ReAct loop: every leaf and every
    synthesis) configure the inner loops. `max_depth` bounds the recursion (0 means 3),
    `max_fan_out` how many subtasks of one task run at once, `budget` the whole tree.
    """

    def __init__(
        self,
        model: Model | str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        system_prompt: str = "",
        *,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_iterations: int = 10,
        max_fan_out: int = 4,
        budget: Budget | dict[str, Any] | None = None,
        max_output_tokens: int | None = None,
        name: str = "deep",
    ):
        if max_fan_out < 1:
            raise ValueError(f"max_fan_out must be at least 1, not {max_fan_out}")
        self.model = resolve(model)
        self.tools = [as_tool(t) for t in tools]
        self.system_prompt = system_prompt
        self.max_depth = effective_max_depth(max_depth)
        self.max_iterations = max_iterations
        self.max_fan_out = max_fan_out
        self.budget = Budget.model_validate(budget) if isinstance(budget, dict) else budget
        self.max_output_tokens = max_output_tokens
        self.name = name

    # -- node functions (shared with the durable runner) -----------------------------------------

    def _fits(self, allowance: Budget, prompt: str) -> bool:
        """Whether a call with this prompt stays within the input-token allowance (estimated at
        four characters a token, system prompt included), so a large prompt is not started only
        to cross the line."""
        if allowance.max_input_tokens is None:
            return True
        estimate = (len(self.system_prompt) + len(prompt)) // 4
        return estimate <= allowance.max_input_tokens

    def _output_cap(self, allowance: Budget) -> int | None:
        caps = [c for c in (self.max_output_tokens, allowance.max_output_tokens) if c is not None]
        return min(caps) if caps else None

    async def decide(self, task: str, allowance: Budget | None = None) -> Decision:
        """One model call: solve `task` directly, or split it into subtasks?"""
        allowance = allowance or Budget()
        prompt = decision_prompt(task)
        if allowance.is_spent or not self._fits(allowance, prompt):
            return Decision(direct=True, reason="budget spent", budget_exhausted=True)
        messages = []
        if self.system_prompt.strip():
            messages.append(Message(role="system", content=self.system_prompt.strip()))
        messages.append(Message(role="user", content=prompt))
        response = await self.model.request(messages, max_output_tokens=self._output_cap(allowance))
        direct, subtasks, reason = parse_decision(response.text)
        spent = Spend.of(response.usage)
        return Decision(
            direct=direct,
            subtasks=subtasks,
            reason=reason,
            spent=spent,
            budget_exhausted=allowance.minus(spent).is_spent,
        )

    async def solve(
        self,
        task: str,
        allowance: Budget | None = None,
        *,
        checkpoint: LoopState | None = None,
        on_checkpoint: CheckpointHook | None = None,
    ) -> NodeOutcome:
        """Solve `task` with a ReAct loop (the agent's tools), within `allowance`."""
        return await self._react(task, allowance, checkpoint, on_checkpoint)

    async def synthesize(
        self,
        task: str,
        results: Sequence[tuple[str, str]],
        allowance: Budget | None = None,
        *,
        checkpoint: LoopState | None = None,
        on_checkpoint: CheckpointHook | None = None,
    ) -> NodeOutcome:
        """Synthesise the subtask results into an answer with a ReAct loop (tools allowed).

        With no budget left, the digest itself is the answer: that is what is known.
        """
        digest = build_digest(results)
        prompt = synthesis_prompt(task, digest)
        spent = allowance is not None and (allowance.is_spent or not self._fits(allowance, prompt))
        if spent and checkpoint is None:
            return NodeOutcome(
                text="The budget ran out before the results could be synthesised. "
                f"What the subtasks found:\n\n{digest}",
                budget_exhausted=True,
            )
        return await self._react(prompt, allowance, checkpoint, on_checkpoint)

    async def _react(
        self,
        prompt: str,
        allowance: Budget | None,
        checkpoint: LoopState | None,
        on_checkpoint: CheckpointHook | None,
    ) -> NodeOutcome:
        allowance = allowance or Budget()
        if checkpoint is None and (allowance.is_spent or not self._fits(allowance, prompt)):
            return NodeOutcome(text=NOT_RUN_TEXT, budget_exhausted=True, skipped=True)
        agent, guard = budgeted_loop(
            self.model,
            self.tools,
            self.system_prompt,
            allowance,
            max_iterations=self.max_iterations,
            max_output_tokens=self.max_output_tokens,
            name=self.name,
            checkpoint=checkpoint,
        )
        try:
            result = await agent.arun(prompt, checkpoint=checkpoint, on_checkpoint=on_checkpoint)
        except OutOfTokens:
            if guard.state is None:
                return NodeOutcome(text=NOT_RUN_TEXT, budget_exhausted=True, skipped=True)
            spent = Spend.of(guard.state.usage, guard.tool_calls)
            return NodeOutcome(text=what_is_known(guard.state), spent=spent, budget_exhausted=True)
        spent = Spend.of(result.usage, guard.tool_calls)
        exhausted = result.stop_reason == BUDGET_REFUSED or guard.refused > 0
        text = what_is_known(result.state) if exhausted else result.message
        return NodeOutcome(text=text, spent=spent, budget_exhausted=exhausted)

    # -- the in-process runner ---------------------------------------------------------------------

    def run_sync(self, task: str, **kwargs: Any) -> DecomposeResult:
        """Run `arun` from synchronous code."""
        return asyncio.run(self.arun(task, **kwargs))

    async def arun(self, task: str, *, max_depth: int | None = None) -> DecomposeResult:
        """Decompose and solve `task` in this process; `max_depth` overrides the agent's (0 = 3)."""
        depth_limit = effective_max_depth(max_depth, self.max_depth)
        root = TaskNode(task=task, depth=0)
        outcome = await self._node(root, depth_limit, self.budget or Budget())
        return DecomposeResult(
            answer=outcome.text,
            outcome="budget_exhausted" if outcome.budget_exhausted else "completed",
            spent=outcome.spent,
            tree=root,
        )

    async def _node(self, node: TaskNode, max_depth: int, allowance: Budget) -> NodeOutcome:
        emit(
            "decompose",
            agent=self.name,
            depth=node.depth,
            max_depth=max_depth,
            task_preview=preview(node.task),
        )
        spent = Spend()
        exhausted = False
        if node.depth < max_depth:
            node.status = "deciding"
            decision = await self.decide(node.task, allowance)
            spent, exhausted = decision.spent, decision.budget_exhausted
            if not decision.direct:
                return await self._split(node, decision, max_depth, allowance)
        node.status, node.mode = "solving", "direct"
        solved = await self.solve(node.task, allowance.minus(spent))
        return _finish(node, solved, spent + solved.spent, exhausted or solved.budget_exhausted)

    async def _split(
        self, node: TaskNode, decision: Decision, max_depth: int, allowance: Budget
    ) -> NodeOutcome:
        node.status, node.mode = "running", "decomposed"
        node.children = [TaskNode(task=s, depth=node.depth + 1) for s in decision.subtasks]
        pool = BudgetPool(
            allowance.minus(decision.spent),
            consumers=len(node.children) + 1,
            at_once=self.max_fan_out,
        )
        gate = asyncio.Semaphore(self.max_fan_out)
        settled = asyncio.Condition()

        async def run_child(child: TaskNode) -> NodeOutcome:
            async with gate:
                async with settled:
                    await settled.wait_for(lambda: not pool.must_wait())
                grant = pool.grant()
                if grant is None:
                    return _skip(child)
                spent = Spend()
                try:
                    outcome = await self._node(child, max_depth, grant)
                    spent = outcome.spent
                finally:  # a failed subtask must not leave its siblings waiting
                    pool.settle(grant, spent)
                    async with settled:
                        settled.notify_all()
                return outcome

        outcomes = await asyncio.gather(*(run_child(c) for c in node.children))
        node.status = "synthesizing"
        grant = pool.grant()
        synthesis = await self.synthesize(
            node.task,
            [(c.task, o.text) for c, o in zip(node.children, outcomes, strict=True)],
            grant or Budget(max_tool_calls=0),
        )
        pool.settle(grant, synthesis.spent)
        exhausted = (
            decision.budget_exhausted
            or synthesis.budget_exhausted
            or any(o.budget_exhausted for o in outcomes)
        )
        return _finish(node, synthesis, decision.spent + pool.spent, exhausted)


def _skip(node: TaskNode) -> NodeOutcome:
    node.status, node.budget_exhausted, node.result_preview = "skipped", True, NOT_RUN_TEXT
    emit("decompose.skipped", depth=node.depth, task_preview=preview(node.task))
    return NodeOutcome(text=NOT_RUN_TEXT, budget_exhausted=True, skipped=True)


def _finish(node: TaskNode, outcome: NodeOutcome, spent: Spend, exhausted: bool) -> NodeOutcome:
    node.status = "skipped" if outcome.skipped else "done"
    node.spent, node.budget_exhausted = spent, exhausted
    node.result_preview = preview(outcome.text, 200)
    return NodeOutcome(
        text=outcome.text, spent=spent, budget_exhausted=exhausted, skipped=outcome.skipped
    )
