"""Timeouts and retry policy of one kind of activity: the building block of every feature's config."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, Field
from temporalio.common import RetryPolicy


class RetrySettings(BaseModel):
    """How Temporal retries one kind of activity."""

    initial_interval_seconds: float = 1.0
    """Wait before the first retry."""
    backoff_coefficient: float = 2.0
    """Each further wait is the previous one times this."""
    maximum_interval_seconds: float = 60.0
    """Waits never grow beyond this."""
    maximum_attempts: int = 5
    """Attempts in total, the first included (0 = no limit)."""

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial_interval=timedelta(seconds=self.initial_interval_seconds),
            backoff_coefficient=self.backoff_coefficient,
            maximum_interval=timedelta(seconds=self.maximum_interval_seconds),
            maximum_attempts=self.maximum_attempts,
        )


class ActivitySettings(BaseModel):
    """Timeouts and retries of one kind of activity."""

    start_to_close_seconds: float = 600.0
    """Longest one attempt may run (model calls on a slow local model included)."""
    heartbeat_seconds: float | None = None
    """An attempt that has not heartbeaten for this long counts as lost (its worker died) and is
    retried; None for activities that do not heartbeat."""
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
        raise ValueError(
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
