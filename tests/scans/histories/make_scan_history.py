"""Regenerate `scan_first_run.json` and `scan_last_run.json`: a 12-item KnowledgeScanWorkflow with
one failing item and a tiny history budget, so its first run ends in continue-as-new and its last
run starts from the carried cursor and counters. Run from the repository root:

    python tests/scans/histories/make_scan_history.py

Only regenerate them on purpose: the replay test exists to catch workflow changes that would break
scans already in flight.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT)]


from sleuth.activities.scan_models import ScanRequest, ScanSettings  # noqa: E402
from sleuth.workers.scans import run_chain, start_scan  # noqa: E402
from tests.helpers.apps.scan_app import build_app  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_test_server  # noqa: E402

FIRST = Path(__file__).with_name("scan_first_run.json")
LAST = Path(__file__).with_name("scan_last_run.json")


async def record() -> None:
    app = build_app(12, frozenset({"item-00006"}))
    settings = ScanSettings(
        history_event_budget=40, item_initial_retry_seconds=0.05, item_max_attempts=2
    )
    request = ScanRequest(
        provider="numbers", scan_id="replay", concurrency=3, page_size=5, settings=settings
    )
    async with worker_on_test_server(app) as (client, task_queue):
        handle = await start_scan(client, request, task_queue=task_queue)
        outcome = await handle.result()
        chain = await run_chain(client, handle.id)
        assert len(chain) >= 2, "the scan did not continue as new; lower the budget"
        for path, run in ((FIRST, chain[0]), (LAST, chain[-1])):
            await save_history(client.get_workflow_handle(handle.id, run_id=run.run_id), path)
    print(
        f"wrote {FIRST.name} and {LAST.name} ({len(chain)} runs; {outcome.rows_written} rows, "
        f"{outcome.failed_count} failed)"
    )


if __name__ == "__main__":
    run_script(record)
