"""The agent's reach in one run: an agent declared in YAML with `web.search`, `web.fetch` and an
MCP server, run durably (`AgentWorkflow`) against local servers: a SearXNG instance answering in
its JSON shape, a site serving a page with navigation around its article, and the real MCP test
server over stdio. Its evidence trail holds the search results, the page's extracted text and
the MCP tool's result."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth import App
from sleuth.activities.agent_models import AgentRequest
from sleuth.agent.state import LoopState
from sleuth.apps.yaml_agents import load_agents_into
from sleuth.models.scripted import ScriptedModel
from sleuth.runtime.artifacts import default_artifact_store, get_json
from sleuth.workers.worker import build_worker
from sleuth.workflows import AgentWorkflow
from tests.helpers.apps.mcp_app import ROOT, STATE_ENV, answer_after
from tests.helpers.web_server import LocalWebServer

DATA = Path(__file__).parent / "data"
ARTICLE = "/crm/pricing"


async def test_a_yaml_agent_searches_reads_a_page_and_asks_an_mcp_server_durably(
    time_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalWebServer() as web:
        page_url = web.url + ARTICLE
        results = {
            "query": "acme crm pricing",
            "results": [
                {
                    "url": page_url,
                    "title": "CRM pricing compared",
                    "content": "Acme costs $40 a seat per month.",
                    "engine": "duckduckgo",
                }
            ],
        }
        web.reply("/search", body=json.dumps(results), content_type="application/json")
        web.reply(ARTICLE, body=(DATA / "article.html").read_bytes(), content_type="text/html")
        monkeypatch.setenv("SEARXNG_URL", web.url)

        plan = [
            ("search", {"query": "acme crm pricing"}),
            ("read", {"url": page_url}),
            ("kb_search", {"query": "acme"}),
        ]
        app = App()
        app.model("scripted", ScriptedModel(responder=answer_after(plan)))
        agents = tmp_path / "agents.yaml"
        agents.write_text(
            f"""
agents:
  - id: researcher
    model: {{provider: app, model: scripted}}
    tools:
      - {{ name: search, type: function, function: web.search, options: {{provider: searxng}} }}
      - {{ name: read, type: function, function: web.fetch, options: {{allow_private: true}} }}
      - name: kb
        type: mcp
        command: {sys.executable}
        args: ["-m", "tests.helpers.mcp_server"]
        cwd: {ROOT}
        env: {{{STATE_ENV}: "{tmp_path}"}}
        idempotent: true
"""
        )
        load_agents_into(app, agents)
        task_queue = str(uuid.uuid4())
        async with build_worker(time_env.client, app, task_queue=task_queue):
            outcome = await time_env.client.execute_workflow(
                AgentWorkflow.run,
                AgentRequest(agent="researcher", prompt="What does Acme charge, and since when?"),
                id=f"reach-{uuid.uuid4()}",
                task_queue=task_queue,
            )
        assert web.hits("/search") == 1 and web.hits(ARTICLE) == 1

    trail = LoopState.model_validate(get_json(default_artifact_store(), outcome.state_ref))
    outputs = {item.tool: item.output for item in trail.evidence}
    assert set(outputs) == {"search", "read", "kb_search"}
    [found] = json.loads(outputs["search"])
    assert found["url"] == page_url and found["snippet"] == "Acme costs $40 a seat per month."
    page = outputs["read"]
    assert "what a seat costs" in page and "Accept all cookies" not in page  # the article only
    assert "Acme Corp was founded in 1987 in Oslo." in outputs["kb_search"]
    assert outcome.message.startswith("Answer: ")
