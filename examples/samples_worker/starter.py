"""Start your workflow, then a Sleuth research run, on the worker of worker.py."""

import asyncio
import uuid

from sleuth_app import TASK_QUEUE

from sleuth.temporal import ResearchRequest, ResearchWorkflow, connect
from workflows import TicketWorkflow


async def main() -> None:
    client = await connect()
    ticket = await client.execute_workflow(
        TicketWorkflow.run, "T-1", id=f"ticket-{uuid.uuid4().hex[:8]}", task_queue=TASK_QUEUE
    )
    print("ticket:", ticket)
    outcome = await client.execute_workflow(
        ResearchWorkflow.run,
        ResearchRequest(prompt="What does Acme charge per seat?", research="prices"),
        id=f"research-{uuid.uuid4().hex[:8]}",
        task_queue=TASK_QUEUE,
    )
    print("research:", outcome.final_state.end_reason, "-", outcome.final_state.summary)


if __name__ == "__main__":
    asyncio.run(main())
