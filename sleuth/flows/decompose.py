"""Hierarchical task decomposition (`type: deep`): decide, recurse, synthesise, within one budget.

A `DeepDecomposer` asks its model once whether a task can be solved directly. If not, the model
lists subtasks; each is decomposed the same way (in parallel, at most `max_fan_out` at once), down
to `max_depth`, where tasks are always solved directly with a ReAct loop. The subtask results are
gathered into a digest (`## Subtask 1: <text>` …) and a final ReAct loop, with tools, synthesises
the answer.

The `Budget` (`sleuth.usage.budget`) covers the whole tree, not each node. Each node has an *allowance*: a
parent shares its own allowance among its subtasks and then its synthesis with a `BudgetPool`,
which only hands out what nobody else holds, and takes back what a finished subtask did not use. So
parallel subtasks cannot together spend more than the tree has. Tool calls are counted exactly (a
call past the allowance is refused, not run); a model call starts only while tokens (and, with
`max_cost_usd`, dollars at the model's price) are left and its prompt fits (estimated at four
characters a token), so the tree can pass its budget only by what that estimate misses. When the budget is spent the remaining work ends with what is
known, and the result says `outcome="budget_exhausted"`.

The same node functions (`decide`, `solve`, `synthesize`) and the same control flow
(`sleuth.flows.decompose_flow.next_decompose_step`, which also hands out the `BudgetPool` shares) serve
both runners: `DeepDecomposer.arun` in-process and `workflows.DecomposeWorkflow` durably.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from sleuth._util.jsontext import json_from_text
from sleuth._util.text import preview
from sleuth.agent import Agent, CheckpointHook
from sleuth.agent.state import LoopState
from sleuth.flows.decompose_flow import (
    NOT_RUN_TEXT,
    Decide,
    Decision,
    DecomposeStep,
    FinishedSubtask,
    NodeOutcome,
    NodeRun,
    SkipSubtask,
    Solve,
    StartSubtask,
    Synthesize,
    TaskNode,
    drive_node,
)
from sleuth.models import resolve
from sleuth.models.base import Message, Model, Usage
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.events import emit
from sleuth.runtime.telemetry import model_request
from sleuth.tools import Tool, as_tool
from sleuth.usage.budget import Budget, BudgetPool, Spend
from sleuth.usage.limits import BUDGET_EXHAUSTED, UsageLimitExceeded, tool_calls_made, what_is_known
from sleuth.usage.pricing import require_price

__all__ = [
    "NOT_RUN_TEXT",
    "Budget",
    "BudgetPool",
    "DecomposeResult",
    "Decision",
    "DeepDecomposer",
    "NodeOutcome",
    "Spend",
    "TaskNode",
    "build_digest",
    "DECISION_PROMPT",
    "decision_prompt",
    "effective_max_depth",
    "parse_decision",
    "synthesis_prompt",
]

DEFAULT_MAX_DEPTH = 3

DECISION_PROMPT = """Decide how to handle the task you are given.
If you can solve it directly, answer with exactly: {"direct": true}
If it should be split into smaller subtasks, answer with exactly:
  {"direct": false, "subtasks": ["first subtask", "second subtask", ...]}
