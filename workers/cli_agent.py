"""`sleuth agent NAME "prompt"`: run a registered agent durably and print its answer."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import TextIO

from temporalio.client import WorkflowFailureError, WorkflowHandle

from sleuth.activities.agent_models import AgentOutcome, AgentProgress, AgentRequest
from sleuth.activities.errors import unwrap_cause
from sleuth.runtime.paths import workflow_link
from sleuth.workers.cli_events import showing_events
from sleuth.workers.session import add_session_arguments, open_session
from sleuth.workflows.agent import AgentWorkflow

POLL_SECONDS = 0.5


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "agent",
        help="run a registered agent durably",
        description=(
            "Start AgentWorkflow for NAME (an agent registered with app.agent) on PROMPT and wait "
            "for its answer. Every model turn, tool call and subagent dispatch is its own activity."
        ),
    )
    parser.add_argument("name", metavar="NAME", help="an agent registered in the App")
    parser.add_argument("prompt", metavar="PROMPT", help="the task")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="do not show the steps and events while the agent works",
    )
    add_session_arguments(parser)
    parser.set_defaults(func=run_agent_command)


async def run_agent_command(args: argparse.Namespace) -> int:
    # Logs of the in-process worker go to stderr, so `--json` output stays parseable.
    async with open_session(args.app, task_queue=args.task_queue) as session:
        if args.app is not None and args.name not in session.app.agent_names:
            registered = ", ".join(session.app.agent_names) or "none"
            print(
                f"sleuth: unknown agent {args.name!r}; registered: {registered} "
                "(register one with app.agent(name, factory))",
                file=sys.stderr,
            )
            return 2
        handle = await session.client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent=args.name, prompt=args.prompt),
            id=f"agent-{args.name}-{uuid.uuid4().hex[:8]}",
            task_queue=session.task_queue,
        )
        print(f"agent {args.name!r} started: {workflow_link(handle.id)}", file=sys.stderr)
        out = None if args.quiet or args.json else sys.stderr
        try:
            async with showing_events(session.client, handle.id, out):
                outcome = await follow(handle, out)
        except WorkflowFailureError as exc:
            print(f"sleuth: agent {args.name!r} failed: {unwrap_cause(exc)}", file=sys.stderr)
            return 1
    if args.json:
        print(outcome.model_dump_json(indent=2))
    else:
        print_outcome(outcome, sys.stdout)
    return 0


async def follow(
    handle: WorkflowHandle[AgentWorkflow, AgentOutcome], out: TextIO | None
) -> AgentOutcome:
    """Wait for the result, writing the step in progress (from the `progress` query) to `out`.

    Steps shorter than the poll interval are not shown; the Web UI lists every one.
    """
    result = asyncio.ensure_future(handle.result())
    last_shown: tuple[int, str] | None = None
    while not result.done():
        if out is not None:
            try:
                progress: AgentProgress | None = await handle.query(AgentWorkflow.progress)
            except Exception:
                # A query can miss while the workflow task moves between workers; poll again.
                progress = None
            if progress is not None and progress.status == "running":
                current = (progress.steps_run, progress.step_summary)
                if current != last_shown:
                    out.write(f"  step {progress.steps_run + 1}: {progress.step_summary}\n")
                    out.flush()
                    last_shown = current
        await asyncio.wait({result}, timeout=POLL_SECONDS)
    return result.result()


def print_outcome(outcome: AgentOutcome, out: TextIO) -> None:
    out.write(outcome.message.strip() + "\n\n")
    if outcome.structured_output is not None:
        out.write(json.dumps(outcome.structured_output, indent=2, ensure_ascii=False) + "\n\n")
    if outcome.todos:
        out.write("todos:\n")
        for todo in outcome.todos:
            out.write(f"  [{todo.status}] {todo.content}\n")
    usage = outcome.usage
    out.write(
        f"stopped: {outcome.stop_reason} after {outcome.iterations} model turns; "
        f"tokens: {usage.total_tokens} ({usage.input_tokens} in, {usage.output_tokens} out)\n"
        f"workflow: {outcome.workflow_id}  {workflow_link(outcome.workflow_id, outcome.run_id)}\n"
    )
