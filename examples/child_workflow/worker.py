"""Your worker: your workflow, plus everything Sleuth adds through its plugin."""

import asyncio

from app import TASK_QUEUE, app
from temporalio.worker import Worker

from sleuth.temporal import SleuthPlugin, connect
from workflows import PricingQuestionWorkflow


async def main() -> None:
    client = await connect(plugins=[SleuthPlugin(app)])
    worker = Worker(client, task_queue=TASK_QUEUE, workflows=[PricingQuestionWorkflow])
    print("worker polling", TASK_QUEUE, flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
