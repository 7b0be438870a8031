"""Live events of durable runs: activities publish to their workflow's stream, any client reads
it from an offset while the run goes on, and the CLI shows the events."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.research_models import ResearchRequest
from sleuth.workers.events import follow_events
from sleuth.workers.worker import build_worker
from sleuth.workflows import ResearchWorkflow
from tests.helpers.apps import live_app
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled
from tests.research.test_research_workflow import ResearchScript, research_app

ROOT = Path(__file__).resolve().parents[2]


async def test_a_follower_sees_events_while_the_run_is_still_going(
    dev_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(live_app.GATE_ENV, str(tmp_path))
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, live_app.app, task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="Price Acme and Globex", research="prices"),
            id=f"live-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        seen: list[tuple[int, str, dict]] = []
        async for offset, event in follow_events(dev_env.client, handle.id):
            seen.append((offset, event.event_type, event.data))
            if event.event_type == "agent.tool.called" and event.data["tool"] == "quick":
                # `gated` is blocked inside the same execute activity: the run is mid-step.
                assert (await handle.describe()).status.name == "RUNNING"
                (tmp_path / "release").touch()
        await handle.result()
        # Any client reads from an offset, the run over or not (a finished run's stream is read
        # by a query, which a worker answers).
        tail = [
            (offset, event.event_type)
            async for offset, event in follow_events(dev_env.client, handle.id, 3)
        ]
    assert [offset for offset, _, _ in seen] == list(range(len(seen)))
    assert seen[0][1:] == ("research.node.started", {"research": "prices", "node": "plan"})
    tools = [data["tool"] for _, kind, data in seen if kind == "agent.tool.called"]
    assert tools == ["quick", "gated"]
    assert seen[-1][1] == "research.finished"
    assert tail == [(offset, kind) for offset, kind, _ in seen[3:]]


async def test_events_follow_a_run_across_continue_as_new(time_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript(verdicts=[False, False, True]))
    request = ResearchRequest(prompt="q?", research="market", history_event_budget=20)
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        handle = await time_env.client.start_workflow(
            ResearchWorkflow.run, request, id=f"research-{uuid.uuid4()}", task_queue=task_queue
        )
        outcome = await handle.result()
        kinds = [event.event_type async for _, event in follow_events(time_env.client, handle.id)]
    assert outcome.run_id != handle.first_execution_run_id, "the run continued as new"
    # Every node's start, across every run, is in the one stream (the budget keeps 200 events).
    assert kinds.count("research.node.started") == len(outcome.final_state.nodes) == 12
    assert kinds[-1] == "research.finished"


async def sleuth(address: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT), **env}
    return await asyncio.to_thread(run_sleuth, args, env=environment, cwd=ROOT, timeout=scaled(180))


@pytest.mark.slow
async def test_the_cli_shows_the_events_of_research_agent_and_run(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = dev_env.client.service_client.config.target_host

    def queue() -> list[str]:
        return ["--task-queue", f"cli-{uuid.uuid4()}"]

    research = await sleuth(
        address,
        "research",
        "What does Acme charge per seat?",
        "--app",
        "tests.helpers.apps.live_app:app",
        "--research",
        "prices",
        *queue(),
    )
    assert research.returncode == 0, research.stderr
    assert "  → execute\n" in research.stdout
    assert '  · quick("topic": "acme") ok\n' in research.stdout
    assert '  · gated("topic": "globex") ok\n' in research.stdout
    assert research.stdout.index("→ execute") < research.stdout.index("Summary\n")

    agent = await sleuth(
        address,
        "agent",
        "market",
        "Size CRM and price Acme",
        "--app",
        "tests.helpers.apps.agent_app:app",
        *queue(),
    )
    assert agent.returncode == 0, agent.stderr
    assert "  · model turn 1:" in agent.stderr
    assert "  · deepagent.todo.added" in agent.stderr

    config = tmp_path / "agents.yaml"
    config.write_text(
        "agents:\n  - id: helper\n    model: {provider: app, model: scripted}\n    tools: [lookup]\n"
    )
    run = await sleuth(
        address,
        "run",
        "helper",
        "Price Acme",
        "--config",
        str(config),
        "--app",
        "tests.helpers.apps.decompose_app:app",
        *queue(),
    )
    assert run.returncode == 0, run.stderr
    assert "  · lookup(" in run.stderr
    quiet = await sleuth(
        address,
        "run",
        "helper",
        "Price Acme",
        "--quiet",
        "--config",
        str(config),
        "--app",
        "tests.helpers.apps.decompose_app:app",
        *queue(),
    )
    assert quiet.returncode == 0 and "· lookup(" not in quiet.stderr
