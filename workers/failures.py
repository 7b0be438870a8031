"""Put the reason a run failed at the top of its failure, where the CLI and the Web UI show it.

An activity that fails for an unknown name or a bad configuration fails the workflow with the
SDK's `ActivityError`, whose message is "Activity task failed"; the message that says what to do
("unknown agent 'x'; registered: a, b") was one level down, in its cause. This interceptor
re-raises such a cause as the run's own failure, keeping the activity failure as its cause.

The worker's log says the same in one line (`OneLineFailures`): the SDK logs every failed activity
with its traceback, some forty lines through Sleuth's and the SDK's frames for a plain input error
such as a misspelt research name. Other failures keep their traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

LIFTED_ERROR_TYPES = frozenset(
    {"UnknownName", "ConfigError", "NonRetryableModelError", "ValidationError"}
)
"""`ApplicationError` types (set by `activities/errors.py`) that name what the person must fix."""


def actionable_cause(error: BaseException) -> ApplicationError | None:
    """The first non-retryable cause of one of `LIFTED_ERROR_TYPES` below an activity or child
    workflow failure, or None."""
    current: BaseException | None = error
    while isinstance(current, ActivityError | ChildWorkflowError):
        current = current.cause
        if isinstance(current, ApplicationError) and current.type in LIFTED_ERROR_TYPES:
            return current
    return None


class _LiftingInbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        try:
            return await super().execute_workflow(input)
        except (ActivityError, ChildWorkflowError) as error:
            cause = actionable_cause(error)
            if cause is None:
                raise
            raise ApplicationError(cause.message, type=cause.type, non_retryable=True) from error


class FailureCauseInterceptor(Interceptor):
    """A worker interceptor: a run that fails for an unknown name or a bad setting fails with
    that message at the top (see the module docstring)."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _LiftingInbound


ACTIVITY_LOGGER = "temporalio.activity"


class OneLineFailures(logging.Filter):
    """Turns the SDK's "Completing activity as failed" record, when its error is a non-retryable
    one of `LIFTED_ERROR_TYPES`, into one line naming the activity, the workflow and the message
    (which says what to fix). With the logger at DEBUG the traceback stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not (
            isinstance(error, ApplicationError)
            and error.non_retryable
            and error.type in LIFTED_ERROR_TYPES
            and not logging.getLogger(ACTIVITY_LOGGER).isEnabledFor(logging.DEBUG)
        ):
            return True
        info = getattr(record, "temporal_activity", None) or {}
        record.msg = (
            f"activity {info.get('activity_type', '?')} of workflow "
            f"{info.get('workflow_id', '?')} failed, not retried: {error.message}"
        )
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


def log_failures_in_one_line() -> None:
    """Install `OneLineFailures` on the SDK's activity logger (once per process)."""
    logger = logging.getLogger(ACTIVITY_LOGGER)
    if not any(isinstance(existing, OneLineFailures) for existing in logger.filters):
        logger.addFilter(OneLineFailures())
