"""Spans for what a run does: every model call, tool call and research node, priced.

Sleuth writes spans through the OpenTelemetry API only; what happens to them is the
application's choice (a tracer provider and exporters: `sleuth.workers.telemetry.configure_tracing`
sets them up from the standard `OTEL_*` variables). Without a provider the spans cost next to
nothing. In a worker the spans nest under Temporal's activity spans
(`temporalio.contrib.opentelemetry`), so one research run is one trace from the client that
started it down to each model call.

`model_request` is the one way Sleuth calls a model: it opens the span, times the call and
prices the response (`sleuth.usage.pricing`), so `response.usage.cost_usd` is set for every caller.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Unpack

from opentelemetry import trace

from sleuth.models.base import (
    Message,
    Model,
    ModelRequestParameters,
    ModelResponse,
    RequestKeywords,
    request_parameters,
)
from sleuth.usage.pricing import model_key, priced

TRACER_NAME = "sleuth"
"""Span names follow OpenTelemetry's GenAI conventions: `chat <model>` for a model call,
`execute_tool <tool>` for a tool call; a research node is `research.<node>`, an in-process
research run `research <name>`."""


def tracer() -> trace.Tracer:
    """Sleuth's tracer, from the tracer provider in effect now."""
    return trace.get_tracer(TRACER_NAME)


async def model_request(
    model: Model,
    messages: list[Message],
    parameters: ModelRequestParameters | None = None,
    **keywords: Unpack[RequestKeywords],
) -> ModelResponse:
    """`model.request(messages, parameters)` inside a span, with the response's usage priced.
    The parameters may also come as keywords (see `ModelRequestParameters`).

    The span (`chat <model>`) carries the model, the tokens, the cost in USD and the latency.
    """
    key = model_key(model)
    with tracer().start_as_current_span(
        f"chat {key}",
        kind=trace.SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": key},
    ) as span:
        started = time.perf_counter()
        response = await model.request(messages, request_parameters(parameters, keywords))
        latency_ms = (time.perf_counter() - started) * 1000
        usage = priced(model, response.usage)
        span.set_attributes(
            {
                "gen_ai.response.model": response.model or key,
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "sleuth.cost_usd": usage.cost_usd,
                "sleuth.latency_ms": latency_ms,
                "sleuth.tool_calls": len(response.tool_calls),
            }
        )
    return response.model_copy(update={"usage": usage})


@contextmanager
def tool_span(tool: str, agent: str) -> Iterator[trace.Span]:
    """A span (`execute_tool <tool>`) around one tool call; the caller records the outcome with
    `end_tool_span`."""
    with tracer().start_as_current_span(
        f"execute_tool {tool}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "sleuth.agent": agent,
        },
    ) as span:
        yield span


def end_tool_span(span: trace.Span, *, success: bool, error: str | None) -> None:
    """Record a tool call's outcome on its span (a failed call marks the span as an error)."""
    span.set_attribute("sleuth.tool.success", success)
    if not success:
        span.set_attribute("sleuth.tool.error", error or "error")
        span.set_status(trace.Status(trace.StatusCode.ERROR, error or "tool call failed"))


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """A span named `name` with `attributes` (None values left out)."""
    values = {key: value for key, value in attributes.items() if value is not None}
    with tracer().start_as_current_span(name, attributes=values) as current:
        yield current
