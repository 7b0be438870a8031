"""Search attributes on real dev servers: the embedded server registers them at start, `sleuth
setup` registers them through the operator service, workflows upsert them as they go, and
`temporal workflow list --query` and `sleuth runs` find runs by them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from sleuth import App, create_research_workflow
from sleuth.activities.attributes import expected_types, registered_search_attributes
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.flows.review import ReviewPolicy
from sleuth.usage.pricing import ModelPrice, set_prices
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.cli_runs import build_query, parse_since
from sleuth.workers.embedded import connect_temporal
from sleuth.workers.search_attributes import (
    SearchAttributeSetupError,
    dev_server_flags,
    register_search_attributes,
)
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.cli_process import run_sleuth
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model
from tests.helpers.timeouts import SERVER_STARTUP
from tests.helpers.worker_processes import cli_env, free_port_pair, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh embedded server's address (conftest stops the server after the test)."""
    port = free_port_pair()
    address = f"localhost:{port}"
    monkeypatch.setenv("SLEUTH_EMBEDDED_ADDRESS", address)
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    set_prices({"scripted": ModelPrice(input_per_million=10, output_per_million=20)})
    yield address
    set_prices(None)


async def custom_attributes(client: Client) -> dict[str, int]:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    return dict(listed.custom_attributes)


def research_app(name: str, verdict: bool, **options: Any) -> App:
    app = App()
    spec = create_research_workflow(
        model=scripted_model(ResearchScript(verdicts=[verdict])),
        tools=[lookup],
        max_replans=0,
        max_regenerations=0,
        **options,
    )
    app.research(name, spec)
    return app


async def run_research(client: Client, app: App, name: str) -> ResearchOutcome:
    task_queue = str(uuid.uuid4())
    async with build_worker(client, app, task_queue=task_queue):
        outcome: ResearchOutcome = await client.execute_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="How fast did the CRM market grow?", research=name),
            id=f"research-{name}-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
    return outcome


