"""Timeouts and retry policy of one kind of activity: the building block of every feature's config."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, Field, model_validator
from temporalio.common import RetryPolicy

from sleuth._util.strict import StrictInput
from sleuth.runtime.errors import InvalidSettingError

MAX_SECONDS = 30 * 24 * 3600.0
"""Longest timeout, interval or heartbeat any setting accepts: 30 days."""
MAX_ATTEMPTS = 10_000
"""Most attempts a retry policy accepts (0 means no limit, as in Temporal)."""
MAX_BACKOFF = 100.0
"""Largest backoff coefficient."""


def seconds(default: float) -> Any:
    """A duration field: more than 0 and at most `MAX_SECONDS` (30 days)."""
    return Field(default=default, gt=0, le=MAX_SECONDS)


def attempts(default: int) -> Any:
    """An attempt count: 0 (no limit) to `MAX_ATTEMPTS`."""
    return Field(default=default, ge=0, le=MAX_ATTEMPTS)


class RetrySettings(StrictInput):
    """How Temporal retries one kind of activity."""

    initial_interval_seconds: float = seconds(1.0)
    """Wait before the first retry (more than 0, at most 30 days)."""
    backoff_coefficient: float = Field(default=2.0, ge=1.0, le=MAX_BACKOFF)
    """Each further wait is the previous one times this (1 to 100)."""
    maximum_interval_seconds: float = seconds(60.0)
    """Waits never grow beyond this (at least the initial interval, at most 30 days)."""
    maximum_attempts: int = attempts(5)
    """Attempts in total, the first included (0 = no limit; at most 10,000)."""

    @model_validator(mode="after")
    def _interval_order(self) -> RetrySettings:
        if self.maximum_interval_seconds < self.initial_interval_seconds:
            raise InvalidSettingError(
                f"maximum_interval_seconds ({self.maximum_interval_seconds}) must be at least "
                f"initial_interval_seconds ({self.initial_interval_seconds})"
            )
        return self

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial_interval=timedelta(seconds=self.initial_interval_seconds),
            backoff_coefficient=self.backoff_coefficient,
            maximum_interval=timedelta(seconds=self.maximum_interval_seconds),
            maximum_attempts=self.maximum_attempts,
        )


class ActivitySettings(StrictInput):
    """Timeouts and retries of one kind of activity."""

    start_to_close_seconds: float = seconds(600.0)
    """Longest one attempt may run (model calls on a slow local model included); more than 0,
    at most 30 days."""
    heartbeat_seconds: float | None = Field(default=None, gt=0, le=MAX_SECONDS)
    """An attempt that has not heartbeaten for this long counts as lost (its worker died) and is
    retried; None for activities that do not heartbeat (more than 0, at most 30 days)."""
    retry: RetrySettings = Field(default_factory=RetrySettings)
    """The retry policy."""

    def activity_options(self) -> dict[str, Any]:
        """Keyword arguments for `workflow.execute_activity`."""
        return {
            "start_to_close_timeout": timedelta(seconds=self.start_to_close_seconds),
            "heartbeat_timeout": (
                timedelta(seconds=self.heartbeat_seconds) if self.heartbeat_seconds else None
            ),
            "retry_policy": self.retry.policy(),
        }


ConfigT = TypeVar("ConfigT", bound=BaseModel)


def with_overrides(
    config_type: type[ConfigT],
    overrides: dict[str, Any] | None,
    *,
    where: str,
    noun: str,
    plural: str,
) -> ConfigT:
    """`config_type`'s defaults with a run's `overrides` merged in field by field (nested dicts
    merge too, so `{"execute": {"retry": {"maximum_attempts": 3}}}` keeps the other settings).
    A key that names no field is an error listing the ones that exist."""
    fields = list(config_type.model_fields)
    unknown = sorted(set(overrides or {}) - set(fields))
    if unknown:
        raise InvalidSettingError(
            f"unknown {noun}(s) in {where!r}: {', '.join(unknown)}; {plural}: {', '.join(fields)}"
        )
    return config_type.model_validate(_deep_merge(config_type().model_dump(), overrides or {}))


def _deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
