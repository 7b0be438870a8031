"""`sleuth runs`: recent runs as a table, filtered by Sleuth's search attributes.

```
sleuth runs                         # the 20 most recent runs
sleuth runs --ungrounded --since 24h
sleuth runs --research market-report --json
sleuth runs --awaiting-review
```

Each row comes from the run's search attributes (`sleuth.activities.attributes`), or from its memo on
a namespace without them (filters other than `--since` need them: `sleuth setup`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from sleuth.activities.attributes import (
    COST_USD,
    END_REASON,
    GROUNDING_SCORE,
    REPLAN_COUNT,
    RESEARCH,
    RESEARCH_STATUS,
    REVIEW_STATE,
    TOTAL_TOKENS,
)
from sleuth.usage.pricing import usd
from sleuth.workers.cli_connection import add_connection_arguments
from sleuth.workers.embedded import connect_temporal

KINDS = {
    "ResearchWorkflow": "research",
    "AgentWorkflow": "agent",
    "DecomposeWorkflow": "decompose",
    "PipelineWorkflow": "pipeline",
    "KnowledgeScanWorkflow": "scan",
}
"""Sleuth's workflow types and the kind `sleuth runs` shows for each."""
MAX_LIMIT = 1000
_SINCE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "runs",
        help="list recent runs: status, grounding, replans, tokens, cost",
        description=(
            "List recent Sleuth runs, newest first, with their grounding score, replans, tokens "
            "and cost. Filters use Sleuth's search attributes (register them once per namespace "
            "with `sleuth setup`; the embedded server has them)."
        ),
    )
    parser.add_argument(
        "--ungrounded",
        action="store_true",
        help="only research runs whose final summary missed the grounding threshold",
    )
    parser.add_argument(
        "--since", metavar="WHEN", help="only runs started since: 30m, 24h, 7d, 2w or a date"
    )
    parser.add_argument("--research", metavar="NAME", help="only runs of this research config")
    parser.add_argument(
        "--awaiting-review", action="store_true", help="only runs waiting for a person's decision"
    )
    parser.add_argument(
        "--limit", type=int, default=20, metavar="N", help="at most N runs (default: %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    add_connection_arguments(parser)
    parser.set_defaults(func=run_runs_command)


@dataclass
class RunRow:
    """One run as `sleuth runs` shows it."""

    id: str
    kind: str
    status: str
    started: datetime | None
    duration_seconds: float | None
    grounding_score: float | None
    replans: int | None
    tokens: int | None
    cost_usd: float | None
    name: str | None
    """The research config or agent the run executes."""
    end_reason: str | None
    review_state: str | None
    result: str | None = None
    """A research run's end state (`grounded`, `partial`, `not_found`) once it is done."""
    evaluations: int | None = None
    """Drafts judged so far: the grounding score is the last one's while the run goes on, and the
    final report's once it is done."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["started"] = self.started.isoformat() if self.started else None
        return data


def parse_since(text: str, now: datetime) -> datetime:
    """`30m`, `24h`, `7d`, `2w` before `now`, or an ISO date/time (UTC unless it says)."""
    match = _SINCE.match(text.strip().lower())
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: give an age (30m, 24h, 7d, 2w) or a date (2025-06-01, "
            "2025-06-01T09:00)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def build_query(
    *,
    ungrounded: bool = False,
    since: datetime | None = None,
    research: str | None = None,
    awaiting_review: bool = False,
) -> str:
    """The visibility query for the filters (Sleuth's workflow types only)."""
    types = ", ".join(f"'{name}'" for name in KINDS)
    clauses = [f"WorkflowType IN ({types})"]
    if research is not None:
        if not research or any(c in research for c in "'\"\\"):
            raise ValueError(f"--research {research!r}: give a research config name (no quotes)")
        clauses.append(f"SleuthResearch = '{research}'")
    if ungrounded:
        clauses.append("SleuthGrounded = false")
    if awaiting_review:
        clauses.append("SleuthReviewState = 'awaiting'")
    if since is not None:
        clauses.append(f"StartTime >= '{since.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}'")
    return " AND ".join(clauses)


async def list_runs(client: Client, query: str, limit: int) -> list[RunRow]:
    """The runs `query` matches, newest first, at most `limit`."""
    rows = [await _row(execution) async for execution in client.list_workflows(query, limit=limit)]
    return sorted(rows, key=lambda r: r.started or datetime.min.replace(tzinfo=UTC), reverse=True)


async def _row(execution: WorkflowExecution) -> RunRow:
    attributes = execution.typed_search_attributes
    memo = await execution.memo()

    def pick(key: Any, memo_key: str) -> Any:
        value = attributes.get(key)
        return memo.get(memo_key) if value is None else value

    review_state = attributes.get(REVIEW_STATE)
    status = _status(execution.status)
    if status == "running" and (
        review_state == "awaiting" or memo.get("status") == "awaiting review"
    ):
        status = "awaiting review"
    end = execution.close_time or datetime.now(UTC)
    return RunRow(
        id=execution.id,
        kind=KINDS.get(execution.workflow_type, execution.workflow_type),
        status=status,
        started=execution.start_time,
        duration_seconds=(end - execution.start_time).total_seconds()
        if execution.start_time
        else None,
        grounding_score=_grounding(attributes.get(GROUNDING_SCORE), memo),
        replans=pick(REPLAN_COUNT, "replan_count"),
        tokens=pick(TOTAL_TOKENS, "total_tokens"),
        cost_usd=pick(COST_USD, "cost_usd"),
        name=attributes.get(RESEARCH) or memo.get("research") or memo.get("agent"),
        end_reason=pick(END_REASON, "end_reason") or memo.get("stop_reason"),
        review_state=review_state,
        result=pick(RESEARCH_STATUS, "research_status"),
        evaluations=memo.get("evaluations"),
    )


def _grounding(attribute: float | None, memo: Mapping[str, Any]) -> float | None:
    """The grounding score to show: the memo's (the last draft judged while the run goes on, the
    final report's once it is done; the workflow rewrites it after every node), else the
    attribute (runs that wrote no memo)."""
    value = memo.get("grounding_score")
    return float(value) if isinstance(value, int | float) else attribute


def _status(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower() if status is not None else "unknown"


def format_table(rows: list[RunRow]) -> str:
    """The runs as an aligned text table."""
    header = (
        "ID",
        "KIND",
        "STATUS",
        "STARTED",
        "DURATION",
        "GROUNDING",
        "RESULT",
        "REPLANS",
        "TOKENS",
        "COST",
    )
    body = [
        (
            row.id,
            row.kind,
            row.status,
            row.started.astimezone().strftime("%Y-%m-%d %H:%M") if row.started else "-",
            _duration(row.duration_seconds),
            _grounding_cell(row),
            row.result or "-",
            str(row.replans) if row.replans is not None else "-",
            f"{row.tokens:,}" if row.tokens is not None else "-",
            usd(row.cost_usd) if row.cost_usd is not None else "-",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    )


def _grounding_cell(row: RunRow) -> str:
    """`62%`, with the draft it is for while a research run is judging drafts (`62% #2`)."""
    if row.grounding_score is None:
        return "-"
    cell = f"{row.grounding_score:.0%}"
    if row.status != "completed" and row.evaluations:
        cell += f" #{row.evaluations}"
    return cell


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


async def run_runs_command(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_LIMIT:
        print(f"sleuth: --limit must be 1 to {MAX_LIMIT}, not {args.limit}", file=sys.stderr)
        return 2
    try:
        since = parse_since(args.since, datetime.now(UTC)) if args.since else None
        query = build_query(
            ungrounded=args.ungrounded,
            since=since,
            research=args.research,
            awaiting_review=args.awaiting_review,
        )
    except ValueError as exc:
        print(f"sleuth: {exc}", file=sys.stderr)
        return 2
    client = await connect_temporal(namespace=args.namespace)
    try:
        rows = await list_runs(client, query, args.limit)
    except RPCError as exc:
        if exc.status == RPCStatusCode.INVALID_ARGUMENT and "Sleuth" in exc.message:
            print(
                f"sleuth: namespace {client.namespace!r} lacks Sleuth's search attributes these "
                f"filters use ({exc.message}); register them with `sleuth setup`",
                file=sys.stderr,
            )
            return 1
        raise
    if args.json:
        print(json.dumps([row.to_json() for row in rows], indent=2))
    elif rows:
        print(format_table(rows))
    else:
        print("no runs match")
    return 0
