"""Your worker, with Sleuth added by one plugin: it serves your workflow and activity and every
Sleuth workflow with the App's activities, on one task queue."""

import asyncio

from sleuth_app import TASK_QUEUE, app
from temporalio.worker import Worker

from activities import fetch_ticket
from sleuth.temporal import SleuthPlugin, connect
from workflows import TicketWorkflow


async def main() -> None:
    # connect() reads TEMPORAL_ADDRESS and the Temporal CLI's profiles; the plugin gives the
    # client Sleuth's data converter and every worker built on it Sleuth's workflows.
    client = await connect(plugins=[SleuthPlugin(app)])
    worker = Worker(
        client, task_queue=TASK_QUEUE, workflows=[TicketWorkflow], activities=[fetch_ticket]
    )
    print("worker polling", TASK_QUEUE, flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
