"""`UsageLimits`: what one agent run may spend, checked before each model request and tool call.

An `Agent(limits=UsageLimits(...))` asks its limits before every model request
(`check_before_request`: the request, estimated at four characters a token, must fit in the
input tokens left and, with `max_cost_usd`, its input must cost less than the dollars left at
the model's price; the answer is capped at the output tokens left and at the output tokens the
dollars left still buy) and before every tool call
(`check_before_tool_call`: a call past `max_tool_calls` is refused, not run, and the model is told
to answer with what it knows). A refused request ends the run with stop reason
`budget_exhausted` and what is known as its answer; so does a second refused tool call in a row,
or a token limit reached. Everything is counted from the run's `LoopState`, so a durable runner
that builds a fresh agent for every step is held to the same limits.

Tokens a tool spends on its own (a subagent, a summarising model call) reach the run through
one explicit channel: the tool declares a parameter of type `UsageAccount`, which the agent
fills in (it is not part of the tool's JSON schema), and calls `account.charge(usage)`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from sleuth._util.text import preview
from sleuth.agent.state import LoopState
from sleuth.agent.termination import Condition
from sleuth.flows.review import DENIED
from sleuth.models.base import Message, Usage
from sleuth.runtime.errors import InvalidSettingError, SleuthError
from sleuth.usage.pricing import ModelPrice

BUDGET_EXHAUSTED = "budget_exhausted"
"""The stop reason of a run held to its limits, and the error of a refused tool call."""


class UsageLimitExceeded(SleuthError):
    """The next model request or tool call would go past a limit of the run.

    The agent handles it (the run ends with what is known, or the model is told the tool did not
    run); it reaches a caller only from a direct `check_before_*` call.
    """


class UsageLimits(BaseModel):
    """Limits on what an agent run spends. `None` is unlimited."""

    model_config = ConfigDict(extra="forbid")

    max_tool_calls: int | None = None
    """Tool calls that run (a refused call or an unknown tool name does not count)."""
    max_input_tokens: int | None = None
    """Model input tokens over every request, including tokens charged by tools."""
    max_output_tokens: int | None = None
    """Model output tokens over every request, including tokens charged by tools."""
    max_cost_usd: float | None = None
    """USD over every request at each model's price (`sleuth.usage.pricing`), including what tools
    charge. A model with no known price cannot run under this limit."""

    def check_before_request(
        self, usage: Usage, messages: Sequence[Message], price: ModelPrice | None = None
    ) -> int | None:
        """Raise `UsageLimitExceeded` when a request of `messages`, after `usage` so far, would
        not fit; else return the output tokens its answer may use (None: no limit). `price` is
        the model's price, needed when `max_cost_usd` is set."""
        estimate = estimate_tokens(messages)
        if self.max_input_tokens is not None:
            left = self.max_input_tokens - usage.input_tokens
            if left <= 0 or estimate > left:
                raise UsageLimitExceeded(
                    f"the next model request (about {estimate} input tokens) does not fit in the "
                    f"{max(left, 0)} input tokens left of max_input_tokens={self.max_input_tokens}; "
                    "raise the limit or give the run less to read"
                )
        caps = [
            self._output_tokens_left(usage),
            self._output_tokens_affordable(usage, estimate, price),
        ]
        known = [cap for cap in caps if cap is not None]
        return min(known) if known else None

    def _output_tokens_left(self, usage: Usage) -> int | None:
        if self.max_output_tokens is None:
            return None
        left = self.max_output_tokens - usage.output_tokens
        if left <= 0:
            raise UsageLimitExceeded(
                f"no output tokens are left of max_output_tokens={self.max_output_tokens}; "
                "raise the limit to let the run go on"
            )
        return left

    def _output_tokens_affordable(
        self, usage: Usage, estimate: int, price: ModelPrice | None
    ) -> int | None:
        """The output tokens the dollars left buy after the request's input (None: no limit)."""
        if self.max_cost_usd is None:
            return None
        if price is None:
            raise InvalidSettingError(
                "max_cost_usd is set but the model's price is unknown; give the model a price "
                "(sleuth.usage.pricing) to run it under a cost limit"
            )
        left = self.max_cost_usd - usage.cost_usd
        input_cost = price.input_cost(estimate)
        if left <= 0 or input_cost >= left:
            raise UsageLimitExceeded(
                f"the next model request (about ${input_cost:.4f} of input) does not fit in the "
                f"${max(left, 0):.4f} left of max_cost_usd={self.max_cost_usd}; raise the limit "
                "to let the run go on"
            )
        affordable = price.output_tokens_for(left - input_cost)
        if affordable is not None and affordable < 1:
            raise UsageLimitExceeded(
                f"the ${left - input_cost:.6f} left of max_cost_usd={self.max_cost_usd} buys no "
                "output token; raise the limit to let the run go on"
            )
        return affordable

    def check_before_tool_call(self, tool_calls_made: int) -> None:
        """Raise `UsageLimitExceeded` when one more tool call would pass `max_tool_calls`."""
        if self.max_tool_calls is not None and tool_calls_made >= self.max_tool_calls:
            raise UsageLimitExceeded(
                f"the tool-call budget is spent (max_tool_calls={self.max_tool_calls})"
            )


