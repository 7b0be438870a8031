"""A workflow of no-op activities: the shape of a scan without its work (for scan_throughput)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow


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
