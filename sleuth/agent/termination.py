"""Composable exit conditions for the tool loop.

Each condition has `check(state) -> (stop, reason)` and combines with `&` (all must hold) and `|`
(any may hold). They read a `LoopState` only, so they are unit-testable without a model.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sleuth.agent.state import LoopState
from sleuth.runtime.errors import InvalidSettingError


class Condition:
    """Base class: subclasses implement `check`."""

    def check(self, state: LoopState) -> tuple[bool, str]:
        raise NotImplementedError

    def __and__(self, other: Condition) -> Condition:
        return AllOf([self, other])

    def __or__(self, other: Condition) -> Condition:
        return AnyOf([self, other])


class AllOf(Condition):
    """Met when every one of `conditions` is met (`a & b`); nested `AllOf`s are flattened."""

    conditions: list[Condition]

    def __init__(self, conditions: list[Condition]):
        self.conditions = [
            c
            for cond in conditions
            for c in (cond.conditions if isinstance(cond, AllOf) else [cond])
        ]

    def check(self, state: LoopState) -> tuple[bool, str]:
        reasons = []
        for condition in self.conditions:
            stop, reason = condition.check(state)
            if not stop:
                return False, ""
            reasons.append(reason)
        return True, " & ".join(reasons)

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.conditions)) + ")"


class AnyOf(Condition):
    """Met when any one of `conditions` is met (`a | b`); nested `AnyOf`s are flattened."""

    conditions: list[Condition]

    def __init__(self, conditions: list[Condition]):
        self.conditions = [
            c
            for cond in conditions
            for c in (cond.conditions if isinstance(cond, AnyOf) else [cond])
        ]

    def check(self, state: LoopState) -> tuple[bool, str]:
        for condition in self.conditions:
            stop, reason = condition.check(state)
            if stop:
                return True, reason
        return False, ""

    def __repr__(self) -> str:
        return "(" + " | ".join(map(repr, self.conditions)) + ")"


class MaxIterations(Condition):
    """Met after `limit` model turns (`max_iterations`)."""

    def __init__(self, limit: int):
        if limit < 1:
            raise InvalidSettingError(f"MaxIterations needs a limit of at least 1, got {limit}")
        self.limit = limit

    def check(self, state: LoopState) -> tuple[bool, str]:
        return state.iterations >= self.limit, "max_iterations"

    def __repr__(self) -> str:
        return f"MaxIterations({self.limit})"


class TokenLimit(Condition):
    """Stop once the run's total tokens (input + output) reach `limit`."""

    def __init__(self, limit: int):
        self.limit = limit

    def check(self, state: LoopState) -> tuple[bool, str]:
        return state.usage.total_tokens >= self.limit, "token_limit"

    def __repr__(self) -> str:
        return f"TokenLimit({self.limit})"


class TimeLimit(Condition):
    """Stop once `seconds` of wall time have passed since the run started."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.time):
        self.seconds = seconds
        self.clock = clock

    def check(self, state: LoopState) -> tuple[bool, str]:
        return self.clock() - state.started_at >= self.seconds, "time_limit"

    def __repr__(self) -> str:
        return f"TimeLimit({self.seconds})"


class ToolCalled(Condition):
    """Holds once `name` was called (successfully, with `require_success=True`)."""

    def __init__(self, name: str, *, require_success: bool = False):
        self.name = name
        self.require_success = require_success

    def check(self, state: LoopState) -> tuple[bool, str]:
        hit = any(
            e.tool == self.name and (e.success or not self.require_success) for e in state.evidence
        )
        return hit, f"tool_called:{self.name}"

    def __repr__(self) -> str:
        return f"ToolCalled({self.name!r}, require_success={self.require_success})"


class ConfidenceMet(Condition):
    """Holds once the reported confidence (submit tool argument or structured output) is ≥ `minimum`."""

    def __init__(self, minimum: float):
        self.minimum = minimum

    def check(self, state: LoopState) -> tuple[bool, str]:
        confidence = state.confidence
        if confidence is None and state.structured_output is not None:
            value = state.structured_output.get("confidence")
            confidence = (
                float(value) if isinstance(value, int | float | str) and _is_number(value) else None
            )
        return confidence is not None and confidence >= self.minimum, "confidence_met"

    def __repr__(self) -> str:
        return f"ConfidenceMet({self.minimum})"


class NoToolCalls(Condition):
    """Holds when the latest turn called no tools (the model answered)."""

    def check(self, state: LoopState) -> tuple[bool, str]:
        return state.iterations > 0 and not state.last_tool_names, "no_tool_calls"

    def __repr__(self) -> str:
        return "NoToolCalls()"


class TextMention(Condition):
    """Holds when the latest text contains `text` (case-insensitive by default)."""

    def __init__(self, text: str, *, case_sensitive: bool = False):
        self.text = text
        self.case_sensitive = case_sensitive

    def check(self, state: LoopState) -> tuple[bool, str]:
        haystack = state.last_text if self.case_sensitive else state.last_text.lower()
        needle = self.text if self.case_sensitive else self.text.lower()
        return needle in haystack, f"text_mention:{self.text}"

    def __repr__(self) -> str:
        return f"TextMention({self.text!r})"


class CustomCondition(Condition):
    """Wrap any `fn(state) -> bool` as a condition with its own stop reason."""

    def __init__(self, fn: Callable[[LoopState], bool], reason: str = "custom"):
        self.fn = fn
        self.reason = reason

    def check(self, state: LoopState) -> tuple[bool, str]:
        return bool(self.fn(state)), self.reason

    def __repr__(self) -> str:
        return f"CustomCondition({self.reason!r})"


def _is_number(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True
