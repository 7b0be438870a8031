"""Budgets: limits on tool calls and tokens, shared fairly by parallel work, enforced in a loop.

A `Budget` caps tool calls, input tokens and output tokens. A `BudgetPool` shares one allowance
among consumers that run in parallel so that together they can never spend more than it holds.
`budgeted_agent` (and `budgeted_loop`, which `DeepDecomposer` uses for every leaf and synthesis)
holds a ReAct loop to an allowance: a tool call past it is refused, not run; before every model
call the request is estimated (four characters a token) and must fit in the input tokens left;
each call's output is capped at the output tokens left.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from sleuth.agent import Agent, CheckpointHook, _active_state
from sleuth.models import resolve
from sleuth.models.base import Message, Model, Usage
from sleuth.state import LoopState
from sleuth.termination import Condition
from sleuth.text import preview
from sleuth.tools import Tool, ToolResult, as_tool

BUDGET_REFUSED = "budget_exhausted"
"""The stop reason of a loop held to its budget, and the error of a refused tool call."""

_DIMENSIONS = ("tool_calls", "input_tokens", "output_tokens")


class Budget(BaseModel):
    """Limits on tool calls and tokens (for a decomposition: the whole tree). `None` is unlimited."""

    model_config = ConfigDict(extra="forbid")

    max_tool_calls: int | None = None
    """Tool calls across every ReAct loop of the tree."""
    max_input_tokens: int | None = None
    """Model input tokens across every call of the tree (decisions, leaves, syntheses)."""
    max_output_tokens: int | None = None
    """Model output tokens across every call of the tree."""

    def limit(self, dimension: str) -> int | None:
        return getattr(self, f"max_{dimension}")  # type: ignore[no-any-return]

    @property
    def is_spent(self) -> bool:
        """True when any limited dimension has nothing left."""
        limits = (self.max_tool_calls, self.max_input_tokens, self.max_output_tokens)
        return any(limit is not None and limit <= 0 for limit in limits)

    def minus(self, spent: Spend) -> Budget:
        """What is left of this allowance after `spent` (never below zero)."""
        values: dict[str, int | None] = {}
        for dimension in _DIMENSIONS:
            limit = self.limit(dimension)
            values[f"max_{dimension}"] = (
                None if limit is None else max(0, limit - getattr(spent, dimension))
            )
        return Budget(**values)


class Spend(BaseModel):
    """What a node (or a subtree) used."""

    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(**{d: getattr(self, d) + getattr(other, d) for d in _DIMENSIONS})

    @classmethod
    def of(cls, usage: Usage, tool_calls: int = 0) -> Spend:
        return cls(
            tool_calls=tool_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )


class BudgetPool:
    """Splits one allowance among `consumers` (the subtasks, then the synthesis).

    `grant()` reserves a share for the next consumer, or returns `None` when nothing is left.
    The share is what nobody holds yet, split evenly over the slots still open: `at_once`
    consumers run at the same time (the fan-out), so a share is `free / (at_once - holding)`,
    and never less than one unit of each limited dimension. `settle(grant, spent)` ends the
    reservation and books what was really used, so unused budget flows to the consumers that
    start later. Reservations never exceed the allowance, which is why parallel consumers cannot
    overspend it together. The synthesis, granted last, gets everything that is left; if the
    subtasks used it all, the digest is the answer. Without `at_once` the split is over all
    waiting consumers.
    """

    def __init__(self, allowance: Budget, consumers: int, *, at_once: int | None = None):
        self.allowance = allowance
        self.waiting = consumers
        self.at_once = at_once
        self.holding = 0
        self.spent = Spend()
        self._reserved = {d: 0 for d in _DIMENSIONS}

    def _free(self, dimension: str) -> int | None:
        limit = self.allowance.limit(dimension)
        if limit is None:
            return None
        return max(0, limit - getattr(self.spent, dimension) - self._reserved[dimension])

    def must_wait(self) -> bool:
        """Nothing is free, but a running consumer may still give some back: wait for it."""
        free = [self._free(d) for d in _DIMENSIONS]
        return self.holding > 0 and any(f is not None and f <= 0 for f in free)

    def grant(self) -> Budget | None:
        slots = max(1, self.waiting)
        if self.at_once is not None:
            slots = min(slots, max(1, self.at_once - self.holding))
        self.waiting = max(0, self.waiting - 1)
        shares: dict[str, int | None] = {}
        for dimension in _DIMENSIONS:
            free = self._free(dimension)
            if free is None:
                shares[dimension] = None
                continue
            if free <= 0:
                return None
            shares[dimension] = max(1, free // slots)
        for dimension, share in shares.items():
            if share is not None:
                self._reserved[dimension] += share
        self.holding += 1
        return Budget(**{f"max_{d}": shares[d] for d in _DIMENSIONS})

    def settle(self, grant: Budget | None, spent: Spend) -> None:
        if grant is not None:
            self.holding -= 1
            for dimension in _DIMENSIONS:
                share = grant.limit(dimension)
                if share is not None:
                    self._reserved[dimension] -= share
        self.spent = self.spent + spent

    def remaining(self) -> Budget:
        """The allowance minus what was spent and what is still reserved."""
        return Budget(**{f"max_{d}": self._free(d) for d in _DIMENSIONS})


class OutOfTokens(Exception):
    """The next model call of a ReAct loop would not fit in what is left of its allowance."""


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A provider-neutral estimate of a request's input tokens: four characters a token."""
    characters = sum(
        len(m.content) + sum(len(json.dumps(c.arguments)) + len(c.name) for c in m.tool_calls)
        for m in messages
    )
    return characters // 4


