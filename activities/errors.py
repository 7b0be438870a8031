"""Map Sleuth errors to Temporal's retry semantics, in one place for every activity."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from sleuth.agent.policies import GuardrailViolation
from sleuth.app import UnknownNameError
from sleuth.artifacts import ArtifactNotFoundError, ArtifactReferenceError
from sleuth.errors import SleuthError
from sleuth.models.base import NonRetryableModelError, RetryableModelError

P = ParamSpec("P")
R = TypeVar("R")


class ConfigError(SleuthError, ValueError):
    """A run's configuration is wrong (bad schema, missing setting): retrying cannot fix it."""


def to_application_error(exc: BaseException) -> ApplicationError | None:
    """The `ApplicationError` an activity should raise for `exc`, or None to let Temporal retry as usual."""
    if isinstance(exc, ApplicationError):
        return exc
    if isinstance(exc, UnknownNameError):
        return ApplicationError(str(exc), type="UnknownName", non_retryable=True)
    if isinstance(exc, RetryableModelError):
        delay = timedelta(seconds=exc.retry_after) if exc.retry_after else None
        return ApplicationError(str(exc), type="RetryableModelError", next_retry_delay=delay)
    if isinstance(exc, NonRetryableModelError):
        return ApplicationError(str(exc), type="NonRetryableModelError", non_retryable=True)
    if isinstance(exc, ConfigError):
        return ApplicationError(str(exc), type="ConfigError", non_retryable=True)
    if isinstance(exc, GuardrailViolation):
        return ApplicationError(str(exc), type="GuardrailViolation", non_retryable=True)
    if isinstance(exc, ValidationError):
        return ApplicationError(str(exc), type="ValidationError", non_retryable=True)
    if isinstance(exc, ArtifactReferenceError | ArtifactNotFoundError):
        # A reference in the input that this worker's store cannot resolve will not resolve on
        # the next attempt either: fail at once, with the store's message.
        return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)
    return None


def mapped_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Decorate an async activity so its exceptions carry the right retry semantics."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            mapped = to_application_error(exc)
            if mapped is None or mapped is exc:
                raise
            raise mapped from exc

    return wrapper


def unwrap_cause(error: BaseException) -> Any:
    """The innermost cause of a Temporal failure chain (for messages shown to people)."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error
