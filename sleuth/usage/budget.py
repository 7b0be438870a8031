"""Budgets: limits on tool calls, tokens and cost, shared fairly by parallel work.

A `Budget` is `UsageLimits` (`sleuth.usage.limits`) that can be divided: `minus` says what is left after
a spend, and a `BudgetPool` shares one allowance among consumers that run in parallel so that
together they can never spend more than it holds. `budgeted_agent` is a ReAct `Agent` held to a
budget: its limits are checked before each model request and each tool call (a tool call past
the budget is refused, not run; a request that would not fit ends the run with what is known;
each answer is capped at the output tokens left).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from sleuth.agent import Agent
from sleuth.models import resolve
from sleuth.models.base import Model, Usage
from sleuth.tools import Tool
from sleuth.usage.limits import UsageLimits

_DIMENSIONS = ("tool_calls", "input_tokens", "output_tokens", "cost_usd")
_CONTINUOUS = frozenset({"cost_usd"})
"""Dimensions shared in fractions (dollars), not in whole units."""


class Budget(UsageLimits):
    """Limits on tool calls, tokens and USD (for a decomposition: the whole tree). `None` is
    unlimited."""

    def limit(self, dimension: str) -> float | None:
        return getattr(self, f"max_{dimension}")  # type: ignore[no-any-return]

    @property
    def is_spent(self) -> bool:
        """True when any limited dimension has nothing left."""
        limits = [self.limit(dimension) for dimension in _DIMENSIONS]
        return any(limit is not None and limit <= 0 for limit in limits)

    def minus(self, spent: Spend) -> Budget:
        """What is left of this allowance after `spent` (never below zero)."""
        values: dict[str, float | None] = {}
        for dimension in _DIMENSIONS:
            limit = self.limit(dimension)
            values[f"max_{dimension}"] = (
                None if limit is None else max(0, limit - getattr(spent, dimension))
            )
        return Budget.model_validate(values)


class Spend(BaseModel):
    """What a node (or a subtree) used."""

    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(**{d: getattr(self, d) + getattr(other, d) for d in _DIMENSIONS})

    def __sub__(self, other: Spend) -> Spend:
        return Spend(**{d: getattr(self, d) - getattr(other, d) for d in _DIMENSIONS})

    @classmethod
    def of(cls, usage: Usage, tool_calls: int = 0) -> Spend:
        return cls(
            tool_calls=tool_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usage.cost_usd,
        )


class BudgetPool(BaseModel):
    """Splits one allowance among consumers (the subtasks, then the synthesis). Plain data.

    `offer()` is the share the next consumer would get, or `None` when nothing is left; `take`
    books it (`grant()` does both). The share is what nobody holds yet, split evenly over the slots
    still open: `at_once` consumers run at the same time (the fan-out), so a share is
    `free / (at_once - holding)`, and never less than one unit of each counted dimension (dollars
    are split exactly). `settle(grant, spent)` ends the reservation and books what was really
    used, so unused budget flows to the consumers that start later. Reservations never exceed
    the allowance, which is why parallel consumers cannot overspend it together. The synthesis,
    granted last, gets everything that is left; if the subtasks used it all, the digest is the
    answer. Without `at_once` the split is over all waiting consumers.
    """

    allowance: Budget
    waiting: int
    """Consumers that have not been offered a share yet."""
    at_once: int | None = None
    holding: int = 0
    """Consumers holding a share now."""
    spent: Spend = Field(default_factory=Spend)
    reserved: Spend = Field(default_factory=Spend)

    @classmethod
    def open(cls, allowance: Budget, consumers: int, *, at_once: int | None = None) -> BudgetPool:
        """A pool sharing `allowance` among `consumers`, `at_once` of them running together."""
        return cls(allowance=allowance, waiting=consumers, at_once=at_once)

    def _free(self, dimension: str) -> float | None:
        limit = self.allowance.limit(dimension)
        if limit is None:
            return None
        taken: int = getattr(self.spent, dimension) + getattr(self.reserved, dimension)
        return max(0, limit - taken)

    def must_wait(self) -> bool:
        """Nothing is free, but a running consumer may still give some back: wait for it."""
        free = [self._free(d) for d in _DIMENSIONS]
        return self.holding > 0 and any(f is not None and f <= 0 for f in free)

    def offer(self) -> Budget | None:
        """The share the next consumer would get now, or None when a limited dimension is spent."""
        slots = max(1, self.waiting)
        if self.at_once is not None:
            slots = min(slots, max(1, self.at_once - self.holding))
        shares: dict[str, float | None] = {}
        for dimension in _DIMENSIONS:
            free = self._free(dimension)
            if free is None:
                shares[dimension] = None
                continue
            if free <= 0:
                return None
            shares[dimension] = (
                free / slots if dimension in _CONTINUOUS else max(1, int(free // slots))
            )
        return Budget.model_validate({f"max_{d}": shares[d] for d in _DIMENSIONS})

    def take(self, share: Budget | None) -> None:
        """Book `share` (what `offer()` returned) for the next consumer; None passes it over."""
        self.waiting = max(0, self.waiting - 1)
        if share is None:
            return
        self.reserved = self.reserved + _as_spend(share)
        self.holding += 1

    def grant(self) -> Budget | None:
        """Offer the next consumer its share and book it."""
        share = self.offer()
        self.take(share)
        return share

    def settle(self, grant: Budget | None, spent: Spend) -> None:
        if grant is not None:
            self.holding -= 1
            self.reserved = self.reserved - _as_spend(grant)
        self.spent = self.spent + spent

    def remaining(self) -> Budget:
        """The allowance minus what was spent and what is still reserved."""
        return Budget.model_validate({f"max_{d}": self._free(d) for d in _DIMENSIONS})


def _as_spend(share: Budget) -> Spend:
    """A share's limited dimensions as amounts (an unlimited one reserves nothing)."""
    return Spend.model_validate({d: share.limit(d) or 0 for d in _DIMENSIONS})


def budgeted_agent(
    model: Model | str | None,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    system_prompt: str = "",
    *,
    budget: Budget | None = None,
    max_iterations: int = 10,
    max_output_tokens: int | None = None,
    agent_options: Mapping[str, Any] | None = None,
    name: str = "agent",
) -> Agent:
    """A ReAct `Agent` held to `budget` (its `limits`): tool calls past it are refused, each
    model call's output is capped at the output tokens left, and the loop stops once its tokens
    are used or its next request would not fit. The counts live in the run's state, so one agent
    serves many runs and a durable runner may build it afresh for every step. `agent_options`
    are further `Agent` keywords (`tool_retry`, `guardrails`, `governance`, `memory`, ...)."""
    return Agent(
        resolve(model),
        tools,
        system_prompt,
        limits=budget or Budget(),
        max_iterations=max_iterations,
        max_output_tokens=max_output_tokens,
        name=name,
        **dict(agent_options or {}),
    )
