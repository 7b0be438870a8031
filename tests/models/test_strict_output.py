"""Strict structured output per provider, read from the request bodies the real SDKs send over a
mock transport: the output schema together with tools, strict tool parameters, the structured
output tool, and the repair turn only where no provider mode held the answer."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel

from sleuth.agent import Agent
from sleuth.models import Message, ModelRequestParameters, OutputSchema, ToolSpec
from sleuth.models.anthropic import AnthropicModel
from sleuth.models.openai_compat import MEMORY
from sleuth.tools import tool
from tests.helpers.fake_openai import FakeOpenAI, Reply, api_error, completion

OK = 200


@pytest.fixture(autouse=True)
def fresh_server_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("SLEUTH_OPENAI_STRUCTURED_OUTPUT", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    MEMORY.forget()


class Capital(BaseModel):
    country: str
    capital: str


CAPITAL = OutputSchema(name="Capital", json_schema=Capital.model_json_schema())
ANSWER = {"country": "France", "capital": "Paris"}
ASK = [Message(role="user", content="What is the capital of France?")]
SEARCH = ToolSpec(
    name="search",
    description="Search the corpus.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
        "required": ["query"],
    },
)
# What every provider gets for SEARCH in strict mode: closed, every property required, the
# default (which strict mode refuses) dropped.
STRICT_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query", "limit"],
    "additionalProperties": False,
}
STRICT_CAPITAL = {
    "properties": {
        "country": {"title": "Country", "type": "string"},
        "capital": {"title": "Capital", "type": "string"},
    },
    "required": ["country", "capital"],
    "title": "Capital",
    "type": "object",
    "additionalProperties": False,
}


def answer(content: str) -> Reply:
    return (OK, completion({"content": content}), {})


def calls(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Reply:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return (OK, completion({"content": None, "tool_calls": [call]}, "tool_calls"), {})


# -- OpenAI and OpenAI-compatible servers ------------------------------------------------------


async def test_openai_sends_the_strict_schema_together_with_strict_tools() -> None:
    fake = FakeOpenAI(answer(json.dumps(ANSWER)))

    response = await fake.model().request(
        ASK, ModelRequestParameters(tools=[SEARCH], output_schema=CAPITAL)
    )

    assert fake.bodies[0] == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search",
                    "description": "Search the corpus.",
                    "parameters": STRICT_SEARCH_PARAMETERS,
                    "strict": True,
                },
            }
        ],
        "tool_choice": "auto",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Capital", "schema": STRICT_CAPITAL, "strict": True},
        },
    }
    assert response.structured == ANSWER
    assert response.output_mode == "json_schema_strict"


async def test_keywords_and_the_parameters_object_send_the_same_request() -> None:
    fake = FakeOpenAI(answer("a"), answer("b"))
    model = fake.model()
    await model.request(ASK, tools=[SEARCH], output_schema=CAPITAL, max_output_tokens=50)
    await model.request(
        ASK, ModelRequestParameters(tools=[SEARCH], output_schema=CAPITAL, max_output_tokens=50)
    )
    assert fake.bodies[0] == fake.bodies[1]
    with pytest.raises(TypeError, match="both parameters= and the keywords tools"):
        await model.request(ASK, ModelRequestParameters(), tools=[SEARCH])


async def test_strict_false_sends_neither_strict_tools_nor_a_strict_schema() -> None:
    fake = FakeOpenAI(answer(json.dumps(ANSWER)))
    response = await fake.model().request(
        ASK, ModelRequestParameters(tools=[SEARCH], output_schema=CAPITAL, strict=False)
    )
    body = fake.bodies[0]
    assert body["tools"][0]["function"] == {
        "name": "search",
        "description": "Search the corpus.",
        "parameters": SEARCH.parameters,
    }
    assert body["response_format"]["json_schema"] == {
        "name": "Capital",
        "schema": CAPITAL.json_schema,
        "strict": False,
    }
    assert response.output_mode == "json_schema"


async def test_a_server_refusing_strict_tools_is_asked_again_without_and_remembers() -> None:
    def refuses_strict(body: dict[str, Any]) -> Reply:
        if any("strict" in tool["function"] for tool in body.get("tools", [])):
            # How a pydantic-validated server (vLLM, LiteLLM) words an unknown field.
            return (
                400,
                api_error(
                    "1 validation error: tools.0.function.strict: Extra inputs are not permitted",
                    "invalid_request_error",
                ),
                {},
            )
        return answer("found it")

    fake = FakeOpenAI(refuses_strict, refuses_strict, refuses_strict)
    model = fake.model(base_url="http://127.0.0.1:8080/v1")

    first = await model.request(ASK, tools=[SEARCH])
    second = await model.request(ASK, tools=[SEARCH])

    assert first.text == second.text == "found it"
    strict_try, plain, later = fake.bodies
    assert strict_try["tools"][0]["function"]["strict"] is True
    assert plain["tools"][0]["function"] == {
        "name": "search",
        "description": "Search the corpus.",
        "parameters": SEARCH.parameters,
    }
    assert later == plain  # remembered for this server and model: asked once


async def test_json_object_mode_with_tools_carries_the_schema_in_the_prompt() -> None:
    """A server's json_object grammar covers the whole answer and would rule out tool calls."""
    fake = FakeOpenAI(answer(json.dumps(ANSWER)))
    model = fake.model(base_url="http://127.0.0.1:8080/v1", openai_structured_output="json_object")

    response = await model.request(ASK, tools=[SEARCH], output_schema=CAPITAL)

    body = fake.bodies[0]
    assert "response_format" not in body
    assert body["tools"][0]["function"]["name"] == "search"
    assert body["messages"][0]["role"] == "system"
    assert json.dumps(CAPITAL.json_schema) in body["messages"][0]["content"]
    assert response.structured == ANSWER
    assert response.output_mode == "prompt"


