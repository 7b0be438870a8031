"""Regenerate `agent_market.json`: one `AgentWorkflow` run of `tests.helpers.apps.agent_app`'s "market"
agent (tool calls, files, todos, a subagent dispatch), recorded on the time-skipping server. Run
from the repository root:

    python tests/agent/histories/make_agent_history.py

Only regenerate it on purpose: the replay test exists to catch workflow changes that would break
runs already in flight.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT)]


from sleuth.activities.agent_models import AgentRequest  # noqa: E402
from sleuth.workflows.agent import AgentWorkflow  # noqa: E402
from tests.helpers.apps.agent_app import app  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_test_server  # noqa: E402

HISTORY = Path(__file__).with_name("agent_market.json")


async def record() -> None:
    async with worker_on_test_server(app) as (client, task_queue):
        handle = await client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="market", prompt="Size the CRM market and price Acme"),
            id="agent-replay-fixture",
            task_queue=task_queue,
        )
        outcome = await handle.result()
        events = await save_history(handle, HISTORY)
    print(
        f"wrote {HISTORY} ({events} events, stop: {outcome.stop_reason}, "
        f"iterations: {outcome.iterations})"
    )


if __name__ == "__main__":
    run_script(record)