Answer with the JSON object only."""
"""The decision call's instructions, prepended verbatim to the agent's system prompt (so a system
prompt can say what a subtask means in its domain); the task itself is the user message."""


def decision_prompt(task: str) -> str:
    """The user message of the decision call for `task`."""
    return f"Task: {task}"


def synthesis_prompt(task: str, digest: str) -> str:
    """The prompt of the synthesis ReAct loop: the original task and the subtask digest."""
    return (
        f"Original task: {task}\nSubtask results:\n{digest}\n"
        "Synthesize a final comprehensive answer."
    )


def build_digest(results: Sequence[tuple[str, str]]) -> str:
    r"""The markdown digest of (subtask, result) pairs: `## Subtask 1: <text>\n<result>`, …."""
    return "\n\n".join(
        f"## Subtask {number}: {subtask}\n{result}"
        for number, (subtask, result) in enumerate(results, start=1)
    )


def effective_max_depth(value: int | None, default: int = DEFAULT_MAX_DEPTH) -> int:
    """`None` means `default`; 0 means 3 (as a YAML `deep_max_depth: 0` does)."""
    if value is None:
        value = default
    if value < 0:
        raise InvalidSettingError(f"max_depth must be 0 or more, not {value}")
    return value or DEFAULT_MAX_DEPTH


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
    data = json_from_text(text)
    if data is None:
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
        agent_options: Mapping[str, Any] | None = None,
        name: str = "deep",
    ):
        if max_fan_out < 1:
            raise InvalidSettingError(f"max_fan_out must be at least 1, not {max_fan_out}")
        self.model = resolve(model)
        self.tools = [as_tool(t) for t in tools]
        self.system_prompt = system_prompt
        self.max_depth = effective_max_depth(max_depth)
        self.max_iterations = max_iterations
        self.max_fan_out = max_fan_out
        self.budget = Budget.model_validate(budget) if isinstance(budget, dict) else budget
        self.max_output_tokens = max_output_tokens
        self.agent_options = dict(agent_options or {})
        """Further `Agent` keywords for every leaf and synthesis loop (`tool_retry`,
        `guardrails`, `governance`, `memory`, ...)."""
        self.name = name

    # -- node functions (shared with the durable runner) -----------------------------------------

    def _messages(self, prompt: str, *, deciding: bool = False) -> list[Message]:
        """The first request of a call on `prompt`: the system prompt (if any) and the prompt.
        The decision call's system prompt starts with `DECISION_PROMPT`."""
        system = self.system_prompt.strip()
        if deciding:
            system = f"{DECISION_PROMPT}\n\n{system}" if system else DECISION_PROMPT
        messages = [Message(role="system", content=system)] if system else []
        messages.append(Message(role="user", content=prompt))
        return messages

    def _output_cap(self, allowance: Budget, messages: list[Message]) -> int | None:
        """The output tokens a first request of `messages` may use within `allowance` (None: no
        limit); raises `UsageLimitExceeded` when the request does not fit."""
        price = require_price(self.model) if allowance.max_cost_usd is not None else None
        cap = allowance.check_before_request(Usage(), messages, price)
        if allowance.is_spent:
            raise UsageLimitExceeded("the allowance is spent")
        caps = [c for c in (self.max_output_tokens, cap) if c is not None]
        return min(caps, default=None)

    def _fits(self, allowance: Budget, prompt: str) -> bool:
        """Whether a first request on `prompt` is allowed: the budget is not spent and its
        estimated input tokens (and their cost) fit, so a large prompt is not started only to
        cross the line."""
        try:
            self._output_cap(allowance, self._messages(prompt))
        except UsageLimitExceeded:
            return False
        return True

    async def decide(self, task: str, allowance: Budget | None = None) -> Decision:
        """One model call: solve `task` directly, or split it into subtasks?"""
        allowance = allowance or Budget()
        messages = self._messages(decision_prompt(task), deciding=True)
        try:
            cap = self._output_cap(allowance, messages)
        except UsageLimitExceeded:
            return Decision(direct=True, reason="budget spent", budget_exhausted=True)
        response = await model_request(self.model, messages, max_output_tokens=cap)
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
        return await self._react(task, allowance or Budget(), checkpoint, on_checkpoint)

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
        allowance = allowance or Budget()
        if checkpoint is None and not self._fits(allowance, prompt):
            return NodeOutcome(
                text="The budget ran out before the results could be synthesised. "
                f"What the subtasks found:\n\n{digest}",
                budget_exhausted=True,
            )
        return await self._react(prompt, allowance, checkpoint, on_checkpoint)

    async def _react(
        self,
        prompt: str,
        allowance: Budget,
        checkpoint: LoopState | None,
        on_checkpoint: CheckpointHook | None,
    ) -> NodeOutcome:
        if checkpoint is None and not self._fits(allowance, prompt):
            return NodeOutcome(text=NOT_RUN_TEXT, budget_exhausted=True, skipped=True)
        agent = Agent(
            self.model,
            self.tools,
            self.system_prompt,
            limits=allowance,
            max_iterations=self.max_iterations,
            max_output_tokens=self.max_output_tokens,
            name=self.name,
            **self.agent_options,
        )
        result = await agent.arun(prompt, checkpoint=checkpoint, on_checkpoint=on_checkpoint)
        spent = Spend.of(result.usage, tool_calls_made(result.state))
        exhausted = result.stop_reason == BUDGET_EXHAUSTED or any(
            e.error == BUDGET_EXHAUSTED for e in result.evidence
        )
        text = what_is_known(result.state) if exhausted else result.message
        return NodeOutcome(text=text, spent=spent, budget_exhausted=exhausted)

    # -- the in-process runner ---------------------------------------------------------------------

    def run_sync(self, task: str, **kwargs: Any) -> DecomposeResult:
        """Run `arun` from synchronous code."""
        return asyncio.run(self.arun(task, **kwargs))

    async def arun(self, task: str, *, max_depth: int | None = None) -> DecomposeResult:
        """Decompose and solve `task` in this process; `max_depth` overrides the agent's (0 = 3)."""
        run = NodeRun(
            node=TaskNode(task=task, depth=0),
            max_depth=effective_max_depth(max_depth, self.max_depth),
            max_fan_out=self.max_fan_out,
            allowance=self.budget or Budget(),
        )
        outcome = await self._drive(run)
        return DecomposeResult(
            answer=outcome.text,
            outcome="budget_exhausted" if outcome.budget_exhausted else "completed",
            spent=outcome.spent,
            tree=run.node,
        )

    async def _drive(self, run: NodeRun) -> NodeOutcome:
        """Run one node to its end in this process; a subtask is a nested drive."""
        node = run.node
        emit(
            "decompose",
            agent=self.name,
            depth=node.depth,
            max_depth=run.max_depth,
            task_preview=preview(node.task),
        )
        return await drive_node(run, _InProcess(self))


@dataclass
class _InProcess:
    """Carries out `drive_node`'s steps in this process (`NodeSteps`)."""

    decomposer: DeepDecomposer

    async def decide(self, step: Decide) -> Decision:
        return await self.decomposer.decide(step.task, step.allowance)

    async def solve(self, step: Solve) -> NodeOutcome:
        return await self.decomposer.solve(step.task, step.allowance)

    async def synthesize(self, step: Synthesize) -> NodeOutcome:
        return await self.decomposer.synthesize(step.task, step.results, step.allowance)

    def start_subtask(self, run: NodeRun, step: StartSubtask) -> asyncio.Future[FinishedSubtask]:
        return asyncio.ensure_future(self._subtask(run.subtask(step)))

    async def _subtask(self, run: NodeRun) -> FinishedSubtask:
        return await self.decomposer._drive(run), run.node

    async def first_finished(
        self, running: Sequence[asyncio.Future[FinishedSubtask]]
    ) -> list[asyncio.Future[FinishedSubtask]]:
        done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        return [future for future in running if future in done]

    def observe(self, run: NodeRun, step: DecomposeStep, *, finished: bool) -> None:
        if isinstance(step, SkipSubtask) and not finished:
            skipped = run.node.children[step.index]
            emit("decompose.skipped", depth=skipped.depth, task_preview=preview(skipped.task))
