"""Regenerate `research_review.json`: one `ResearchWorkflow` run that pauses for review after its
plan (revised, then approved) and after its summary (revised, then approved), with Sleuth's
search attributes registered, recorded on an in-memory dev server. Run from the repository root:

    python tests/research/histories/make_research_review_history.py

Only regenerate it on purpose: the replay test exists to catch workflow changes that would break
runs already in flight.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from sleuth import App, create_research_workflow  # noqa: E402
from sleuth.activities.research_models import ResearchRequest  # noqa: E402
from sleuth.flows.review import PendingReview, ReviewDecision, ReviewPolicy  # noqa: E402
from sleuth.usage.pricing import ModelPrice, set_prices  # noqa: E402
from sleuth.workers.search_attributes import dev_server_flags  # noqa: E402
from sleuth.workflows.research import ResearchWorkflow  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_dev_server  # noqa: E402
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model  # noqa: E402

HISTORY = Path(__file__).with_name("research_review.json")
DECISIONS = [
    ("plan-1", "revise", "Look only at the 2024 Gartner report."),
    ("plan-2", "approve", None),
    ("summary-3", "revise", "Name the analyst firm."),
    ("summary-4", "approve", None),
]


async def record() -> None:
    set_prices({"scripted": ModelPrice(input_per_million=3, output_per_million=15)})
    app = App()
    script = ResearchScript(verdicts=[False, False, True])
    app.research(
        "market",
        create_research_workflow(
            model=scripted_model(script), tools=[lookup], review=ReviewPolicy()
        ),
    )
    async with worker_on_dev_server(app, dev_server_flags()) as (client, task_queue):
        handle = await client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="How fast did the CRM market grow?", research="market"),
            id="research-review-replay-fixture",
            task_queue=task_queue,
        )
        for review_id, decision, remark in DECISIONS:
            while True:
                pending = await handle.query(
                    "pending_review",
                    result_type=PendingReview | None,  # type: ignore[arg-type]
                )
                if pending is not None and pending.review_id == review_id:
                    break
                await asyncio.sleep(0.05)
            await handle.execute_update(
                "review",
                ReviewDecision(review_id=review_id, decision=decision, remark=remark),  # type: ignore[arg-type]
            )
        outcome = await handle.result()
        events = await save_history(handle, HISTORY)
    report = outcome.final_state
    print(
        f"wrote {HISTORY} ({events} events, reviews: {[r.decision for r in report.reviews]}, "
        f"end: {report.end_reason}, cost: ${report.cost_usd:.6f})"
    )


if __name__ == "__main__":
    run_script(record)