class LoopGuard:
    """Holds one ReAct loop to its allowance.

    A tool call past `max_tool_calls` is refused, not run. Before every model call the request
    is estimated and must fit in the input tokens left, and the output is capped at the output
    tokens left; `_AllowanceSpent` keeps `usage` and `state` current after every turn.
    """

    def __init__(
        self,
        allowance: Budget,
        agent_output_cap: int | None,
        tool_calls_used: int = 0,
        usage: Usage | None = None,
    ):
        self.allowance, self.agent_output_cap = allowance, agent_output_cap
        self.tool_calls, self.refused = tool_calls_used, 0
        self.usage = usage or Usage()
        self.state: LoopState | None = None
        self.agent: Agent | None = None

    def take_tool_call(self) -> bool:
        state = _active_state.get()
        if state is not None:
            # A durable runner builds a fresh agent (and guard) for every step: the run's own
            # state, not this guard's counter, says how many calls were made.
            self.tool_calls = max(self.tool_calls, _tool_calls_in(state))
        if (
            self.allowance.max_tool_calls is not None
            and self.tool_calls >= self.allowance.max_tool_calls
        ):
            self.refused += 1
            return False
        self.tool_calls += 1
        return True

    async def before_request(self, messages: list[Message]) -> list[Message]:
        state = _active_state.get()
        usage = state.usage if state is not None else self.usage
        left = self.allowance.minus(Spend.of(usage))
        if left.max_input_tokens is not None and estimate_tokens(messages) > left.max_input_tokens:
            raise OutOfTokens
        caps = [c for c in (self.agent_output_cap, left.max_output_tokens) if c is not None]
        if self.agent is not None:
            self.agent.max_output_tokens = min(caps) if caps else None
        return messages


class _MeteredTool(Tool):
    """A tool that asks the loop's guard before running."""

    def __init__(self, inner: Tool, guard: LoopGuard):
        self.__dict__.update(inner.__dict__)
        self._inner, self._guard = inner, guard

    async def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        if not self._guard.take_tool_call():
            return ToolResult(
                ok=False,
                content="Not run: the tool-call budget is spent. Answer now with what you know.",
                error=BUDGET_REFUSED,
            )
        return await self._inner.invoke(arguments)


