"""`@tool`: schemas from type hints and docstrings, and failures that come back as tool errors."""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from sleuth.agent import Agent
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.tools import Tool, as_tool, tool


class Finding(BaseModel):
    claim: str
    source: str


class ResearchResult(BaseModel):
    summary: str
    confidence: float = Field(ge=0, le=1)
    findings: list[Finding] = Field(default_factory=list)


@tool
def search(query: str, limit: int = 5, mode: Literal["web", "docs"] = "docs") -> list[str]:
    """Search the knowledge base.

    Returns the titles of matching documents.
    """
    return [f"{mode}:{query}:{n}" for n in range(limit)]


@tool
async def fetch(url: str) -> dict[str, str]:
    """Fetch one page."""
    await asyncio.sleep(0)
    return {"url": url, "body": "page body"}


@tool
def submit_research(result: ResearchResult) -> str:
    """Submit the finished research."""
    return f"accepted {len(result.findings)} findings at {result.confidence}"


def test_schema_comes_from_type_hints_and_description_from_docstring() -> None:
    assert isinstance(search, Tool)
    assert search.name == "search"
    assert search.description.startswith("Search the knowledge base.")
    assert "Returns the titles" in search.description
    parameters = search.parameters
    assert parameters["type"] == "object"
    assert parameters["required"] == ["query"]
    assert parameters["properties"]["query"]["type"] == "string"
    assert parameters["properties"]["limit"] == {"default": 5, "title": "Limit", "type": "integer"}
    assert parameters["properties"]["mode"]["enum"] == ["web", "docs"]
    assert parameters["additionalProperties"] is False
    spec = search.spec()
    assert (spec.name, spec.description, spec.parameters) == (
        "search",
        search.description,
        parameters,
    )


def test_a_pydantic_model_argument_becomes_a_nested_schema() -> None:
    parameters = submit_research.parameters
    assert parameters["required"] == ["result"]
    reference = parameters["properties"]["result"]["$ref"]
    model_name = reference.rsplit("/", 1)[-1]
    nested = parameters["$defs"][model_name]
    assert set(nested["properties"]) == {"summary", "confidence", "findings"}
    assert nested["properties"]["confidence"]["maximum"] == 1
    assert "Finding" in parameters["$defs"]


def test_name_and_description_can_be_overridden() -> None:
    @tool(name="lookup", description="Look a ticker up.")
    def find_ticker(company: str) -> str:
        """Ignored docstring."""
        return company.upper()

    assert (find_ticker.name, find_ticker.description) == ("lookup", "Look a ticker up.")
    assert find_ticker("acme") == "ACME"
    assert as_tool(find_ticker) is find_ticker
    assert as_tool(lambda x: x).name == "<lambda>"


async def test_sync_tools_run_off_the_event_loop_and_async_tools_on_it() -> None:
    threads: list[str] = []

    @tool
    def where_sync() -> str:
        """Report the thread."""
        threads.append(threading.current_thread().name)
        return "ok"

    result = await where_sync.invoke({})
    assert result.ok and result.content == "ok"
    assert threads and threads[0] != threading.current_thread().name
    assert fetch.is_async and not search.is_async
    fetched = await fetch.invoke({"url": "https://example.org"})
    assert fetched.ok
    assert fetched.content == '{"url": "https://example.org", "body": "page body"}'


async def test_arguments_are_validated_and_coerced_into_the_pydantic_model() -> None:
    result = await submit_research.invoke(
        {
            "result": {
                "summary": "CRM market grows",
                "confidence": 0.8,
                "findings": [{"claim": "x", "source": "y"}],
            }
        }
    )
    assert result.ok, result.content
    assert result.content == "accepted 1 findings at 0.8"


async def test_invalid_arguments_come_back_as_a_tool_error_naming_the_field() -> None:
    result = await submit_research.invoke({"result": {"summary": "s", "confidence": 7}})
    assert not result.ok
    assert result.error == "invalid_arguments"
    assert "result.confidence" in result.content
    unknown = await search.invoke({"query": "q", "colour": "red"})
    assert not unknown.ok and "colour" in unknown.content
    missing = await search.invoke({})
    assert not missing.ok and "query" in missing.content


async def test_a_raising_tool_comes_back_as_a_tool_error() -> None:
    @tool
    async def flaky(item: str) -> str:
        """Always fails."""
        raise RuntimeError(f"backend down for {item}")

    result = await flaky.invoke({"item": "a"})
    assert not result.ok
    assert result.error == "RuntimeError: backend down for a"
    assert "backend down for a" in result.content


def test_the_loop_goes_on_after_tool_errors() -> None:
    @tool
    def broken(item: str) -> str:
        """Always fails."""
        raise ValueError("no such item")

    model = ScriptedModel(
        [
            tool_call("broken", item="a"),
            tool_call("search", query=7),
            tool_call("search", query="crm", limit=1),
            text("Found it."),
        ]
    )
    result = Agent(model, tools=[broken, search]).run_sync("find crm")
    model.assert_complete()
    assert result.message == "Found it."
    assert result.stop_reason == "completed"
    assert [(e.tool, e.success) for e in result.evidence] == [
        ("broken", False),
        ("search", False),
        ("search", True),
    ]
    tool_replies = [m.content for m in model.calls[3].messages if m.role == "tool"]
    assert "ValueError: no such item" in tool_replies[0]
    assert "Invalid arguments" in tool_replies[1] and "query" in tool_replies[1]
    assert tool_replies[2] == '["docs:crm:0"]'


async def test_a_provider_backoff_inside_a_tool_propagates_to_the_runner() -> None:
    from sleuth.models.base import NonRetryableModelError, RetryableModelError

    @tool
    async def embed(text: str) -> str:
        """Embed a text."""
        raise RetryableModelError("rate limited", status_code=429, retry_after=2)

    @tool
    async def strict(text: str) -> str:
        """Refuse every text."""
        raise NonRetryableModelError("bad schema", status_code=400)

    with pytest.raises(RetryableModelError, match="rate limited"):
        await embed.invoke({"text": "hello"})
    refused = await strict.invoke({"text": "hello"})
    assert not refused.ok and "bad schema" in refused.content
