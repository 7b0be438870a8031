"""The Web UI's one-line summary of every run Sleuth starts: what it was asked, cut short.

`SummaryInterceptor` is on every client Sleuth connects (`sleuth.workers.client.connect`) and every
client `SleuthPlugin` configures, so runs started by the `sleuth` commands, `sleuth serve` and
your own code (`client.start_workflow(ResearchWorkflow.run, request, ...)`) all get a
`static_summary` unless the caller gives one: `research market: How fast did CRM grow?`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio.client import (
    Interceptor,
    OutboundInterceptor,
    StartWorkflowInput,
    WorkflowHandle,
)

from sleuth._util.text import preview

SUMMARY_CHARS = 160
"""How much of the question a summary keeps (the Web UI shows one line)."""
_TEXT_FIELDS = ("prompt", "task")
_NAME_FIELDS = (("research", "research"), ("pipeline", "pipeline"), ("agent", "agent"))


def run_summary(args: Sequence[Any]) -> str | None:
    """`<kind> <name>: <question>` for a workflow input holding a prompt or a task (a research,
    agent, deep agent or pipeline run), `scan <provider>` for a scan; None for anything else."""
    if not args:
        return None
    request = args[0]
    text = next((getattr(request, f) for f in _TEXT_FIELDS if getattr(request, f, None)), None)
    kind, name = next(
        ((kind, getattr(request, f)) for f, kind in _NAME_FIELDS if getattr(request, f, None)),
        (None, None),
    )
    if text is None:
        provider = getattr(request, "provider", None)
        if provider is None:
            return None
        what = f" with {kind} {name}" if kind else ""
        return preview(f"scan {provider}{what}", SUMMARY_CHARS)
    head = f"{kind} {name}: " if kind else ""
    return preview(head + " ".join(str(text).split()), SUMMARY_CHARS)


class SummaryInterceptor(Interceptor):
    """Sets `static_summary` on workflow starts that have none (see the module docstring)."""

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _SummaryOutbound(next)


class _SummaryOutbound(OutboundInterceptor):
    async def start_workflow(self, input: StartWorkflowInput) -> WorkflowHandle[Any, Any]:
        if input.static_summary is None:
            input.static_summary = run_summary(input.args)
        return await super().start_workflow(input)


def with_summaries(interceptors: Sequence[Any]) -> list[Any]:
    """`interceptors` plus a `SummaryInterceptor` unless they hold one."""
    if any(isinstance(i, SummaryInterceptor) for i in interceptors):
        return list(interceptors)
    return [*interceptors, SummaryInterceptor()]
