"""`KnowledgeScanWorkflow`: research every item of a provider, durably, with bounded concurrency.

Each item is one activity (`scan.research_item`) that runs the research config in-process in the
worker and upserts the row, rather than a child `ResearchWorkflow` per item. Why: a scan is about
throughput over thousands of items. On this project's reference machine the dev server completes
~240-280 activities/s but only ~25-29 child workflows/s, and an activity costs ~3 events (~2 KB)
of the scan's history where a child costs more in the parent and a whole history of its own. The
price: an item's research nodes are not individually durable, so a crash mid-item reruns that one
item's research; the row upsert makes the rerun harmless. Use `ResearchWorkflow` for single
high-value runs where node-level durability matters.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sleuth.activities.errors import unwrap_cause
    from sleuth.activities.scan import ScanActivities
    from sleuth.activities.scan_models import (
        ERROR_TEXT_LIMIT,
        FAILED_LIST_LIMIT,
        ItemFailure,
        ListPageInput,
        RecordFailureInput,
        ResearchItemInput,
        ScanCarry,
        ScanOutcome,
        ScanProgress,
        ScanRequest,
        check_scan_id,
    )
    from sleuth.scans.knowledge import ItemRef


@workflow.defn(name="KnowledgeScanWorkflow")
class KnowledgeScanWorkflow:
    def __init__(self) -> None:
        self._carry = ScanCarry(scan_id="")
        self._in_flight = 0

    @workflow.query
    def progress(self) -> ScanProgress:
        carry = self._carry
        return ScanProgress(
            scan_id=carry.scan_id,
            done=carry.rows_written + carry.skipped + carry.failed_count,
            total=carry.items_total,
            failed=carry.failed_count,
            rows_written=carry.rows_written,
            skipped=carry.skipped,
            in_flight=self._in_flight,
            listing_complete=carry.listing_complete,
            sink=carry.sink_location,
            runs=carry.runs,
        )

    @workflow.run
    async def run(self, request: ScanRequest) -> ScanOutcome:
        if request.carry is not None:
            self._carry = request.carry.model_copy(update={"runs": request.carry.runs + 1})
        else:
            self._carry = ScanCarry(scan_id=request.scan_id or workflow.info().workflow_id)
        carry = self._carry
        try:
            check_scan_id(carry.scan_id)
        except ValueError as exc:
            # The default scan id is the workflow id, which the input model cannot check.
            raise ApplicationError(
                f"scan id {carry.scan_id[:80]!r} refused: {exc}; set `scan_id` in the input",
                type="ConfigError",
                non_retryable=True,
            ) from None
        settings = request.settings
        self._publish_memo()
        item_semaphore = asyncio.Semaphore(request.concurrency)
        running: set[asyncio.Task[None]] = set()

        steps_this_run = 0
        while carry.pending or not carry.listing_complete:
            # Every run takes at least one step, so even a tiny budget makes progress.
            if steps_this_run and self._history_budget_spent(settings.history_event_budget):
                break
            steps_this_run += 1
            if not carry.pending:
                # Pages whose items all have rows already cost events too: list under the budget.
                await self._list_next_page(request)
                continue
            await item_semaphore.acquire()
            item = carry.pending.pop(0)
            task = asyncio.create_task(self._research(request, item, item_semaphore))
            running.add(task)
            task.add_done_callback(running.discard)

        if running:
            await asyncio.gather(*running)
        self._publish_memo()
        if carry.pending or not carry.listing_complete:
            workflow.logger.info(
                "scan %s continues as new after %d events", carry.scan_id, _history_length()
            )
            workflow.continue_as_new(request.model_copy(update={"carry": carry}))
        return ScanOutcome(
            scan_id=carry.scan_id,
            items_total=carry.items_total,
            rows_written=carry.rows_written,
            skipped=carry.skipped,
            failed_count=carry.failed_count,
            failed=carry.failed,
            sink=carry.sink_location,
            runs=carry.runs,
        )

    async def _list_next_page(self, request: ScanRequest) -> None:
        carry = self._carry
        settings = request.settings
        page = await workflow.execute_activity_method(
            ScanActivities.list_page,
            ListPageInput(
                provider=request.provider,
                research=request.research,
                agent=request.agent,
                scan_id=carry.scan_id,
                sink=request.sink,
                cursor=carry.cursor,
                page_size=request.page_size,
            ),
            start_to_close_timeout=timedelta(seconds=settings.list_timeout_seconds),
            heartbeat_timeout=timedelta(seconds=settings.list_heartbeat_seconds),
            retry_policy=RetryPolicy(maximum_attempts=settings.list_max_attempts),
            summary=f"list {request.provider} items after {carry.cursor or 'the start'}",
        )
        carry.pending.extend(page.items)
        carry.items_total += len(page.items) + page.skipped
        carry.skipped += page.skipped
        carry.cursor = page.next_cursor
        carry.listing_complete = page.next_cursor is None
        carry.sink_location = page.sink_location
        self._publish_memo()

    async def _research(
        self, request: ScanRequest, item: ItemRef, item_semaphore: asyncio.Semaphore
    ) -> None:
        carry = self._carry
        settings = request.settings
        self._in_flight += 1
        try:
            await workflow.execute_activity_method(
                ScanActivities.research_item,
                ResearchItemInput(
                    provider=request.provider,
                    research=request.research,
                    agent=request.agent,
                    scan_id=carry.scan_id,
                    sink=request.sink,
                    item=item,
                ),
                start_to_close_timeout=timedelta(seconds=settings.item_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=settings.item_heartbeat_seconds),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=settings.item_initial_retry_seconds),
                    maximum_attempts=settings.item_max_attempts,
                ),
                summary=f"research {item.display} ({request.runner})",
            )
            carry.rows_written += 1
        except ActivityError as failure:
            error = str(unwrap_cause(failure)) or type(unwrap_cause(failure)).__name__
            await workflow.execute_activity_method(
                ScanActivities.record_failure,
                RecordFailureInput(
                    scan_id=carry.scan_id, sink=request.sink, item=item, error=error
                ),
                start_to_close_timeout=timedelta(seconds=settings.record_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=settings.record_heartbeat_seconds),
                summary=f"record failure of {item.display}",
            )
            carry.failed_count += 1
            if len(carry.failed) < FAILED_LIST_LIMIT:
                carry.failed.append(ItemFailure(item=item.id, error=error[:ERROR_TEXT_LIMIT]))
        finally:
            self._in_flight -= 1
            item_semaphore.release()

    def _history_budget_spent(self, budget: int) -> bool:
        return workflow.info().is_continue_as_new_suggested() or _history_length() >= budget

    def _publish_memo(self) -> None:
        progress = self.progress()
        workflow.upsert_memo(
            {
                "scan_id": progress.scan_id,
                "done": progress.done,
                "total": progress.total,
                "failed": progress.failed,
                "listing_complete": progress.listing_complete,
                "sink": progress.sink,
            }
        )


def _history_length() -> int:
    return workflow.info().get_current_history_length()
