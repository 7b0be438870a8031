"""A research run that waits for a person to approve its summary, answered with an Update."""

import asyncio
import uuid

from temporalio.client import WorkflowExecutionStatus

from sleuth import App, ReviewDecision, ReviewPolicy, create_research_workflow, tool
from sleuth.temporal import (
    ResearchOutcome,
    ResearchRequest,
    ResearchWorkflow,
    build_worker,
    connect,
)

TASK_QUEUE = "human-review-example"


@tool
def price_list(company: str) -> str:
    """The list price per seat of a company's CRM."""
    return "Acme charges $40 per seat per month for its CRM."


app = App(task_queue=TASK_QUEUE)
app.research(
    "prices",
    create_research_workflow(
        tools=[price_list],
        grounding_threshold=0.5,
        max_sub_questions=1,
        review=ReviewPolicy(points=["summary"], timeout_seconds=24 * 3600),
    ),
)


async def main() -> None:
    client = await connect()
    async with build_worker(client, app):
        handle = await client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="What does Acme charge per seat?", research="prices"),
            id=f"review-{uuid.uuid4().hex[:8]}",
            task_queue=TASK_QUEUE,
        )
        # The run waits on a durable timer; anyone can read what it waits for with a Query.
        pending = None
        while pending is None:
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                await handle.result()  # the run ended before asking: this raises its failure
            pending = await handle.query("pending_review")
            await asyncio.sleep(0.2)
        print("waiting for review:", pending["review_id"], "-", pending["subject"])
        decision = ReviewDecision(review_id=pending["review_id"], decision="approve")
        await handle.execute_update("review", decision)
        outcome: ResearchOutcome = await handle.result()
        report = outcome.final_state
        print("ended:", report.end_reason, "-", report.summary)
        print("decisions:", [record.decision for record in report.reviews])


if __name__ == "__main__":
    asyncio.run(main())
