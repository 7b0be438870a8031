"""Map Sleuth errors to Temporal's retry semantics, in one place for every activity."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from sleuth.agent.policies import GuardrailViolation
from sleuth.apps.app import UnknownNameError
from sleuth.flows.review import ReviewError
from sleuth.models.base import NonRetryableModelError, RetryableModelError
from sleuth.runtime.artifacts import ArtifactNotFoundError, ArtifactReferenceError
from sleuth.runtime.errors import InvalidSettingError, SleuthError
from sleuth.runtime.redact import redact

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
    if isinstance(exc, ConfigError | InvalidSettingError):
        return ApplicationError(str(exc), type="ConfigError", non_retryable=True)
    if isinstance(exc, ReviewError):
        return ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True)
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
            if _carries_credentials(exc):
                raise _redacted(exc, mapped) from None
            if mapped is None or mapped is exc:
                raise
            raise mapped from exc

    return wrapper


def _carries_credentials(exc: BaseException) -> bool:
    """Whether the message of `exc` or of any exception in its cause chain names a credential."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        if redact(text) != text:
            return True
        current = current.__cause__ or current.__context__
    return False


def _redacted(exc: BaseException, mapped: ApplicationError | None) -> ApplicationError:
    """An `ApplicationError` with the retry semantics `exc` would have had and a masked message.

    The original exception and its causes are left out of the failure (they would carry the
    credential into the workflow history); its type name is kept, so retry policies that name it
    (`non_retryable_error_types`) still apply.
    """
    if mapped is not None:
        return ApplicationError(
            redact(str(mapped)),
            type=mapped.type,
            non_retryable=mapped.non_retryable,
            next_retry_delay=mapped.next_retry_delay,
        )
    return ApplicationError(redact(str(exc)), type=type(exc).__name__)


def unwrap_cause(error: BaseException) -> Any:
    """The innermost cause of a Temporal failure chain (for messages shown to people)."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error
