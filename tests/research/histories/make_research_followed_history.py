"""Regenerate `research_followed.json`: one `ResearchWorkflow` run with a live-event follower
polling its stream from the start (the stream's poll Updates interleave with everything), Sleuth's
search attributes registered (the `sleuth.search_attributes` lookup is an activity), and a
summary review approved through the `review` Update, recorded on an in-memory dev server. Run
from the repository root:

    python tests/research/histories/make_research_followed_history.py

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
from sleuth.workers.events import follow_events  # noqa: E402
from sleuth.workers.search_attributes import dev_server_flags  # noqa: E402
from sleuth.workflows.research import ResearchWorkflow  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_dev_server  # noqa: E402
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model  # noqa: E402

HISTORY = Path(__file__).with_name("research_followed.json")


async def record() -> None:
    app = App()
    app.research(
        "market",
        create_research_workflow(
            model=scripted_model(ResearchScript(verdicts=[True])),
            tools=[lookup],
            review=ReviewPolicy(points=["summary"]),
        ),
    )
    async with worker_on_dev_server(app, dev_server_flags()) as (client, task_queue):
        handle = await client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="How fast did the CRM market grow?", research="market"),
            id="research-followed-replay-fixture",
            task_queue=task_queue,
        )

        async def follow() -> list[str]:
            return [event.event_type async for _, event in follow_events(client, handle.id)]

        follower = asyncio.create_task(follow())
        while True:
            pending = await handle.query(
                "pending_review",
                result_type=PendingReview | None,  # type: ignore[arg-type]
            )
            if pending is not None:
                break
            await asyncio.sleep(0.05)
        await handle.execute_update(
            "review", ReviewDecision(review_id=pending.review_id, decision="approve")
        )
        outcome = await handle.result()
        seen = await follower
        events = await save_history(handle, HISTORY)
    print(
        f"wrote {HISTORY} ({events} events, end: {outcome.final_state.end_reason}, "
        f"the follower saw {len(seen)} events)"
    )


if __name__ == "__main__":
    run_script(record)
