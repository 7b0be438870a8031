"""`sleuth agent NAME "prompt"` against the dev server, with the worker the session starts."""

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


async def sleuth(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "PYTHONPATH": str(ROOT)}
    return await asyncio.to_thread(run_sleuth, args, env=env, cwd=ROOT, timeout=scaled(120))


async def test_agent_command_runs_the_agent_and_prints_its_outcome(
    dev_env: WorkflowEnvironment,
) -> None:
    address = dev_env.client.service_client.config.target_host

    def options() -> list[str]:
        # A fresh queue each time: a queue a finished command's worker polled still looks served.
        return ["--app", "tests.helpers.apps.agent_app:app", "--task-queue", f"cli-{uuid.uuid4()}"]

    as_json = await sleuth(
        address, "agent", "market", "Size CRM and price Acme", "--json", *options()
    )
    assert as_json.returncode == 0, as_json.stderr
    outcome = json.loads(as_json.stdout)
    assert outcome["stop_reason"] == "tool_called:submit & confidence_met"
    assert outcome["structured_output"]["summary"].endswith("Acme charges $40 per seat")
    assert outcome["workflow_id"].startswith("agent-market-")

    for_people = await sleuth(address, "agent", "market", "Size CRM and price Acme", *options())
    assert for_people.returncode == 0, for_people.stderr
    assert "[completed] price Acme" in for_people.stdout
    assert "stopped: tool_called:submit & confidence_met after 6 model turns" in for_people.stdout
    assert "tokens: 225" in for_people.stdout

    unknown = await sleuth(address, "agent", "nobody", "hi", *options())
    assert unknown.returncode == 2
    assert "unknown agent 'nobody'; registered: market" in unknown.stderr
