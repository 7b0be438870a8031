"""What operations cost a durable research run: search-attribute upserts and tracing.

Runs the same 11-node research config (an instant scripted model, as in `bench.research_overhead`)
in three set-ups, interleaved run by run so a busy machine slows them alike: a dev server without
Sleuth's search attributes and a client without tracing; a dev server with them (every node
upserts its counters); and that server with Temporal's tracing interceptor while a recording
tracer provider samples every span (each node, model call and tool call). Prints ms per run,
events and history bytes per run, spans per run, and each set-up's ratio to the first.

    python -m bench.ops_overhead [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.research_overhead import FAST_SERVER_ARGS, graph_spec
from sleuth.activities.research_models import ResearchRequest
from sleuth.apps.app import App
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.plugin import SleuthPlugin
from sleuth.workers.search_attributes import dev_server_flags
from sleuth.workers.telemetry import client_interceptors
from sleuth.workflows.research import ResearchWorkflow


class Switch(Sampler):
    """Records every span while `on`, none otherwise (so untraced set-ups pay the API's no-op)."""

    on = False

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: object = None,
    ) -> SamplingResult:
        return SamplingResult(Decision.RECORD_AND_SAMPLE if self.on else Decision.DROP)

    def get_description(self) -> str:
        return "Switch"


SAMPLER = Switch()
SPANS = InMemorySpanExporter()


async def run_once(client: Client, task_queue: str) -> tuple[float, int, int]:
    """Seconds for one run, and its history's events and bytes."""
    started = time.perf_counter()
    handle = await client.start_workflow(
        ResearchWorkflow.run,
        ResearchRequest(prompt="How many widgets did Acme ship?", research="graph"),
        id=f"bench-ops-{uuid.uuid4()}",
        task_queue=task_queue,
    )
    await handle.result()
    elapsed = time.perf_counter() - started
    history = await handle.fetch_history()
    return elapsed, len(history.events), sum(e.ByteSize() for e in history.events)


async def main(runs: int) -> None:
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-bench-"))
    provider = TracerProvider(sampler=SAMPLER)
    provider.add_span_processor(SimpleSpanProcessor(SPANS))
    trace.set_tracer_provider(provider)
    app = App()
    app.research("graph", graph_spec())
    plain = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=FAST_SERVER_ARGS,
    )
    with_attributes = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=[*FAST_SERVER_ARGS, *dev_server_flags()],
    )
    traced = Client(
        with_attributes.client.service_client,
        namespace=with_attributes.client.namespace,
        data_converter=pydantic_data_converter,
        interceptors=client_interceptors(),
    )
    setups = [
        ("no attributes, no tracing", plain.client, False),
        ("search attributes", with_attributes.client, False),
        ("attributes + tracing", traced, True),
    ]
    totals: dict[str, list[float]] = {label: [0.0, 0.0, 0.0, 0.0] for label, _, _ in setups}
    try:
        async with contextlib.AsyncExitStack() as stack:
            queues = []
            for _, client, tracing in setups:
                queue = str(uuid.uuid4())
                # An untraced set-up's worker must not trace on its own either.
                worker = Worker(
                    client, task_queue=queue, plugins=[SleuthPlugin(app, tracing=tracing)]
                )
                await stack.enter_async_context(worker)
                queues.append(queue)
            for round_ in range(runs + 1):  # round 0 warms every worker up
                for (label, client, tracing), queue in zip(setups, queues, strict=True):
                    SAMPLER.on = tracing
                    SPANS.clear()
                    seconds, events, size = await run_once(client, queue)
                    if round_:
                        total = totals[label]
                        total[0] += seconds
                        total[1], total[2] = events, size
                        total[3] += len(SPANS.get_finished_spans())
    finally:
        await plain.shutdown()
        await with_attributes.shutdown()
    base = totals[setups[0][0]][0]
    print(f"operations overhead ({runs} runs x 11 nodes per set-up, instant model, dev server)")
    print(f"  {'set-up':<28}{'ms/run':>9}{'ratio':>7}{'events':>8}{'history':>10}{'spans/run':>11}")
    for label, (elapsed, history_events, history_bytes, spans) in totals.items():
        print(
            f"  {label:<28}{elapsed * 1000 / runs:>9.1f}{elapsed / base:>6.2f}x"
            f"{history_events:>8.0f}{history_bytes / 1024:>8.1f}KB{spans / runs:>11.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per set-up (default: 30)")
    asyncio.run(main(parser.parse_args().runs))
    sys.stdout.flush()
    os._exit(0)  # temporalio may abort at interpreter exit otherwise
