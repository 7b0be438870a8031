"""Regenerate `agent_market.json`: one `AgentWorkflow` run of `tests.apps.agent_app`'s "market"
agent (tool calls, files, todos, a subagent dispatch), recorded on the time-skipping server. Run
from the repository root:

    python tests/histories/make_agent_history.py

Only regenerate it on purpose: the replay test exists to catch workflow changes that would break
runs already in flight.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from activities.agent_models import AgentRequest  # noqa: E402
from tests.apps.agent_app import app  # noqa: E402
from workers.binaries import temporal_test_server  # noqa: E402
from workers.worker import build_worker  # noqa: E402
from workflows.agent import AgentWorkflow  # noqa: E402

HISTORY = Path(__file__).with_name("agent_market.json")


async def record() -> None:
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-history-"))
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server()),
        data_converter=pydantic_data_converter,
    )
    try:
        task_queue = str(uuid.uuid4())
        async with build_worker(env.client, app, task_queue=task_queue):
            handle = await env.client.start_workflow(
                AgentWorkflow.run,
                AgentRequest(agent="market", prompt="Size the CRM market and price Acme"),
                id="agent-replay-fixture",
                task_queue=task_queue,
            )
            outcome = await handle.result()
            history = await handle.fetch_history()
    finally:
        await env.shutdown()
    HISTORY.write_text(history.to_json())
    print(
        f"wrote {HISTORY} ({len(history.events)} events, stop: {outcome.stop_reason}, "
        f"iterations: {outcome.iterations})"
    )


if __name__ == "__main__":
    asyncio.run(record())
    sys.stdout.flush()
    os._exit(0)
