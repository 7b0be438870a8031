"""Regenerate `research_replan.json`: one `ResearchWorkflow` run that regenerates, replans, then
grounds, recorded on the time-skipping server. Run from the repository root:

    python tests/research/histories/make_research_history.py

Only regenerate it on purpose: the replay test exists to catch workflow changes that would break
runs already in flight.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from sleuth import App, create_research_workflow  # noqa: E402
from sleuth.activities.research_models import ResearchRequest  # noqa: E402
from sleuth.workflows.research import ResearchWorkflow  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_test_server  # noqa: E402
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model  # noqa: E402

HISTORY = Path(__file__).with_name("research_replan.json")


async def record() -> None:
    app = App()
    script = ResearchScript(verdicts=[False, False, True])
    app.research("market", create_research_workflow(model=scripted_model(script), tools=[lookup]))
    async with worker_on_test_server(app) as (client, task_queue):
        handle = await client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="How fast did the CRM market grow?", research="market"),
            id="research-replay-fixture",
            task_queue=task_queue,
        )
        outcome = await handle.result()
        events = await save_history(handle, HISTORY)
    print(
        f"wrote {HISTORY} ({events} events, replans: "
        f"{outcome.final_state['replan_count']}, end: {outcome.final_state['end_reason']})"
    )


if __name__ == "__main__":
    run_script(record)
