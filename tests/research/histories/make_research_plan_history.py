"""Regenerate `research_plan.json`: one `ResearchWorkflow` run with the plan node — a three-part
question, one execute step per part, a part the docs hold back until a replan researches it again —
recorded on the time-skipping server. Run from the repository root:

    python tests/research/histories/make_research_plan_history.py

`research_replan.json` (recorded before the plan node existed) stays as it is: replaying it checks
that runs started before the plan node still finish (the workflow's `research-plan` patch).
Only regenerate this one on purpose: the replay test exists to catch workflow changes that would
break runs already in flight.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from sleuth import App, create_research_workflow  # noqa: E402
from sleuth.activities.research_models import ResearchRequest  # noqa: E402
from sleuth.workflows.research import ResearchWorkflow  # noqa: E402
from tests.helpers.coverage_scripts import QUESTION, DocsSearch, three_part_script  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_test_server  # noqa: E402
from tests.helpers.research_scripts import scripted_model  # noqa: E402

HISTORY = Path(__file__).with_name("research_plan.json")


async def record() -> None:
    app = App()
    docs = DocsSearch(withheld="finally")
    app.research(
        "docs",
        create_research_workflow(model=scripted_model(three_part_script()), tools=[docs.tool()]),
    )
    async with worker_on_test_server(app) as (client, task_queue):
        handle = await client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt=QUESTION, research="docs"),
            id="research-plan-replay-fixture",
            task_queue=task_queue,
        )
        outcome = await handle.result()
        events = await save_history(handle, HISTORY)
    print(
        f"wrote {HISTORY} ({events} events, searches: {len(docs.queries)}, replans: "
        f"{outcome.final_state.replan_count}, end: {outcome.final_state.end_reason})"
    )


if __name__ == "__main__":
    run_script(record)