class _AllowanceSpent(Condition):
    """Stops a ReAct loop when its token allowance is used, or it insists on refused tools."""

    def __init__(self, guard: LoopGuard):
        self.guard = guard

    def check(self, state: LoopState) -> tuple[bool, str]:
        self.guard.usage, self.guard.state = state.usage, state
        left = self.guard.allowance.minus(Spend.of(state.usage))
        if left.max_input_tokens == 0 or left.max_output_tokens == 0:
            return True, BUDGET_REFUSED
        refused_last_turn = any(
            e.error == BUDGET_REFUSED for e in state.evidence if e.iteration == state.iterations
        )
        refused = sum(1 for e in state.evidence if e.error == BUDGET_REFUSED)
        self.guard.refused = max(self.guard.refused, refused)
        # One refusal tells the model to answer; a second means it will not, so stop here.
        if refused_last_turn and self.guard.refused > 1:
            return True, BUDGET_REFUSED
        return False, ""


class _BudgetedAgent(Agent):
    """An agent whose loop ends with `budget_exhausted` (and what is known) when its next
    request would not fit, instead of raising `OutOfTokens` out of `arun` or a durable step."""

    async def step(self, state: LoopState, on_checkpoint: CheckpointHook | None = None) -> None:
        try:
            await super().step(state, on_checkpoint)
        except OutOfTokens:
            state.finished, state.stop_reason = True, BUDGET_REFUSED
            state.final_message = what_is_known(state)
            await self._save(state, on_checkpoint)


def _tool_calls_in(state: LoopState) -> int:
    return sum(1 for e in state.evidence if e.error not in (BUDGET_REFUSED, "unknown_tool"))


def what_is_known(state: LoopState) -> str:
    """A budget-stopped loop's answer: its last text, else the tool results it gathered."""
    if state.final_message.strip():
        return state.final_message
    if state.last_text.strip():
        return state.last_text
    found = [e for e in state.evidence if e.success]
    if not found:
        return "(no answer: the budget ran out before any result)"
    lines = "\n".join(f"- {e.tool}: {preview(e.output, 300)}" for e in found)
    return f"(the budget ran out before an answer; tool results so far:)\n{lines}"


def budgeted_loop(
    model: Model,
    tools: Sequence[Tool],
    system_prompt: str,
    budget: Budget,
    *,
    max_iterations: int,
    max_output_tokens: int | None,
    name: str,
    checkpoint: LoopState | None = None,
    end_when_out_of_tokens: bool = False,
) -> tuple[Agent, LoopGuard]:
    """A ReAct loop held to `budget`. A request that would not fit raises `OutOfTokens` out of
    the loop, unless `end_when_out_of_tokens`: then the loop ends with `budget_exhausted`."""
    guard = LoopGuard(
        budget,
        max_output_tokens,
        _tool_calls_in(checkpoint) if checkpoint else 0,
        checkpoint.usage if checkpoint else None,
    )
    agent_class = _BudgetedAgent if end_when_out_of_tokens else Agent
    agent = agent_class(
        model,
        [_MeteredTool(t, guard) for t in tools],
        system_prompt,
        termination=_AllowanceSpent(guard),
        max_iterations=max_iterations,
        max_output_tokens=max_output_tokens,
        context_manager=guard.before_request,
        name=name,
    )
    guard.agent = agent
    return agent, guard


def budgeted_agent(
    model: Model | str | None,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    system_prompt: str = "",
    *,
    budget: Budget | None = None,
    max_iterations: int = 10,
    max_output_tokens: int | None = None,
    name: str = "agent",
) -> Agent:
    """A ReAct `Agent` held to `budget`: tool calls past it are refused, each model call's output
    is capped at the output tokens left, and the loop stops once its tokens are used or its next
    request would not fit. Make a fresh agent per run: the counts live in the agent."""
    agent, _ = budgeted_loop(
        resolve(model),
        [as_tool(t) for t in tools],
        system_prompt,
        budget or Budget(),
        max_iterations=max_iterations,
        max_output_tokens=max_output_tokens,
        name=name,
        end_when_out_of_tokens=True,
    )
    return agent