async def test_an_agent_with_tools_gets_its_answer_under_the_strict_schema_without_repair() -> None:
    @tool
    def capital_of(country: str) -> str:
        """Look up a country's capital."""
        return f"{country}: Paris"

    fake = FakeOpenAI(calls("capital_of", {"country": "France"}), answer(json.dumps(ANSWER)))
    agent = Agent(fake.model(), tools=[capital_of], output_schema=Capital)

    result = await agent.arun("What is the capital of France?")

    assert result.parsed == Capital(**ANSWER)
    assert result.repair_turns == 0
    assert len(fake.bodies) == 2
    for body in fake.bodies:
        assert body["response_format"]["json_schema"]["strict"] is True
        assert body["tools"][0]["function"]["strict"] is True
        assert body["tools"][0]["function"]["parameters"]["additionalProperties"] is False


async def test_an_answer_no_provider_mode_held_is_repaired_and_counted() -> None:
    """A prompt-only server: the invalid answer gets one repair turn, counted in the result."""

    @tool
    def capital_of(country: str) -> str:
        """Look up a country's capital."""
        return f"{country}: Paris"

    fake = FakeOpenAI(answer("Paris, I think."), answer(json.dumps(ANSWER)))
    model = fake.model(base_url="http://127.0.0.1:8080/v1", openai_structured_output="prompt")

    result = await Agent(model, tools=[capital_of], output_schema=Capital).arun("Capital?")

    assert result.parsed == Capital(**ANSWER)
    assert result.repair_turns == 1
    first, repair = fake.bodies
    assert "tools" in first and "tools" not in repair
    assert "response_format" not in first and "response_format" not in repair


# -- Anthropic ---------------------------------------------------------------------------------


class FakeAnthropic:
    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content))
        return httpx2.Response(OK, json=self.replies.pop(0))

    def model(self, **settings: Any) -> AnthropicModel:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return AnthropicModel("claude-sonnet-4-6", api_key="k", http_client=client, **settings)


def claude(content: list[dict[str, Any]], stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 10},
    }


# Anthropic's strict tools: the SDK's `transform_schema` closes objects and moves what strict
# mode refuses (a default) into the description; optional properties stay optional.
ANTHROPIC_SEARCH = {
    "name": "search",
    "description": "Search the corpus.",
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "description": "{default: 5}"},
        },
        "additionalProperties": False,
        "required": ["query"],
    },
    "strict": True,
}
ANTHROPIC_CAPITAL = {
    "type": "object",
    "title": "Capital",
    "properties": {
        "country": {"type": "string", "title": "Country"},
        "capital": {"type": "string", "title": "Capital"},
    },
    "additionalProperties": False,
    "required": ["country", "capital"],
}


async def test_anthropic_native_output_format_goes_with_strict_tools() -> None:
    fake = FakeAnthropic(claude([{"type": "text", "text": json.dumps(ANSWER)}]))

    response = await fake.model().request(ASK, tools=[SEARCH], output_schema=CAPITAL)

    assert fake.bodies[0] == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "What is the capital of France?"}],
            }
        ],
        "tools": [ANTHROPIC_SEARCH],
        "output_config": {"format": {"type": "json_schema", "schema": ANTHROPIC_CAPITAL}},
    }
    assert response.structured == ANSWER
    assert response.output_mode == "native"


async def test_anthropic_output_tool_is_offered_while_working_and_forced_when_done() -> None:
    fake = FakeAnthropic(
        claude(
            [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "x"}}],
            "tool_use",
        ),
        claude(
            [{"type": "tool_use", "id": "toolu_2", "name": "final_Capital", "input": ANSWER}],
            "tool_use",
        ),
    )
    model = fake.model(anthropic_structured_output="tool")
    output_tool = {
        "name": "final_Capital",
        "description": "Submit the final answer as this tool's input.",
        "input_schema": ANTHROPIC_CAPITAL,
        "strict": True,
    }

    working = await model.request(ASK, tools=[SEARCH], output_schema=CAPITAL)
    done = await model.request(ASK, output_schema=CAPITAL)

    offered, forced = fake.bodies
    assert offered["tools"] == [ANTHROPIC_SEARCH, output_tool]
    assert "tool_choice" not in offered  # the model chooses while it works
    assert "output_config" not in offered
    assert forced["tools"] == [output_tool]
    assert forced["tool_choice"] == {"type": "tool", "name": "final_Capital"}
    assert [call.name for call in working.tool_calls] == ["search"]
    assert working.output_mode == "prompt" and working.structured is None
    assert done.structured == ANSWER and done.output_mode == "tool"
