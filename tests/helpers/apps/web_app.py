"""An agent that searches (Brave, at `$SLEUTH_BRAVE_URL`) and then reads one page (the URL in
`$SLEUTH_TEST_WEB_PAGE`), for crash tests (`--app tests.helpers.apps.web_app:app`).

Its model is a deterministic function of the conversation, so a restarted worker process answers
exactly as the one that died.
"""

from __future__ import annotations

import os

from sleuth import (
    App,
    WebFetchOptions,
    WebSearchOptions,
    create_deepagent,
    web_fetch_tool,
    web_search_tool,
)
from sleuth.agent import Agent
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call

PAGE_ENV = "SLEUTH_TEST_WEB_PAGE"


def respond(call: ModelCall) -> ModelResponse:
    results = [m.content for m in call.messages if m.role == "tool"]
    if not results:
        return tool_call("web_search", query="crm pricing per seat")
    if len(results) == 1:
        return tool_call("web_fetch", url=os.environ[PAGE_ENV])
    found = "Acme costs $40 a seat per month" in results[1]
    return text("Acme costs $40 a seat per month." if found else "The page said nothing.")


def researcher() -> Agent:
    return create_deepagent(
        model=ScriptedModel(responder=respond),
        tools=[
            web_search_tool(WebSearchOptions(provider="brave", max_results=2)),
            web_fetch_tool(WebFetchOptions(allow_private=True)),
        ],
        grounding=False,
        reflexion=False,
    )


app = App(name="web-crash")
app.agent("researcher", researcher)
