"""The ReAct policies an `Agent` can carry besides its limits: tool retries, guardrails and
governance (seed 003's `tool_retry`, `guardrails` and `governance` fields).

Each is a small model with its bounds; YAML agents fill them in from the fields of the same name.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import re2
from pydantic import Field, field_validator

from sleuth._util.strict import StrictInput
from sleuth.runtime.errors import SleuthError
from sleuth.usage.limits import UsageLimits

MAX_TOOL_ATTEMPTS = 10
"""Most attempts `tool_retry` allows for one tool call."""
MAX_BACKOFF_SECONDS = 300.0
"""Longest wait between two attempts of a tool call."""
MAX_COST_USD_PER_RUN = 100_000.0
"""Largest `governance.max_cost_usd_per_run`."""


class ToolRetry(StrictInput):
    """Retry a tool call that failed (the tool raised) before the model sees the failure.

    Calls with invalid arguments are not retried: the same arguments would fail the same way.
    Every retry publishes an `agent.tool.retry` event.
    """

    max_attempts: int = Field(default=3, ge=1, le=MAX_TOOL_ATTEMPTS)
    """Attempts per call, the first included (1 to 10)."""
    initial_backoff_seconds: float = Field(default=0.5, ge=0, le=MAX_BACKOFF_SECONDS)
    """Wait before the second attempt (0 to 300)."""
    backoff_multiplier: float = Field(default=2.0, ge=1.0, le=10.0)
    """Each further wait is the previous one times this (1 to 10)."""
    max_backoff_seconds: float = Field(default=10.0, ge=0, le=MAX_BACKOFF_SECONDS)
    """Waits never grow beyond this (0 to 300)."""

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        wait = self.initial_backoff_seconds * self.backoff_multiplier ** (attempt - 1)
        return float(min(wait, self.max_backoff_seconds))


class GuardrailViolation(SleuthError, ValueError):
    """A guardrail refused the run's input or (with `on_violation: fail`) its answer."""


class TextGuard(StrictInput):
    """Checks on one text: patterns it must not match, a length cap, and (for answers) a schema."""

    blocked_patterns: list[str] = Field(default_factory=list, max_length=100)
    """RE2 regular expressions (case-insensitive); a text matching any of them is refused."""
    max_chars: int | None = Field(default=None, ge=1, le=10_000_000)
    """Longest text allowed, in characters."""
    json_schema: dict[str, Any] | None = None
    """A JSON Schema the text must satisfy as a JSON document (answers only)."""

    @field_validator("blocked_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re2.compile(pattern)
            except re2.error as exc:
                raise ValueError(
                    f"blocked pattern {pattern!r} is not a valid RE2 regex: {exc}"
                ) from None
        return patterns

    @field_validator("json_schema")
    @classmethod
    def _schema_is_valid(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"json_schema is not a valid JSON Schema: {exc.message}") from None
        return schema

    def violations(self, text: str) -> list[str]:
        """What is wrong with `text`, one line each (empty: it passes)."""
        found = [
            f"matches the blocked pattern {pattern!r}"
            for pattern in self.blocked_patterns
            if re2.search(pattern, text, options=_CASE_INSENSITIVE)
        ]
        if self.max_chars is not None and len(text) > self.max_chars:
            found.append(f"is {len(text):,} characters long; the limit is {self.max_chars:,}")
        if self.json_schema is not None:
            found += _schema_violations(text, self.json_schema)
        return found


class Guardrails(StrictInput):
    """Checks on what goes into a run (the task) and what comes out (the answer).

    A refused input fails the run before any model call. A refused answer either fails the run
    (`on_violation: fail`) or goes back to the model with what was wrong (`retry`, at most
    `max_retries` times, then the run fails). Every violation publishes `agent.guardrail`.
    """

    input: TextGuard | None = None
    """Checks on the task."""
    output: TextGuard | None = None
    """Checks on the final answer."""
    on_violation: Literal["fail", "retry"] = "fail"
    """What a refused answer does: fail the run, or ask the model for a new answer."""
    max_retries: int = Field(default=2, ge=0, le=10)
    """New answers asked for before the run fails (`retry` only; 0 to 10)."""


class Governance(StrictInput):
    """What a run may do: which tools it may call and how much it may spend (tokens, USD)."""

    allowed_tools: list[str] | None = None
    """The only tools the run may call (None: all its tools). A call to another is refused, the
    model is told so, and an `agent.governance` event is published."""
    max_tokens_per_run: int | None = Field(default=None, ge=1)
    """Tokens (input plus output) one run may spend; once spent, the run ends with
    `stop_reason="spend_cap"` and what it found so far."""
    max_cost_usd_per_run: float | None = Field(default=None, gt=0, le=MAX_COST_USD_PER_RUN)
    """USD one run may spend at its model's price (`sleuth.usage.pricing`; more than 0, at most
    100,000), including what tools charge. It is `UsageLimits.max_cost_usd` for the run:
    checked before each model request, each answer capped at the output tokens the dollars left
    buy. A request that no longer fits ends the run with `stop_reason="spend_cap"` and what it
    found so far. The model must have a price."""

    def spend_limits(self) -> UsageLimits | None:
        """The `UsageLimits` the USD cap stands for (None without one)."""
        if self.max_cost_usd_per_run is None:
            return None
        return UsageLimits(max_cost_usd=self.max_cost_usd_per_run)


SPEND_CAP = "spend_cap"
"""The stop reason of a run that reached `Governance.max_tokens_per_run` or
`Governance.max_cost_usd_per_run`."""

_CASE_INSENSITIVE = re2.Options()
_CASE_INSENSITIVE.case_sensitive = False


def _schema_violations(text: str, schema: dict[str, Any]) -> list[str]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return ["is not a JSON document, and the output schema requires one"]
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"does not fit the output schema at {'/'.join(map(str, error.path)) or 'the top'}: "
        f"{error.message}"
        for error in validator.iter_errors(document)
    ]
