"""Regenerate `research_replan.json`: one `ResearchWorkflow` run that regenerates, replans, then
grounds, recorded on the time-skipping server. Run from the repository root:

    python tests/histories/make_research_history.py

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
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from research_scripts import ResearchScript, lookup, scripted_model  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from activities.research_models import ResearchRequest  # noqa: E402
from sleuth import App, create_research_workflow  # noqa: E402
from workers.binaries import temporal_test_server  # noqa: E402
from workers.worker import build_worker  # noqa: E402
from workflows.research import ResearchWorkflow  # noqa: E402

HISTORY = Path(__file__).with_name("research_replan.json")


async def record() -> None:
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-history-"))
    app = App()
    script = ResearchScript(verdicts=[False, False, True])
    app.research("market", create_research_workflow(model=scripted_model(script), tools=[lookup]))
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server()),
        data_converter=pydantic_data_converter,
    )
    try:
        task_queue = str(uuid.uuid4())
        async with build_worker(env.client, app, task_queue=task_queue):
            handle = await env.client.start_workflow(
                ResearchWorkflow.run,
                ResearchRequest(prompt="How fast did the CRM market grow?", research="market"),
                id="research-replay-fixture",
                task_queue=task_queue,
            )
            outcome = await handle.result()
            history = await handle.fetch_history()
    finally:
        await env.shutdown()
    HISTORY.write_text(history.to_json())
    print(
        f"wrote {HISTORY} ({len(history.events)} events, replans: "
        f"{outcome.final_state['replan_count']}, end: {outcome.final_state['end_reason']})"
    )


if __name__ == "__main__":
    asyncio.run(record())
    sys.stdout.flush()
    os._exit(0)  # temporalio may abort at interpreter exit otherwise
