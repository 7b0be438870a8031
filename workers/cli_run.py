"""`sleuth run AGENT_ID "task"`: start one declared agent or pipeline durably and print its answer.

A deep agent (`type: deep`, or a registered `DeepDecomposer`) runs as `DecomposeWorkflow`, a
registered pipeline as `PipelineWorkflow`, any other agent as `AgentWorkflow`. `--config
agents.yaml` adds the agents a YAML file declares (`sleuth.apps.yaml_agents`) to the App first; a
worker started with the same `--config` serves them, else one runs in this process.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowFailureError

from sleuth.activities.agent_models import AgentRequest
from sleuth.activities.decompose_models import DecomposeInput, DecomposeOutput
from sleuth.activities.errors import unwrap_cause
from sleuth.activities.pipeline_models import PipelineInput
from sleuth.apps.app import App
from sleuth.apps.yaml_agents import load_agents_into
from sleuth.flows.composition import PipelineResult
from sleuth.flows.decompose import DeepDecomposer
from sleuth.runtime.errors import NotFoundError
from sleuth.runtime.paths import workflow_link
from sleuth.workers.cli_events import showing_events
from sleuth.workers.session import add_session_arguments, cli_app, open_session
from sleuth.workflows.agent import AgentWorkflow
from sleuth.workflows.decompose import DecomposeWorkflow
from sleuth.workflows.pipeline import PipelineWorkflow


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a declared agent (deep or react) or a registered pipeline durably",
        description=(
            "Start AGENT_ID on TASK and wait for the answer: a deep agent decomposes the task "
            "into child workflows, a pipeline runs its stages as activities, a react agent runs "
            "its tool loop."
        ),
    )
    parser.add_argument("agent_id", metavar="AGENT_ID", help="an agent or pipeline id")
    parser.add_argument("task", metavar="TASK", help="the task")
    parser.add_argument(
        "--config", type=Path, metavar="AGENTS.YAML", help="register the agents of this YAML file"
    )
    parser.add_argument(
        "--max-depth", type=int, metavar="N", help="deep agents: recursion limit (0 means 3)"
    )
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON")
    parser.add_argument(
        "--quiet", action="store_true", help="do not show the run's events as they happen"
    )
    add_session_arguments(parser)
    parser.set_defaults(func=run_command)


def workflow_kind(app: App, agent_id: str) -> str:
    """`pipeline`, `deep` or `react` for a registered id; an unknown id lists what exists."""
    if agent_id in app.pipeline_names and agent_id not in app.agent_names:
        return "pipeline"
    if agent_id not in app.agent_names:
        known = ", ".join([*app.agent_names, *app.pipeline_names]) or "none"
        raise NotFoundError(
            f"unknown agent or pipeline {agent_id!r}; registered: {known} "
            "(declare it in --config agents.yaml or register it in your --app)"
        )
    return "deep" if isinstance(app.new_agent(agent_id), DeepDecomposer) else "react"


async def run_command(args: argparse.Namespace) -> int:
    app = cli_app(args.app)
    if args.config is not None:
        if not args.config.is_file():
            print(f"sleuth: --config {args.config}: no such file", file=sys.stderr)
            return 2
        load_agents_into(app, args.config)
    try:
        kind = workflow_kind(app, args.agent_id)
    except LookupError as exc:
        print(f"sleuth: {exc}", file=sys.stderr)
        return 2
    workflow_id = f"{kind}-{args.agent_id}-{uuid.uuid4().hex[:8]}"
    async with open_session(app, task_queue=args.task_queue) as session:
        start: dict[str, Any] = {"id": workflow_id, "task_queue": session.task_queue}
        if kind == "deep":
            handle: Any = await session.client.start_workflow(
                DecomposeWorkflow.run,
                DecomposeInput(agent=args.agent_id, task=args.task, max_depth=args.max_depth),
                **start,
            )
        elif kind == "pipeline":
            handle = await session.client.start_workflow(
                PipelineWorkflow.run, PipelineInput(pipeline=args.agent_id, task=args.task), **start
            )
        else:
            handle = await session.client.start_workflow(
                AgentWorkflow.run, AgentRequest(agent=args.agent_id, prompt=args.task), **start
            )
        if not args.json:
            print(f"started {workflow_id}: {workflow_link(workflow_id)}", file=sys.stderr)
        out = None if args.json or args.quiet else sys.stderr
        try:
            async with showing_events(session.client, workflow_id, out):
                outcome = await handle.result()
        except WorkflowFailureError as exc:
            print(f"sleuth: {workflow_id} failed: {unwrap_cause(exc)}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(outcome.model_dump(mode="json"), indent=2))
        return 0
    return _print_outcome(outcome)


def _print_outcome(outcome: Any) -> int:
    if isinstance(outcome, DecomposeOutput):
        print(outcome.answer)
        spent = outcome.spent
        print(
            f"\noutcome: {outcome.outcome.replace('_', ' ')} · {spent.tool_calls} tool calls · "
            f"{spent.input_tokens} input / {spent.output_tokens} output tokens",
            file=sys.stderr,
        )
        return 0
    if isinstance(outcome, PipelineResult):
        if not outcome.success:
            print(f"sleuth: the pipeline failed: {outcome.error}", file=sys.stderr)
            return 1
        print(outcome.final_output)
        print(f"\noutcome: {outcome.stop_reason} · {len(outcome.outputs)} outputs", file=sys.stderr)
        return 0
    print(getattr(outcome, "final_message", None) or getattr(outcome, "message", outcome))
    return 0
