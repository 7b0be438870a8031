"""Metrics: a worker connected with `SLEUTH_METRICS_PORT` serves Prometheus metrics, the Temporal
SDK's and Sleuth's (runs by end reason, grounding scores, tokens, cost, tool errors)."""

from __future__ import annotations

import asyncio
import re
import urllib.request
import uuid

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from sleuth import Agent, App, create_research_workflow
from sleuth.activities.agent_models import AgentRequest
from sleuth.activities.metrics import error_kind
from sleuth.activities.research_models import ResearchRequest
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.runtime.settings import SettingsError, SleuthSettings
from sleuth.usage.pricing import ModelPrice, set_prices
from sleuth.workers.telemetry import metrics_address, metrics_runtime
from sleuth.workers.worker import build_worker
from sleuth.workflows.agent import AgentWorkflow
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.ports import free_ports
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model
from tests.helpers.worker_processes import wait_for


def scrape(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        return str(response.read().decode())


def sample(text: str, metric: str, **labels: str) -> float | None:
    """The value of the first sample of `metric` whose labels include `labels`."""
    for line in text.splitlines():
        match = re.match(rf"^{re.escape(metric)}(?:\{{(.*)\}})?\s+(\S+)$", line)
        if not match:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(match.group(2))
    return None


def broken(topic: str) -> str:
    """Look a topic up in an index that is down."""
    raise TimeoutError("the index did not answer")


def app() -> App:
    application = App()
    application.research(
        "market",
        create_research_workflow(
            model=scripted_model(ResearchScript(verdicts=[False])),
            tools=[lookup],
            max_replans=0,
            max_regenerations=0,
        ),
    )
    application.agent(
        "fragile",
        lambda: Agent(
            ScriptedModel(
                responder=lambda call: (
                    text("Could not look it up.")
                    if any(m.role == "tool" for m in call.messages)
                    else tool_call("broken", topic="crm")
                )
            ),
            tools=[broken],
            name="fragile",
        ),
    )
    return application


async def test_a_worker_serves_sdk_and_sleuth_metrics(time_env: WorkflowEnvironment) -> None:
    set_prices({"scripted": ModelPrice(input_per_million=100, output_per_million=200)})
    settings = SleuthSettings(metrics_port=free_ports())
    address = metrics_address(settings)
    assert address == f"127.0.0.1:{settings.metrics_port}"
    runtime = metrics_runtime(settings)
    client = await Client.connect(
        time_env.client.service_client.config.target_host,
        namespace=time_env.client.namespace,
        data_converter=pydantic_data_converter,
        runtime=runtime,
    )
    task_queue = str(uuid.uuid4())
    try:
        async with build_worker(client, app(), task_queue=task_queue):
            outcome = await client.execute_workflow(
                ResearchWorkflow.run,
                ResearchRequest(prompt="How fast did the CRM market grow?", research="market"),
                id=f"research-{uuid.uuid4()}",
                task_queue=task_queue,
            )
            await client.execute_workflow(
                AgentWorkflow.run,
                AgentRequest(agent="fragile", prompt="Look up CRM."),
                id=f"agent-{uuid.uuid4()}",
                task_queue=task_queue,
            )

            async def has_everything() -> bool:
                text_ = await asyncio.to_thread(scrape, address)
                return sample(text_, "sleuth_runs", kind="agent") is not None

            await wait_for(has_everything, "both runs counted")
            metrics = await asyncio.to_thread(scrape, address)
    finally:
        set_prices(None)
    report = outcome.final_state
    assert (
        sample(
            metrics, "sleuth_runs", kind="research", name="market", end_reason="max_regenerations"
        )
        == 1
    )
    assert sample(metrics, "sleuth_runs", kind="agent", name="fragile", end_reason="completed") == 1
    assert sample(metrics, "sleuth_tokens", kind="research", name="market") == (
        report.usage.total_tokens
    )
    assert sample(metrics, "sleuth_grounding_score_count", kind="research") == 1
    assert sample(metrics, "sleuth_grounding_score_bucket", kind="research", le="0.1") == 1
    assert sample(metrics, "sleuth_run_cost_usd_sum", kind="research") == pytest.approx(
        report.cost_usd
    )
    assert sample(metrics, "sleuth_tool_errors", tool="broken", error="TimeoutError") == 1
    # The Temporal SDK's own metrics are on the same endpoint.
    assert sample(metrics, "temporal_workflow_completed", workflow_type="ResearchWorkflow") == 1
    assert sample(metrics, "temporal_activity_execution_latency_count") is not None


def test_the_metrics_settings_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLEUTH_METRICS_PORT", raising=False)
    monkeypatch.delenv("SLEUTH_METRICS_HOST", raising=False)
    assert metrics_address() is None
    assert metrics_runtime() is None
    monkeypatch.setenv("SLEUTH_METRICS_PORT", "9464")
    assert metrics_address() == "127.0.0.1:9464"
    monkeypatch.setenv("SLEUTH_METRICS_HOST", "0.0.0.0")
    assert metrics_address() == "0.0.0.0:9464"
    for bad in ("http", "0", "70000"):
        monkeypatch.setenv("SLEUTH_METRICS_PORT", bad)
        with pytest.raises(
            SettingsError,
            match=rf"^SLEUTH_METRICS_PORT='{bad}' is not valid .*expected a whole number "
            "from 1 to 65535",
        ):
            metrics_address()
    assert error_kind("TimeoutError: slow") == "TimeoutError"
    assert error_kind("denied") == "denied"
