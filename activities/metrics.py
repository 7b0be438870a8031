"""Metrics activities record (through `activity.metric_meter()`, exported with the SDK's own by a
worker started with `SLEUTH_METRICS_PORT`; see `sleuth.workflows.metrics` for the workflow-side ones)."""

from __future__ import annotations

from collections.abc import Iterable

from temporalio import activity

from sleuth.agent.state import EvidenceItem

_KNOWN_ERRORS = frozenset(
    {"invalid_arguments", "unknown_tool", "budget_exhausted", "denied", "ungrounded_submission"}
)


def error_kind(error: str | None) -> str:
    """A bounded label for a tool error: Sleuth's own codes as they are, else the exception's
    type (`TimeoutError: …` → `TimeoutError`), never the free-form message."""
    if not error:
        return "error"
    if error in _KNOWN_ERRORS:
        return error
    return error.split(":", 1)[0].strip() or "error"


def record_tool_errors(items: Iterable[EvidenceItem]) -> None:
    """Count the failed tool calls among `items` (calls this activity just made)."""
    failed = [item for item in items if not item.success]
    if not failed:
        return
    counter = activity.metric_meter().create_counter(
        "sleuth_tool_errors", "Tool calls that failed, by tool and kind of error", "calls"
    )
    for item in failed:
        counter.add(1, {"tool": item.tool, "error": error_kind(item.error)})
