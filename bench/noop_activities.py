"""The raw floor: a workflow of no-op activities on a plain worker, the shape of a research run or
a scan without their work. `research_overhead` and `scan_throughput` time it on the same server in
the same run as what they measure, and print the ratio."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker


@activity.defn(name="bench.noop")
async def noop(n: int) -> int:
    return n


@workflow.defn(name="BenchNoopActivities")
class NoopActivitiesWorkflow:
    """`count` no-op activities, `concurrency` at once."""

    @workflow.run
    async def run(self, count: int, concurrency: int) -> int:
        slots = asyncio.Semaphore(concurrency)

        async def one(n: int) -> int:
            async with slots:
                return await workflow.execute_activity(
                    noop, n, start_to_close_timeout=timedelta(seconds=30), summary="no-op"
                )

        return len(await asyncio.gather(*(one(n) for n in range(count))))


async def time_noop_activities(
    client: Client, count: int, concurrency: int, *, max_concurrent_activities: int = 16
) -> float:
    """Seconds for one workflow to run `count` no-op activities, `concurrency` at once, on a fresh
    plain worker (sandboxed workflow, `max_concurrent_activities` slots) after a warm-up run."""
    task_queue = f"bench-noop-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[NoopActivitiesWorkflow],
        activities=[noop],
        max_concurrent_activities=max_concurrent_activities,
    ):
        for warm_up in (True, False):
            started = time.perf_counter()
            await client.execute_workflow(
                NoopActivitiesWorkflow.run,
                args=[min(count, 5) if warm_up else count, concurrency],
                id=f"bench-noop-{uuid.uuid4()}",
                task_queue=task_queue,
            )
            seconds = time.perf_counter() - started
    return seconds
