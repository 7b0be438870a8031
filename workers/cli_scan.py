"""`sleuth scan PROVIDER` starts a knowledge scan; `sleuth rows SCAN_ID` prints what it wrote."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from typing import Any, TextIO

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError

from sleuth.activities.errors import unwrap_cause
from sleuth.activities.scan_models import ScanOutcome, ScanProgress, ScanRequest
from sleuth.runtime.paths import sleuth_home, workflow_link
from sleuth.runtime.redact import redact
from sleuth.runtime.settings import DEFAULT_SINK, SINKS_ENV
from sleuth.scans.sinks import (
    RowRecord,
    RowSink,
    configured_sink_urls,
    sink_for_name,
)
from sleuth.workers.render import PlainTable, progress_bar, terminal_console
from sleuth.workers.scans import start_scan
from sleuth.workers.session import add_session_arguments, cli_app, open_session
from sleuth.workflows.scan import KnowledgeScanWorkflow

POLL_SECONDS = 0.5
BAR_WIDTH = 30


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scan = subparsers.add_parser(
        "scan",
        help="research every item of a knowledge provider",
        description=(
            "Start KnowledgeScanWorkflow over the items of PROVIDER (a name registered with "
            "app.provider). Each item gets a research run (or, with --agent, an agent run) and "
            "one row in the sink."
        ),
    )
    scan.add_argument("provider", metavar="PROVIDER", help="a provider registered in the App")
    runner = scan.add_mutually_exclusive_group()
    runner.add_argument("--research", help="research config per item (default: 'default')")
    runner.add_argument("--agent", help="an agent registered with app.agent, run once per item")
    scan.add_argument(
        "--scan-id",
        help="rows are keyed by scan id; reusing one skips items that already have a row "
        "(default: PROVIDER-<random>)",
    )
    scan.add_argument("--concurrency", type=int, default=8, help="items researched at once")
    scan.add_argument("--page-size", type=int, default=100, help="items listed per page")
    scan.add_argument(
        "--sink",
        metavar="NAME",
        help="the sink rows go to: a name the worker has (app.sink, $SLEUTH_SINKS or "
        f"`sleuth worker --sink NAME=URL`); default {DEFAULT_SINK!r}, $SLEUTH_HOME/rows.sqlite",
    )
    scan.add_argument(
        "--follow", action="store_true", help="show a progress bar until the scan ends"
    )
    scan.add_argument(
        "--json",
        action="store_true",
        help="print the outcome as JSON (without --follow and with a worker running: the "
        "started scan's ids); progress goes to stderr",
    )
    add_session_arguments(scan)
    scan.set_defaults(func=run_scan_command)

    rows = subparsers.add_parser(
        "rows",
        help="print the rows of a scan",
        description="Print every row (and recorded failure) a scan wrote, as a table or JSON.",
    )
    rows.add_argument("scan_id", metavar="SCAN_ID")
    rows.add_argument("--json", action="store_true", help="print JSON lines, one per item")
    rows.add_argument(
        "--sink",
        metavar="NAME",
        help=f"the sink the scan wrote to, by name (default {DEFAULT_SINK!r}: "
        "$SLEUTH_HOME/rows.sqlite)",
    )
    rows.add_argument(
        "--app", metavar="PKG.MODULE:APP", help="the App, when --sink names a sink it registers"
    )
    rows.set_defaults(func=run_rows_command)


async def run_scan_command(args: argparse.Namespace) -> int:
    scan_id = args.scan_id or f"{args.provider}-{uuid.uuid4().hex[:8]}"
    request = ScanRequest(
        provider=args.provider,
        research=args.research,
        agent=args.agent,
        scan_id=scan_id,
        concurrency=args.concurrency,
        page_size=args.page_size,
        sink=args.sink,
    )
    async with open_session(args.app, task_queue=args.task_queue) as session:
        try:
            handle = await start_scan(session.client, request, task_queue=session.task_queue)
        except WorkflowAlreadyStartedError:
            print(
                f"sleuth: scan {scan_id!r} is already running; wait for it to end or pick "
                "another --scan-id",
                file=sys.stderr,
            )
            return 1
        # With --json, stdout holds the JSON document alone; the lines for a person go to stderr.
        say = sys.stderr if args.json else sys.stdout
        print(f"scan {scan_id!r} started: {workflow_link(handle.id)}", file=say)
        follow = args.follow
        if session.started_worker and not follow:
            print(
                "no separate worker is running, so this command follows the scan until it ends "
                "(start `sleuth worker` to let scans run in the background)",
                file=say,
            )
            follow = True
        if not follow:
            print(
                f"rows go to {sink_description(args.sink)}; print them with: sleuth rows {scan_id}",
                file=say,
            )
            if args.json:
                started = {"scan_id": scan_id, "workflow_id": handle.id, "status": "started"}
                print(json.dumps(started))
            return 0
        try:
            outcome = await follow_scan(handle, sys.stderr)
        except WorkflowFailureError as exc:
            print(
                f"sleuth: scan {scan_id!r} failed: {redact(str(unwrap_cause(exc)))}",
                file=sys.stderr,
            )
            return 1
    if args.json:
        print(outcome.model_dump_json(indent=2))
    else:
        print_outcome(outcome, args.sink, sys.stdout)
    return 0


async def follow_scan(
    handle: WorkflowHandle[KnowledgeScanWorkflow, ScanOutcome], out: TextIO
) -> ScanOutcome:
    """Show the `progress` query until the scan returns: a rich progress bar on a terminal (the
    final count stays), a line every few seconds and the final count in logs and pipes."""
    result = asyncio.ensure_future(handle.result())
    last_line, last_print = "", 0.0
    with progress_bar(out, "scan") as bar:
        while True:
            finished = result.done()
            try:
                progress: ScanProgress | None = await handle.query(KnowledgeScanWorkflow.progress)
            except Exception:
                # Between runs of the continue-as-new chain a query can miss; the next poll answers.
                progress = None
            if progress is not None:
                line = progress_line(progress)
                if bar is not None:
                    total = max(progress.total, progress.done)
                    bar.update(
                        completed=progress.done,
                        total=total if progress.listing_complete else None,
                        detail=f"{progress.failed} failed, {progress.in_flight} running",
                    )
                elif finished or (line != last_line and time.monotonic() - last_print > 5):
                    out.write(line + "\n")
                    last_print = time.monotonic()
                last_line = line
            if finished:
                break
            await asyncio.wait({result}, timeout=POLL_SECONDS)
    if bar is not None and last_line:
        out.write(last_line + "\n")  # the bar goes; the final count stays on the screen
    return result.result()


def progress_line(progress: ScanProgress) -> str:
    total = max(progress.total, progress.done)
    filled = int(BAR_WIDTH * progress.done / total) if total else 0
    bar = "#" * filled + "-" * (BAR_WIDTH - filled)
    of_total = f"{total}" if progress.listing_complete else f"{total}+ (listing)"
    return (
        f"[{bar}] {progress.done}/{of_total} done, {progress.failed} failed, "
        f"{progress.in_flight} running"
    )


def sink_description(name: str | None) -> str:
    """Where a sink name puts rows, as a worker with this environment resolves it (without
    opening the sink)."""
    name = name or DEFAULT_SINK
    configured = configured_sink_urls()
    if name in configured:
        return f"{redact(configured[name])} (sink {name!r} in ${SINKS_ENV})"
    if name == DEFAULT_SINK:
        return f"{sleuth_home() / 'rows.sqlite'} (the worker's $SLEUTH_HOME)"
    return f"the sink the worker's App registered as {name!r}"


def print_outcome(outcome: ScanOutcome, sink_spec: str | None, out: TextIO) -> None:
    out.write(
        f"scan {outcome.scan_id!r} finished: {outcome.items_total} items, "
        f"{outcome.rows_written} researched, {outcome.skipped} already had rows, "
        f"{outcome.failed_count} failed\n"
    )
    for failure in outcome.failed:
        out.write(f"  failed: {failure.item}: {redact(failure.error)}\n")
    if outcome.failed_count > len(outcome.failed):
        out.write(f"  ... and {outcome.failed_count - len(outcome.failed)} more failures\n")
    sink_option = f" --sink {sink_spec}" if sink_spec else ""
    out.write(f"rows are in {outcome.sink}; print them with: sleuth rows {outcome.scan_id}")
    out.write(f"{sink_option}\n")


def run_rows_command(args: argparse.Namespace) -> int:
    sink = resolve_sink(args.sink, args.app)
    records = sink.records(args.scan_id)
    if not records:
        print(
            f"sleuth: no rows for scan {args.scan_id!r} in {sink.location}; check the scan id "
            "(and --sink if the scan wrote elsewhere)",
            file=sys.stderr,
        )
        return 1
    if args.json:
        for record in records:
            if record.error:
                record = record.model_copy(update={"error": redact(record.error)})
            print(record.model_dump_json())
    else:
        print_table(records, sys.stdout)
    return 0


def resolve_sink(name: str | None, app_target: str | None) -> RowSink:
    """The sink `name` means here: registered in `--app`, configured in `$SLEUTH_SINKS`, or the
    default."""
    registered: dict[str, RowSink] = {}
    if app_target:
        app = cli_app(app_target)
        registered = {n: app.get_sink(n) for n in app.sink_names}
    return sink_for_name(name, registered=registered)


def print_table(records: list[RowRecord], out: TextIO, width: int = 100) -> None:
    """One line per item: id, status, and the row's fields (or the error), cut to fit; on a
    terminal a rich table that wraps long rows instead."""
    failed = sum(1 for r in records if r.status == "failed")
    summary = f"{len(records)} items, {len(records) - failed} rows, {failed} failed\n"
    console = terminal_console(out)
    if console is not None:
        table = PlainTable(("ITEM", "STATUS", "DATA"), status_column=1)
        for record in records:
            detail = redact(record.error) if record.error else _compact(record.data)
            table.add(record.item_id, record.status, detail)
        console.print(table.rich())
        out.write(summary)
        return
    id_width = min(max(len(r.item_id) for r in records), 40)
    out.write(f"{'ITEM':<{id_width}}  {'STATUS':<6}  DATA\n")
    for record in records:
        detail = redact(record.error) if record.error else _compact(record.data)
        room = max(width - id_width - 10, 20)
        if len(detail) > room:
            detail = detail[: room - 1] + "…"
        out.write(f"{record.item_id[:id_width]:<{id_width}}  {record.status:<6}  {detail}\n")
    out.write(summary)


def _compact(data: dict[str, Any]) -> str:
    parts = []
    for key, value in data.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={' '.join(str(shown).split())}")
    return "; ".join(parts)