def temporal_list(address: str, query: str) -> list[dict[str, Any]]:
    listed = subprocess.run(
        [str(temporal_cli()), "workflow", "list", "--address", address, "--query", query,
         "--output", "json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(listed.stdout or "[]") or []


def test_the_dev_server_flags_name_every_attribute_with_its_type() -> None:
    flags = dev_server_flags()
    assert flags[:2] == ["--search-attribute", "SleuthResearch=Keyword"]
    assert "SleuthGroundingScore=Double" in flags and "SleuthTotalTokens=Int" in flags
    assert len(flags) == 2 * len(expected_types())


def test_the_runs_query_uses_the_attributes() -> None:
    now = datetime(2025, 6, 1, 12, tzinfo=UTC)
    assert parse_since("24h", now) == now - timedelta(hours=24)
    assert parse_since("2025-05-30", now) == datetime(2025, 5, 30, tzinfo=UTC)
    query = build_query(ungrounded=True, since=now, research="market")
    assert "SleuthGrounded = false" in query and "SleuthResearch = 'market'" in query
    assert "StartTime >= '2025-06-01T12:00:00Z'" in query
    with pytest.raises(ValueError, match="a date"):
        parse_since("yesterday", now)
    with pytest.raises(ValueError, match="no quotes"):
        build_query(research="x' OR 'a'='a")


async def test_runs_are_found_by_grounding_score_with_the_temporal_cli(embedded: str) -> None:
    client = await connect_temporal()
    address = client.service_client.config.target_host
    registered = await custom_attributes(client)
    assert {name: registered.get(name) for name in expected_types()} == expected_types()
    setup = run_sleuth(["setup"], env=cli_env(), timeout=120)
    assert setup.returncode == 0, setup.stderr
    assert setup.stdout.count("already registered") == len(expected_types())
    assert "(0 added)" in setup.stdout

    name = f"market-{uuid.uuid4().hex[:6]}"
    grounded = [await run_research(client, research_app(name, True), name) for _ in range(2)]
    ungrounded = await run_research(client, research_app(name, False), name)
    assert ungrounded.final_state.grounding_score == 0.0
    assert ungrounded.final_state.cost_usd > 0

    mine = f"SleuthResearch = '{name}'"
    await wait_for(
        lambda: len(temporal_list(address, mine)) == 3, "the three runs in the visibility store"
    )
    found = temporal_list(address, f"{mine} AND SleuthGroundingScore < 0.6")
    assert [row["execution"]["workflowId"] for row in found] == [ungrounded.workflow_id]
    assert temporal_list(address, "SleuthGroundingScore < 0.6") == found
    high = temporal_list(address, "SleuthGroundingScore >= 0.6 AND SleuthGrounded = true")
    assert {row["execution"]["workflowId"] for row in high} == {o.workflow_id for o in grounded}
    cost = temporal_list(address, f"{mine} AND SleuthCostUsd > 0 AND SleuthTotalTokens > 0")
    assert len(cost) == 3
    assert len(temporal_list(address, f"{mine} AND SleuthEndReason = 'max_regenerations'")) == 1

    runs = run_sleuth(["runs", "--ungrounded", "--since", "1h", "--json"], env=cli_env(), timeout=120)  # fmt: skip
    assert runs.returncode == 0, runs.stderr
    [row] = json.loads(runs.stdout)
    assert row["id"] == ungrounded.workflow_id and row["kind"] == "research"
    assert row["status"] == "completed" and row["grounding_score"] == 0.0
    assert row["tokens"] == ungrounded.final_state.usage.total_tokens
    assert row["cost_usd"] == pytest.approx(ungrounded.final_state.cost_usd)
    assert row["end_reason"] == "max_regenerations" and row["name"] == name

    table = run_sleuth(["runs", "--research", name], env=cli_env(), timeout=120)  # fmt: skip
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split() == [
        "ID", "KIND", "STATUS", "STARTED", "DURATION", "GROUNDING", "RESULT", "REPLANS",
        "TOKENS", "COST"
    ]  # fmt: skip
    assert len(lines) == 3 and sum("0%" in line.split() for line in lines) == 1
    # The research status is on the run: a new Keyword attribute, and the RESULT column.
    assert row["result"] == ungrounded.final_state.status != "grounded"
    assert sum("grounded" in line.split() for line in lines) == 2
    status = temporal_list(address, f"{mine} AND SleuthResearchStatus = 'grounded'")
    assert {r["execution"]["workflowId"] for r in status} == {o.workflow_id for o in grounded}


async def test_a_run_awaiting_review_is_findable_and_sleuth_review_decides_it(
    embedded: str,
) -> None:
    client = await connect_temporal()
    address = client.service_client.config.target_host
    name = f"reviewed-{uuid.uuid4().hex[:6]}"
    app = research_app(name, True, review=ReviewPolicy(points=["summary"]))
    task_queue = str(uuid.uuid4())
    async with build_worker(client, app, task_queue=task_queue):
        handle = await client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="How fast did the CRM market grow?", research=name),
            id=f"research-{name}",
            task_queue=task_queue,
        )
        awaiting = f"SleuthResearch = '{name}' AND SleuthReviewState = 'awaiting'"
        await wait_for(lambda: len(temporal_list(address, awaiting)) == 1, "the awaiting run")

        listed = run_sleuth(["runs", "--awaiting-review", "--json"], env=cli_env(), timeout=120)  # fmt: skip
        assert [row["id"] for row in json.loads(listed.stdout)] == [handle.id]
        assert json.loads(listed.stdout)[0]["status"] == "awaiting review"

        shown = await asyncio.to_thread(
            run_sleuth, ["review", handle.id], env=cli_env(), timeout=120
        )
        assert shown.returncode == 0, shown.stderr
        assert f"{handle.id} waits for review summary-1 (summary)" in shown.stdout
        assert "The CRM market grew 12 percent" in shown.stdout
        assert "--approve" in shown.stderr

        refused = await asyncio.to_thread(
            run_sleuth, ["review", handle.id, "--revise", ""], env=cli_env(), timeout=120
        )
        assert refused.returncode == 1 and "needs a remark" in refused.stderr

        decided = await asyncio.to_thread(
            run_sleuth,
            ["review", handle.id, "--reject", "Out of scope."],
            env=cli_env(),
            timeout=120,
        )
        assert decided.returncode == 0, decided.stderr
        assert "reject: sent to" in decided.stdout
        outcome: ResearchOutcome = await handle.result()
    assert outcome.final_state.end_reason == "rejected"
    rejected = f"SleuthResearch = '{name}' AND SleuthReviewState = 'rejected'"
    await wait_for(lambda: len(temporal_list(address, rejected)) == 1, "the rejected run")


async def test_sleuth_setup_registers_the_attributes_on_a_namespace(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    before = await custom_attributes(client)
    report = await register_search_attributes(client)
    after = await custom_attributes(client)
    assert {name: after[name] for name in expected_types()} == expected_types()
    assert sorted(report.added + report.already) == sorted(expected_types())
    assert set(report.added) == set(expected_types()) - set(before)
    again = await register_search_attributes(client)
    assert again.added == [] and sorted(again.already) == sorted(expected_types())


async def test_setup_refuses_an_attribute_registered_with_another_type() -> None:
    server = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        port=free_port_pair(),
        dev_server_extra_args=["--search-attribute", "SleuthCostUsd=Keyword"],
        dev_server_startup_timeout=SERVER_STARTUP,
    )
    try:
        with pytest.raises(SearchAttributeSetupError, match="SleuthCostUsd as Keyword"):
            await register_search_attributes(server.client)
    finally:
        await server.shutdown()


async def test_the_lookup_answers_per_server_and_namespace(
    embedded: str, time_env: WorkflowEnvironment
) -> None:
    """One process may serve several clusters: a server without the attributes (the test
    server) does not hide them on one that has them, both in namespace `default`."""
    without = await ActivityEnvironment(client=time_env.client).run(registered_search_attributes)
    assert without == []
    client = await connect_temporal()
    with_them = await ActivityEnvironment(client=client).run(registered_search_attributes)
    assert sorted(with_them) == sorted(expected_types())