class LimitsReached(Condition):
    """Stops a run once a token or cost limit is used up, or when the model insists on refused
    tools.

    One refused tool call tells the model to answer; a refused call in the latest turn after an
    earlier one means it will not, so the run stops there.
    """

    def __init__(self, limits: UsageLimits):
        self.limits = limits

    def check(self, state: LoopState) -> tuple[bool, str]:
        usage, limits = state.usage, self.limits
        if limits.max_input_tokens is not None and usage.input_tokens >= limits.max_input_tokens:
            return True, BUDGET_EXHAUSTED
        if limits.max_output_tokens is not None and usage.output_tokens >= limits.max_output_tokens:
            return True, BUDGET_EXHAUSTED
        if limits.max_cost_usd is not None and usage.cost_usd >= limits.max_cost_usd:
            return True, BUDGET_EXHAUSTED
        refused = [e for e in state.evidence if e.error == BUDGET_EXHAUSTED]
        refused_last_turn = any(e.iteration == state.iterations for e in refused)
        return refused_last_turn and len(refused) > 1, BUDGET_EXHAUSTED

    def __repr__(self) -> str:
        return f"LimitsReached({self.limits!r})"


class UsageAccount:
    """The usage of the agent run a tool works for; `charge(usage)` adds to it.

    Declare a parameter of this type on a tool that spends model tokens of its own; the agent
    passes the account of the run calling the tool, so those tokens count against the run's
    limits and show in its usage. Outside a run, a tool gets an account of its own.
    """

    def __init__(self, state: LoopState | None = None):
        self._state = state if state is not None else LoopState()

    @property
    def usage(self) -> Usage:
        """What the run has used so far."""
        return self._state.usage

    def charge(self, usage: Usage) -> None:
        """Add `usage` to the run."""
        self._state.usage = self._state.usage + usage


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A provider-neutral estimate of a request's input tokens: four characters a token."""
    characters = sum(
        len(m.content) + sum(len(json.dumps(c.arguments)) + len(c.name) for c in m.tool_calls)
        for m in messages
    )
    return characters // 4


def tool_calls_made(state: LoopState) -> int:
    """The tool calls of a run that count against `max_tool_calls`: those that ran (not those
    refused by the limits, unknown, or denied by a reviewer)."""
    return sum(
        1 for e in state.evidence if e.error not in (BUDGET_EXHAUSTED, "unknown_tool", DENIED)
    )


def what_is_known(state: LoopState) -> str:
    """A limit-stopped run's answer: its last text, else the tool results it gathered."""
    if state.final_message.strip():
        return state.final_message
    if state.last_text.strip():
        return state.last_text
    found = [e for e in state.evidence if e.success]
    if not found:
        return "(no answer: the budget ran out before any result)"
    lines = "\n".join(f"- {e.tool}: {preview(e.output, 300)}" for e in found)
    return f"(the budget ran out before an answer; tool results so far:)\n{lines}"
