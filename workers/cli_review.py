"""`sleuth review RUN_ID`: show what a run waits for a person to decide, and send the decision.

```
sleuth review research-market-1a2b3c               # show it, then ask (in a terminal)
sleuth review research-market-1a2b3c --approve
sleuth review research-market-1a2b3c --revise "Cite the 2024 report only."
sleuth review research-market-1a2b3c --reject "Out of scope."
```

The decision goes to the run's `review` Update; the run's workers answer it, so when none polls
the run's task queue one runs in this process (for `--app`) until the command ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from sleuth.flows.review import PendingReview, ReviewDecision, Verdict
from sleuth.workers.session import Session, add_session_arguments, open_session, workflow_pollers
from sleuth.workers.worker import build_worker

_KEYS: dict[str, Verdict] = {"a": "approve", "r": "revise", "j": "reject"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "review",
        help="show what a run waits for a person to decide, and decide it",
        description=(
            "Show the plan, summary or tool call RUN_ID waits on, then approve, revise (plans "
            "and summaries, with a remark) or reject it. Without a decision option it asks in a "
            "terminal, and only shows what waits otherwise."
        ),
    )
    parser.add_argument("run_id", metavar="RUN_ID", help="the workflow id of the run")
    decision = parser.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve (a tool call: run it)")
    decision.add_argument(
        "--revise", metavar="REMARK", help="send the plan or summary back with this remark"
    )
    decision.add_argument(
        "--reject",
        nargs="?",
        const="",
        metavar="REMARK",
        help="reject: end a research run, or deny a tool call (optional remark)",
    )
    parser.add_argument("--json", action="store_true", help="print the pending review as JSON")
    add_session_arguments(parser)
    parser.set_defaults(func=run_review_command)


async def run_review_command(args: argparse.Namespace) -> int:
    async with open_session(args.app, task_queue=args.task_queue, need_worker=False) as session:
        handle = session.client.get_workflow_handle(args.run_id)
        try:
            description = await handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                print(
                    f"sleuth: no run {args.run_id!r} (list runs with `sleuth runs`)",
                    file=sys.stderr,
                )
                return 2
            raise
        status = description.status.name.lower() if description.status else "unknown"
        if description.status != WorkflowExecutionStatus.RUNNING:
            print(f"nothing waits for review on {args.run_id} (status: {status})")
            return 0
        async with _worker_for(session, description.task_queue):
            pending: PendingReview | None = await handle.query(
                "pending_review",
                result_type=PendingReview | None,  # type: ignore[arg-type]
            )
            if pending is None:
                print(f"nothing waits for review on {args.run_id} (status: {status})")
                return 0
            if args.json:
                print(json.dumps(pending.model_dump(mode="json"), indent=2, ensure_ascii=False))
            else:
                print(format_pending(args.run_id, pending))
            decision = _decision_of(args, pending)
            if decision is None:
                return 0
            return await _send(handle, decision)


def format_pending(run_id: str, pending: PendingReview) -> str:
    """What a person reads before deciding: the subject, then each detail."""
    lines = [
        f"{run_id} waits for review {pending.review_id} ({pending.kind})",
        f"  requested {pending.requested_at:%Y-%m-%d %H:%M:%S} UTC"
        + (f", times out {pending.timeout_at:%Y-%m-%d %H:%M:%S} UTC" if pending.timeout_at else ""),
        f"  {pending.subject}",
        "",
    ]
    for key, value in pending.details.items():
        if isinstance(value, str) and "\n" in value:
            lines += [f"{key}:", *(f"  {line}" for line in value.splitlines()), ""]
        elif isinstance(value, list):
            lines += [f"{key}:", *(f"  - {item}" for item in value or ["(none)"])]
        else:
            shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
            lines.append(f"{key}: {shown}")
    return "\n".join(lines)


def _decision_of(args: argparse.Namespace, pending: PendingReview) -> ReviewDecision | None:
    if args.approve:
        return ReviewDecision(review_id=pending.review_id, decision="approve")
    if args.revise is not None:
        return ReviewDecision(review_id=pending.review_id, decision="revise", remark=args.revise)
    if args.reject is not None:
        remark = args.reject or None
        return ReviewDecision(review_id=pending.review_id, decision="reject", remark=remark)
    if args.json or not sys.stdin.isatty():
        print(
            f"\ndecide with: sleuth review {args.run_id} --approve | --reject [REMARK]"
            + (" | --revise REMARK" if pending.kind != "tool" else ""),
            file=sys.stderr,
        )
        return None
    return _ask(pending)


def _ask(pending: PendingReview) -> ReviewDecision | None:
    choices = "[a]pprove, re[j]ect" + (", [r]evise" if pending.kind != "tool" else "")
    while True:
        answer = input(f"\n{choices}, or Enter to leave it waiting: ").strip().lower()[:1]
        if not answer:
            return None
        verdict = _KEYS.get(answer)
        if verdict is None or (verdict == "revise" and pending.kind == "tool"):
            continue
        remark = input("remark: ").strip() if verdict != "approve" else ""
        if verdict == "revise" and not remark:
            print("a revision needs a remark that says what to change")
            continue
        return ReviewDecision(review_id=pending.review_id, decision=verdict, remark=remark or None)


async def _send(handle: WorkflowHandle[Any, Any], decision: ReviewDecision) -> int:
    try:
        await handle.execute_update("review", decision, result_type=PendingReview)
    except WorkflowUpdateFailedError as exc:
        print(f"sleuth: the run refused the decision: {exc.cause}", file=sys.stderr)
        return 1
    print(f"{decision.decision}: sent to {handle.id} ({decision.review_id})")
    return 0


@contextlib.asynccontextmanager
async def _worker_for(session: Session, task_queue: str) -> AsyncIterator[None]:
    """A worker for the run's task queue while the block runs, unless one polls it already."""
    if await workflow_pollers(session.client, task_queue) > 0:
        yield
        return
    print(
        f"sleuth: no worker polls task queue {task_queue!r} — running one in this process "
        f"for app {session.app.name!r} to deliver the review",
        file=sys.stderr,
        flush=True,
    )
    worker = build_worker(session.client, session.app, task_queue=task_queue)
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        await worker.shutdown()
        with contextlib.suppress(asyncio.CancelledError):
            await task
