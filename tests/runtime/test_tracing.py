"""Tracing: one research run is one trace, from the client that starts it through the workflow and
its activities down to each node, model call and tool call; exporters come from `OTEL_*`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from sleuth import Agent, App, create_research_workflow
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.runtime.errors import InvalidSettingError
from sleuth.workers.telemetry import client_interceptors, tracer_provider_from_env
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model

EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans this test ends (the in-memory exporter behind the process's tracer provider)."""
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def by_id(finished: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {span.context.span_id: span for span in finished}


def parent_of(span: ReadableSpan, index: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return index.get(span.parent.span_id) if span.parent is not None else None


def named(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


async def test_a_durable_research_run_is_one_trace(
    time_env: WorkflowEnvironment, spans: InMemorySpanExporter
) -> None:
    app = App()
    app.research(
        "market",
        create_research_workflow(model=scripted_model(ResearchScript()), tools=[lookup]),
    )
    client = Client(
        time_env.client.service_client,
        namespace=time_env.client.namespace,
        data_converter=pydantic_data_converter,
        interceptors=client_interceptors(),
    )
    task_queue = str(uuid.uuid4())
    async with build_worker(client, app, task_queue=task_queue):
        outcome: ResearchOutcome = await client.execute_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="How fast did the CRM market grow?", research="market"),
            id=f"research-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    finished = spans.get_finished_spans()
    [root] = named(finished, "StartWorkflow:ResearchWorkflow")
    assert root.parent is None
    assert {span.context.trace_id for span in finished} == {root.context.trace_id}
    index = by_id(finished)

    # Temporal's stable interceptor ends workflow spans at once (a workflow must stay replay-safe),
    # so the workflow's own spans and the activities it starts all hang off the run's context,
    # which the client's span started and the workflow carries.
    [workflow_span] = named(finished, "RunWorkflow:ResearchWorkflow")
    assert parent_of(workflow_span, index) is root
    for node in outcome.final_state.nodes:
        [node_span] = named(finished, f"research.{node}")
        run_activity = parent_of(node_span, index)
        assert run_activity is not None and run_activity.name == f"RunActivity:research.{node}"
        start_activity = parent_of(run_activity, index)
        assert start_activity is not None
        assert start_activity.name == f"StartActivity:research.{node}"
        assert parent_of(start_activity, index) is root
    [finish] = named(finished, "RunActivity:research.finish")
    assert parent_of(parent_of(finish, index), index) is root  # type: ignore[arg-type]

    model_spans = named(finished, "chat scripted:scripted")
    assert len(model_spans) >= len(outcome.final_state.nodes)
    for span in model_spans:
        parent = parent_of(span, index)
        assert parent is not None and parent.name.startswith("research.")
        assert span.attributes is not None
        assert span.attributes["gen_ai.usage.input_tokens"] > 0
        assert "sleuth.cost_usd" in span.attributes and "sleuth.latency_ms" in span.attributes
    tokens = sum(s.attributes["gen_ai.usage.input_tokens"] for s in model_spans)  # type: ignore[index]
    assert tokens == outcome.final_state.usage.input_tokens

    [tool_span] = named(finished, "execute_tool lookup")
    parent = parent_of(tool_span, index)
    assert parent is not None and parent.name == "research.execute"
    assert tool_span.attributes is not None and tool_span.attributes["sleuth.tool.success"] is True


async def test_an_in_process_run_is_one_trace_too(spans: InMemorySpanExporter) -> None:
    spec = create_research_workflow(model=scripted_model(ResearchScript()), tools=[lookup])
    result = await spec.execute("How fast did the CRM market grow?")
    finished = spans.get_finished_spans()
    [root] = named(finished, "research research")
    index = by_id(finished)
    node_spans = [s for s in finished if s.name.startswith("research.")]
    assert [s.name for s in sorted(node_spans, key=lambda s: s.start_time or 0)] == [
        f"research.{node}" for node in result.final_state.nodes
    ]
    assert all(parent_of(s, index) is root for s in node_spans)
    assert {s.context.trace_id for s in finished} == {root.context.trace_id}


async def test_a_failed_tool_call_marks_its_span(spans: InMemorySpanExporter) -> None:
    def broken(topic: str) -> str:
        """Always fails."""
        raise TimeoutError("the index did not answer")

    agent = Agent(ScriptedModel([tool_call("broken", topic="x"), text("gave up")]), tools=[broken])
    await agent.arun("q")
    [span] = named(spans.get_finished_spans(), "execute_tool broken")
    assert span.status.status_code == trace.StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["sleuth.tool.error"].startswith("TimeoutError")  # type: ignore[union-attr]


def test_exporters_come_from_the_otel_variables() -> None:
    assert tracer_provider_from_env({}) is None
    assert tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "none"}) is None
    console = tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert console is not None
    assert console.resource.attributes["service.name"] == "sleuth"
    processors = console._active_span_processor._span_processors  # type: ignore[attr-defined]
    assert isinstance(processors[0].span_exporter, ConsoleSpanExporter)
    named_service = tracer_provider_from_env(
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "research-workers"}
    )
    assert named_service is not None
    assert named_service.resource.attributes["service.name"] == "research-workers"
    otlp = tracer_provider_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"})
    assert otlp is not None
    exporter = otlp._active_span_processor._span_processors[0].span_exporter  # type: ignore[attr-defined]
    assert type(exporter).__module__.startswith("opentelemetry.exporter.otlp.proto.grpc")
    http = tracer_provider_from_env(
        {"OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    )
    assert http is not None
    kinds = [p.span_exporter for p in http._active_span_processor._span_processors]  # type: ignore[attr-defined]
    assert type(kinds[0]).__module__.startswith("opentelemetry.exporter.otlp.proto.http")
    assert isinstance(kinds[1], ConsoleSpanExporter)
    assert (
        tracer_provider_from_env(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318", "OTEL_SDK_DISABLED": "true"}
        )
        is None
    )
    with pytest.raises(InvalidSettingError, match="zipkin is not an exporter"):
        tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(InvalidSettingError, match="grpc or http/protobuf"):
        tracer_provider_from_env(
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}
        )
