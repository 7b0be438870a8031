"""`sleuth run AGENT_ID "task" --config agents.yaml` against the dev server (session worker)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

AGENTS_YAML = """\
agents:
  - id: deep-researcher
    type: deep
    deep_max_depth: 1
    model: {provider: app, model: scripted}
    tools: [lookup]
    budget: {max_tool_calls: 10}
  - id: researcher
    type: react
    model: {provider: app, model: scripted}
    tools: [lookup]
  - id: writer
    model: {provider: app, model: scripted}
"""


async def sleuth(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)}
    return await asyncio.to_thread(run_sleuth, args, env=env, cwd=ROOT, timeout=scaled(180))


async def test_run_command_starts_yaml_agents_and_pipelines(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    address = dev_env.client.service_client.config.target_host
    config = tmp_path / "agents.yaml"
    config.write_text(AGENTS_YAML)

    def common() -> list[str]:
        # A fresh queue per command: the server lists a finished command's worker as a poller
        # for a while, and the next command would wait for it instead of starting its own.
        app = ["--config", str(config), "--app", "tests.helpers.apps.decompose_app:app"]
        return [*app, "--task-queue", f"run-{uuid.uuid4()}"]

    deep = await sleuth(
        address, "run", "deep-researcher", "Compare CRM vendors", "--json", *common()
    )
    assert deep.returncode == 0, deep.stderr
    outcome = json.loads(deep.stdout)
    assert outcome["answer"] == "Both vendors charge $40 per seat."
    assert outcome["outcome"] == "completed"
    assert [c["task"] for c in outcome["tree"]["children"]] == ["Acme pricing", "Globex pricing"]
    assert outcome["spent"]["tool_calls"] == 2

    pipeline = await sleuth(address, "run", "report", "Acme pricing", *common())
    assert pipeline.returncode == 0, pipeline.stderr
    assert pipeline.stdout.strip() == "noted: noted: Acme pricing: $40 per seat"
    assert "pipeline-report-" in pipeline.stderr  # the workflow id and its Web UI link

    react = await sleuth(address, "run", "researcher", "Globex pricing", *common())
    assert react.returncode == 0, react.stderr
    assert react.stdout.strip() == "noted: Globex pricing: $40 per seat"

    unknown = await sleuth(address, "run", "nobody", "hi", *common())
    assert unknown.returncode == 2
    assert "unknown agent or pipeline 'nobody'; registered: deep-researcher, researcher" in (
        unknown.stderr
    )

    config.write_text(
        AGENTS_YAML.replace(
            "tools: [lookup]\n  - id: writer", "tools: [lookup, fetch]\n  - id: writer"
        )
    )
    bad = await sleuth(address, "run", "writer", "hi", *common())
    assert bad.returncode == 1
    assert (
        f"{config}:11: agent 'researcher': unknown tool 'fetch'; registered: lookup" in bad.stderr
    )
