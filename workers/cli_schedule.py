"""`sleuth schedule create|list|describe|pause|unpause|trigger|delete`: scans on a timetable."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from temporalio.client import Client, ScheduleOverlapPolicy
from temporalio.service import RPCError, RPCStatusCode

from sleuth.activities.scan_models import ScanRequest
from sleuth.workers.cli_connection import add_connection_arguments
from sleuth.workers.render import PlainTable, terminal_console
from sleuth.workers.schedules import ScheduleSummary, create_scan_schedule, summarize
from sleuth.workers.session import add_session_arguments, open_session


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schedule = subparsers.add_parser(
        "schedule",
        help="run scans on a timetable (Temporal Schedules)",
        description="Create and manage Temporal Schedules that start knowledge scans.",
    )
    actions = schedule.add_subparsers(dest="schedule_command", metavar="ACTION", required=True)

    create = actions.add_parser(
        "create",
        help="create a schedule that starts a scan",
        description=(
            "Create schedule NAME starting KnowledgeScanWorkflow over PROVIDER on a cron "
            "timetable. A run that comes due while the previous one still runs is skipped."
        ),
    )
    create.add_argument("name", metavar="NAME")
    create.add_argument("--scan", required=True, metavar="PROVIDER", help="provider to scan")
    create.add_argument("--cron", required=True, help='five cron fields, e.g. "0 2 * * *"')
    create.add_argument("--timezone", help="IANA time zone of the cron fields (default UTC)")
    create.add_argument("--research", default="default", help="research config per item")
    create.add_argument("--concurrency", type=int, default=8, help="items researched at once")
    create.add_argument(
        "--sink",
        metavar="NAME",
        help="the sink rows go to, by name (default: rows, $SLEUTH_HOME/rows.sqlite)",
    )
    create.add_argument("--json", action="store_true", help="print the new schedule as JSON")
    add_session_arguments(create)
    create.set_defaults(func=create_command)

    listing = actions.add_parser("list", help="list schedules")
    listing.add_argument("--json", action="store_true", help="print the schedules as JSON")
    add_connection_arguments(listing)
    listing.set_defaults(func=list_command)

    for action, help_text in [
        ("describe", "show a schedule: timetable, next runs, recent scans"),
        ("pause", "stop a schedule from starting scans"),
        ("unpause", "let a paused schedule start scans again"),
        ("trigger", "start a scan of the schedule now"),
        ("delete", "delete a schedule (scans it started keep running)"),
    ]:
        parser = actions.add_parser(action, help=help_text)
        parser.add_argument("name", metavar="NAME")
        if action in {"pause", "unpause"}:
            parser.add_argument("--note", help="why (shown by describe and in the Web UI)")
        if action == "describe":
            parser.add_argument("--json", action="store_true", help="print the schedule as JSON")
        add_connection_arguments(parser)
        parser.set_defaults(func=manage_command)


async def create_command(args: argparse.Namespace) -> int:
    request = ScanRequest(
        provider=args.scan, research=args.research, concurrency=args.concurrency, sink=args.sink
    )
    # A worker is not needed to create a schedule; the App is loaded only if --app is given.
    async with open_session(args.app, task_queue=args.task_queue, need_worker=False) as session:
        try:
            await create_scan_schedule(
                session.client,
                args.name,
                request,
                cron=args.cron,
                task_queue=session.task_queue,
                timezone=args.timezone,
            )
        except RPCError as exc:
            if exc.status == RPCStatusCode.ALREADY_EXISTS:
                print(
                    f"sleuth: schedule {args.name!r} already exists; delete it first "
                    f"(sleuth schedule delete {args.name}) or pick another name",
                    file=sys.stderr,
                )
                return 1
            raise
        zone = args.timezone or "UTC"
        if args.json:
            created = {
                "name": args.name,
                "provider": args.scan,
                "research": args.research,
                "cron": args.cron,
                "timezone": zone,
                "task_queue": session.task_queue,
            }
            print(json.dumps(created, indent=2))
            return 0
        print(
            f"schedule {args.name!r} created: scans {args.scan!r} with {args.research!r} at "
            f"{args.cron!r} ({zone}) on task queue {session.task_queue!r}; overlapping runs "
            "are skipped"
        )
        print(f"run it now with: sleuth schedule trigger {args.name}")
    return 0


async def list_command(args: argparse.Namespace) -> int:
    async with open_session(None, need_worker=False) as session:
        names = [entry.id async for entry in await session.client.list_schedules()]
        if args.json:
            summaries = [
                summary_document(
                    summarize(name, await session.client.get_schedule_handle(name).describe())
                )
                for name in sorted(names)
            ]
            print(json.dumps(summaries, indent=2))
            return 0
        if not names:
            print(
                "no schedules; create one with: sleuth schedule create NAME --scan PROVIDER "
                '--cron "0 2 * * *"'
            )
            return 0
        table = PlainTable(("NAME", "STATE", "NEXT RUN", "NOTE"), status_column=1)
        for name in sorted(names):
            summary = summarize(name, await session.client.get_schedule_handle(name).describe())
            state = "paused" if summary.paused else "active"
            next_run = summary.next_runs[0].isoformat() if summary.next_runs else "-"
            table.add(name, state, next_run, summary.note)
        console = terminal_console(sys.stdout)
        if console is not None:
            console.print(table.rich())
        else:
            for name, state, next_run, note in table.rows:
                print(f"{name}  {state}  next: {next_run}  {note}")
    return 0


async def manage_command(args: argparse.Namespace) -> int:
    async with open_session(None, need_worker=False) as session:
        try:
            return await _manage(session.client, args)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                print(
                    f"sleuth: no schedule named {args.name!r}; see: sleuth schedule list",
                    file=sys.stderr,
                )
                return 1
            raise


async def _manage(client: Client, args: argparse.Namespace) -> int:
    handle = client.get_schedule_handle(args.name)
    action = args.schedule_command
    if action == "describe":
        summary = summarize(args.name, await handle.describe())
        if args.json:
            print(json.dumps(summary_document(summary), indent=2))
            return 0
        print(f"schedule:  {summary.name} ({'paused' if summary.paused else 'active'})")
        print(f"note:      {summary.note}")
        print(f"timetable: {', '.join(summary.cron) or '(calendar spec)'} in {summary.timezone}")
        print(f"starts:    {summary.workflow_type}")
        for when in summary.next_runs:
            print(f"next run:  {when.isoformat()}")
        for workflow_id in summary.recent_workflow_ids:
            print(f"recent:    {workflow_id}")
        for workflow_id in summary.running_workflow_ids:
            print(f"running:   {workflow_id}")
    elif action == "pause":
        await handle.pause(note=args.note or "paused with sleuth schedule pause")
        print(f"schedule {args.name!r} paused")
    elif action == "unpause":
        await handle.unpause(note=args.note or "unpaused with sleuth schedule unpause")
        print(f"schedule {args.name!r} unpaused")
    elif action == "trigger":
        # Follow the schedule's own policy: a trigger during a running scan is skipped too.
        await handle.trigger(overlap=ScheduleOverlapPolicy.SKIP)
        print(
            f"schedule {args.name!r} triggered; see it with: sleuth schedule describe {args.name}"
        )
    elif action == "delete":
        await handle.delete()
        print(f"schedule {args.name!r} deleted")
    return 0


def summary_document(summary: ScheduleSummary) -> dict[str, Any]:
    """A schedule's summary as JSON data (times in ISO 8601)."""
    document = dataclasses.asdict(summary)
    document["next_runs"] = [when.isoformat() for when in summary.next_runs]
    return document
