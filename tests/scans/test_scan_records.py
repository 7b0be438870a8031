"""Scan bookkeeping at the edges: a late failure never replaces a written row; pages stay small."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from temporalio.testing import ActivityEnvironment

from sleuth.activities.scan import ScanActivities
from sleuth.activities.scan_models import MAX_PAGE_SIZE, RecordFailureInput, ScanRequest
from sleuth.scans.knowledge import ItemRef
from sleuth.scans.sinks import SQLiteRowSink, ok_record
from tests.helpers.apps.scan_app import build_app


async def test_a_failure_recorded_after_the_row_was_written_keeps_the_row() -> None:
    sink = SQLiteRowSink()
    sink.put(ok_record("scan-late", "item-00001", "item 1", {"answer": 42}))
    activities = ScanActivities(build_app(3))
    item = ItemRef(id="item-00001", label="item 1", provider="numbers")

    await ActivityEnvironment().run(
        activities.record_failure,
        RecordFailureInput(scan_id="scan-late", sink=None, item=item, error="timed out"),
    )

    [record] = sink.records("scan-late")
    assert (record.status, record.data) == ("ok", {"answer": 42})


async def test_a_failure_without_a_row_is_recorded() -> None:
    activities = ScanActivities(build_app(3))
    item = ItemRef(id="item-00002", label="item 2", provider="numbers")

    await ActivityEnvironment().run(
        activities.record_failure,
        RecordFailureInput(scan_id="scan-fail", sink=None, item=item, error="model refused"),
    )

    [record] = SQLiteRowSink().records("scan-fail")
    assert (record.status, record.error) == ("failed", "model refused")


def test_listing_pages_are_bounded() -> None:
    ScanRequest(provider="numbers", page_size=MAX_PAGE_SIZE)
    with pytest.raises(ValidationError, match="page_size"):
        ScanRequest(provider="numbers", page_size=MAX_PAGE_SIZE + 1)
