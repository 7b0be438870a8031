"""Start your workflow and print its typed result."""

import asyncio
import uuid

from sleuth.temporal import connect
from workflows import PricingQuestionWorkflow

TASK_QUEUE = "child-workflow-example"  # the queue app.py's App and worker.py use


async def main() -> None:
    client = await connect()
    answer = await client.execute_workflow(
        PricingQuestionWorkflow.run,
        "What does Acme charge per seat?",
        id=f"pricing-{uuid.uuid4().hex[:8]}",
        task_queue=TASK_QUEUE,
    )
    print("research:", answer.status, "-", answer.summary)
    print("analyst:", answer.analyst)


if __name__ == "__main__":
    asyncio.run(main())
