"""`web.search` and `web.fetch` in runs: a durable agent run (each call an `agent.tool` activity,
a 429 retried after the provider's Retry-After, a page fetched once for two runs) and a research
run whose report is grounded in a page it searched for and read."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth import (
    App,
    WebFetchOptions,
    WebSearchOptions,
    create_deepagent,
    web_fetch_tool,
    web_search_tool,
)
from sleuth.activities.agent_models import AgentOutcome, AgentRequest
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.workers.worker import build_worker
from sleuth.workflows import AgentWorkflow
from tests.helpers.web_server import LocalWebServer

DATA = Path(__file__).parent / "data"
SEARCH = "/res/v1/web/search"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalWebServer]:
    with LocalWebServer() as web:
        monkeypatch.setenv("SLEUTH_BRAVE_URL", web.url + SEARCH)
        monkeypatch.setenv("BRAVE_API_KEY", "brv-test-key")
        yield web


def researcher(server: LocalWebServer, seen: list[str]) -> App:
    page = f"{server.url}/tech/crm-prices"

    def respond(call: ModelCall) -> ModelResponse:
        results = [m.content for m in call.messages if m.role == "tool"]
        seen[:] = results
        if not results:
            return tool_call("web_search", query="crm pricing per seat")
        if len(results) == 1:
            return tool_call("web_fetch", url=page)
        return text("Acme costs $40 a seat per month.")

    app = App(name="web-research")
    app.agent(
        "researcher",
        lambda: create_deepagent(
            model=ScriptedModel(responder=respond),
            tools=[
                web_search_tool(WebSearchOptions(provider="brave", max_results=2)),
                web_fetch_tool(WebFetchOptions(allow_private=True)),
            ],
            grounding=False,
            reflexion=False,
        ),
    )
    return app


async def run(env: WorkflowEnvironment, app: App) -> tuple[AgentOutcome, list[int]]:
    """The outcome, and the attempt that completed each `agent.tool` activity."""
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        handle = await env.client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="researcher", prompt="What does Acme cost per seat?"),
            id=f"web-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        outcome = await handle.result()
    tools: set[int] = set()
    attempts = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            if event.activity_task_scheduled_event_attributes.activity_type.name == "agent.tool":
                tools.add(event.event_id)
        elif event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            if started.scheduled_event_id in tools:
                attempts.append(started.attempt)
    return outcome, attempts


async def test_search_then_fetch_durably_with_a_429_retried_and_the_page_fetched_once(
    time_env: WorkflowEnvironment, server: LocalWebServer
) -> None:
    server.reply_once(SEARCH, status=429, body="slow down", headers={"Retry-After": "1"})
    server.reply(SEARCH, body=(DATA / "brave.json").read_bytes(), content_type="application/json")
    server.reply(
        "/tech/crm-prices",
        body=(DATA / "article.html").read_bytes(),
        content_type="text/html; charset=utf-8",
    )
    seen: list[str] = []
    outcome, attempts = await run(time_env, researcher(server, seen))

    assert outcome.message == "Acme costs $40 a seat per month."
    search_results, page = seen
    assert [r["url"] for r in json.loads(search_results)] == [
        "https://www.example.com/crm/pricing",
        "https://blog.vendor-news.net/2026/acme-raises-prices",
    ]
    assert "Title: CRM prices in 2026: what a seat costs" in page
    assert "Acme costs $40 a seat per month on its standard plan" in page
    assert "Subscribe for $1 a week" not in page
    # The search ran as a tool activity whose first attempt got the 429: the server retried that
    # activity (a retry adds no event; the started event of the attempt that completed carries
    # its number), the model never saw the failure, and the fetch ran once.
    assert attempts == [2, 1]
    assert server.hits(SEARCH) == 2
    assert server.hits("/tech/crm-prices") == 1

    # A second run (a regenerated step, another agent on a worker sharing the store) reads the
    # page from the artifact store; the search is asked again (results are not cached).
    again, _ = await run(time_env, researcher(server, seen))
    assert again.message == outcome.message
    assert seen[1] == page
    assert server.hits("/tech/crm-prices") == 1
    assert server.hits(SEARCH) == 3


async def test_a_research_run_grounds_its_report_in_a_searched_and_read_page(
    server: LocalWebServer,
) -> None:
    from sleuth import create_research_workflow
    from tests.helpers.research_scripts import FACT, ResearchScript, scripted_model, tool_rounds

    page = f"{server.url}/2026/crm-market"
    article = (
        (DATA / "article.html")
        .read_text()
        .replace("<h2>Enterprise tiers</h2>", f"<p>{FACT}</p>\n        <h2>Enterprise tiers</h2>")
    )
    server.reply("/2026/crm-market", body=article, content_type="text/html; charset=utf-8")
    server.reply(SEARCH, body=(DATA / "brave.json").read_bytes(), content_type="application/json")

    def execute(call: ModelCall) -> ModelResponse:
        if tool_rounds(call) == 0:
            return tool_call("web_search", query="CRM market growth 2024")
        if tool_rounds(call) == 1:
            return tool_call("web_fetch", url=page)
        return text("Findings: " + FACT)

    spec = create_research_workflow(
        model=scripted_model(ResearchScript(execute_turn=execute)),
        tools=[
            web_search_tool(WebSearchOptions(provider="brave")),
            web_fetch_tool(WebFetchOptions(allow_private=True)),
        ],
    )
    state = (await spec.execute({"prompt": "How fast did the CRM market grow?"})).final_state
    assert [e["tool"] for e in state["evidence"]] == ["web_search", "web_fetch"]
    assert "https://www.example.com/crm/pricing" in state["evidence"][0]["output"]
    assert FACT in state["evidence"][1]["output"]
    assert "Subscribe for $1 a week" not in state["evidence"][1]["output"]
    assert state["end_reason"] == "grounded"
    assert state["claims"][0]["evidence"] == [2]  # the claim rests on the page, not the snippets
