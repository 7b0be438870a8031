"""KnowledgeScanWorkflow against the dev server, with the worker in this process."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.scan_models import ScanOutcome, ScanProgress, ScanRequest, ScanSettings
from sleuth.scans.sinks import SQLiteRowSink, open_sink_url
from sleuth.workers.worker import build_worker
from sleuth.workflows import KnowledgeScanWorkflow
from tests.helpers.apps.scan_app import build_app

FAST_RETRIES = ScanSettings(item_initial_retry_seconds=0.05, item_max_attempts=2)


async def run_scan(
    env: WorkflowEnvironment, app, request: ScanRequest
) -> tuple[ScanOutcome, ScanProgress, dict]:
    """Run a scan to its end; also return its final `progress` query answer and memo."""
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        handle = await env.client.start_workflow(
            KnowledgeScanWorkflow.run, request, id=f"scan-{uuid.uuid4()}", task_queue=task_queue
        )
        outcome = await handle.result()
        progress = await handle.query(KnowledgeScanWorkflow.progress)
    memo = await (await handle.describe()).memo()
    return outcome, progress, memo


async def test_every_item_gets_one_row_or_one_recorded_failure(dev_env: WorkflowEnvironment):
    failing = frozenset({"item-00004", "item-00017"})
    app = build_app(30, failing)
    settings = FAST_RETRIES.model_copy(update={"history_event_budget": 60})
    request = ScanRequest(
        provider="numbers", scan_id="scan-a", concurrency=4, page_size=7, settings=settings
    )

    outcome, progress, memo = await run_scan(dev_env, app, request)

    assert (outcome.items_total, outcome.rows_written, outcome.failed_count) == (30, 28, 2)
    assert {f.item for f in outcome.failed} == failing
    assert all("refuses this item" in f.error for f in outcome.failed)
    assert outcome.runs > 1, "a 60-event budget must force continue-as-new"
    records = SQLiteRowSink().records("scan-a")
    assert outcome.sink == str(SQLiteRowSink().path)
    assert [r.item_id for r in records] == [f"item-{n:05d}" for n in range(30)]
    assert {r.item_id for r in records if r.status == "failed"} == failing
    ok = next(r for r in records if r.item_id == "item-00003")
    assert ok.label == "item number 3"
    assert "item-00003" in ok.data["summary"]

    assert isinstance(progress, ScanProgress)
    assert (progress.done, progress.total, progress.failed) == (30, 30, 2)
    assert progress.listing_complete
    assert (memo["done"], memo["total"], memo["failed"]) == (30, 30, 2)


async def test_rerunning_a_scan_id_skips_items_that_have_rows(dev_env: WorkflowEnvironment):
    failing = frozenset({"item-00002"})
    request = ScanRequest(provider="numbers", scan_id="scan-b", page_size=5, settings=FAST_RETRIES)
    first, _, _ = await run_scan(dev_env, build_app(12, failing), request)
    assert (first.rows_written, first.failed_count, first.skipped) == (11, 1, 0)

    # The inventory grew by three items and the failing item now works. A tiny history budget
    # makes the rerun continue as new even while it only lists pages of done items.
    tiny_budget = FAST_RETRIES.model_copy(update={"history_event_budget": 10})
    rerun = request.model_copy(update={"settings": tiny_budget})
    second, _, _ = await run_scan(dev_env, build_app(15), rerun)

    assert (second.items_total, second.skipped, second.rows_written, second.failed_count) == (
        15,
        11,
        4,
        0,
    )
    assert second.runs >= 3
    records = SQLiteRowSink().records("scan-b")
    assert len(records) == 15 and all(r.status == "ok" for r in records)


@pytest.mark.parametrize("kind", ["jsonl", "opensearch"])
async def test_rows_can_go_to_sinks_the_worker_configures(
    dev_env: WorkflowEnvironment, sleuth_home, monkeypatch, request, kind
):
    if kind == "jsonl":
        url = f"jsonl://{sleuth_home}/exports/rows.jsonl"
    else:
        # osmem-server: an in-memory OpenSearch-compatible server (its pytest plugin, from PyPI).
        host = request.getfixturevalue("osmem_clone").url.split("://", 1)[1]
        url = f"opensearch://{host}/scan-rows"
    monkeypatch.setenv("SLEUTH_SINKS", f"other=jsonl://{sleuth_home}/other.jsonl,export={url}")
    scan = ScanRequest(provider="numbers", scan_id="scan-c", sink="export")
    outcome, _, _ = await run_scan(dev_env, build_app(9), scan)
    assert outcome.sink == open_sink_url(url).location
    assert [r.item_id for r in open_sink_url(url).records("scan-c")] == [
        f"item-{n:05d}" for n in range(9)
    ]
    assert SQLiteRowSink().records("scan-c") == [], "nothing went to the default sink"


async def test_unknown_names_fail_the_scan_at_once(dev_env: WorkflowEnvironment):
    for request, expected in [
        (ScanRequest(provider="nope"), "unknown provider 'nope'; registered: numbers"),
        (
            ScanRequest(provider="numbers", research="nope"),
            "unknown research config 'nope'; registered: default",
        ),
        (ScanRequest(provider="numbers", sink="elsewhere"), "unknown sink 'elsewhere'"),
    ]:
        with pytest.raises(WorkflowFailureError) as failure:
            await run_scan(dev_env, build_app(3), request)
        assert expected in str(failure.value.cause)
