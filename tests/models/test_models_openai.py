"""OpenAIModel against the real OpenAI SDK over a local mock transport (no network)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel, Field

from sleuth.models import (
    Message,
    NonRetryableModelError,
    OutputSchema,
    RetryableModelError,
    ToolCall,
    ToolSpec,
)
from sleuth.models.openai import OpenAIModel
from sleuth.models.openai_compat import MEMORY
from sleuth.models.openai_messages import INVALID_ARGUMENTS_KEY
from sleuth.models.openai_schema import strict_json_schema
from tests.helpers.fake_openai import FakeOpenAI, api_error, completion


@pytest.fixture(autouse=True)
def no_base_url_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests talk to the default endpoint unless they set one, in the default structured
    output mode, with nothing remembered about the server from earlier tests."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("SLEUTH_OPENAI_STRUCTURED_OUTPUT", raising=False)
    MEMORY.forget()


OK = 200
SEARCH = ToolSpec(
    name="search",
    description="Search the corpus.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)
FETCH = ToolSpec(name="fetch", description="Fetch a page.")


async def test_plain_text_answer_and_usage() -> None:
    fake = FakeOpenAI((OK, completion({"content": "Hello there."}), {}))
    model = fake.model()

    response = await model.request(
        [Message(role="system", content="Be brief."), Message(role="user", content="Hi")],
        max_output_tokens=50,
    )

    assert response.text == "Hello there."
    assert response.tool_calls == []
    assert response.structured is None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (19, 10)
    assert response.finish_reason == "stop"
    assert response.model == "gpt-4o-mini-2024-07-18"
    (request,) = fake.requests
    assert request.url.path.endswith("/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    body = fake.bodies[0]
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert body["max_completion_tokens"] == 50
    assert "tools" not in body and "response_format" not in body


async def test_tool_calls_round_trip_and_message_mapping() -> None:
    reply = completion(
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "crm market"}'},
                },
                {
                    "id": "call_def",
                    "type": "function",
                    "function": {"name": "fetch", "arguments": "{not json"},
                },
            ],
        },
        finish_reason="tool_calls",
    )
    fake = FakeOpenAI((OK, reply, {}))
    model = fake.model(openai_temperature=0.2, openai_parallel_tool_calls=False)
    history = [
        Message(role="user", content="Size the CRM market"),
        Message(
            role="assistant",
            content="Searching first.",
            tool_calls=[ToolCall(id="call_1", name="search", arguments={"query": "crm"})],
        ),
        Message(role="tool", tool_call_id="call_1", name="search", content="CRM is $80bn"),
    ]

    response = await model.request(history, tools=[SEARCH, FETCH], tool_choice="required")

    assert response.text == ""
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls[0] == ToolCall(
        id="call_abc", name="search", arguments={"query": "crm market"}
    )
    # Malformed arguments reach the tool's validation (and so the model) instead of crashing.
    assert response.tool_calls[1].arguments == {INVALID_ARGUMENTS_KEY: "{not json"}
    body = fake.bodies[0]
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "Searching first.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"query": "crm"}'},
            }
        ],
    }
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "CRM is $80bn",
    }
    # Strict tool parameters: the object closed, every property required.
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the corpus.",
            "parameters": {**SEARCH.parameters, "additionalProperties": False},
            "strict": True,
        },
    }
    assert body["tool_choice"] == "required"
    assert body["temperature"] == 0.2
    assert body["parallel_tool_calls"] is False


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("search", {"type": "function", "function": {"name": "search"}}),
    ],
)
async def test_tool_choice_mapping(choice: str, expected: Any) -> None:
    fake = FakeOpenAI((OK, completion({"content": "ok"}), {}))
    await fake.model().request(
        [Message(role="user", content="x")], tools=[SEARCH], tool_choice=choice
    )
    assert fake.bodies[0]["tool_choice"] == expected


async def test_tool_choice_naming_an_absent_tool_fails_before_sending() -> None:
    fake = FakeOpenAI()
    with pytest.raises(NonRetryableModelError, match="'missing' is not one of the request's tools"):
        await fake.model().request(
            [Message(role="user", content="x")], tools=[SEARCH], tool_choice="missing"
        )
    assert fake.requests == []


class Source(BaseModel):
    url: str


class Report(BaseModel):
    answer: str
    confidence: float = Field(0.5, ge=0, le=1)
    main_source: Source = Field(description="the best source")
    note: str | None = None


async def test_structured_output_uses_strict_json_schema_and_parses() -> None:
    answer = {
        "answer": "CRM is large",
        "confidence": 0.8,
        "main_source": {"url": "https://example.com/crm"},
        "note": None,
    }
    fake = FakeOpenAI((OK, completion({"content": json.dumps(answer)}), {}))
    schema = OutputSchema(name="Report", json_schema=Report.model_json_schema())

    response = await fake.model().request(
        [Message(role="user", content="report")], output_schema=schema
    )

    assert response.structured == answer
    Report.model_validate(response.structured)
    response_format = fake.bodies[0]["response_format"]
    assert response_format["type"] == "json_schema"
    sent = response_format["json_schema"]
    assert sent["name"] == "Report" and sent["strict"] is True
    assert sent["schema"]["additionalProperties"] is False
    assert sent["schema"]["required"] == ["answer", "confidence", "main_source", "note"]
    # The described `$ref` is inlined and closed too; defaults are dropped.
    main = sent["schema"]["properties"]["main_source"]
    assert main["additionalProperties"] is False and main["required"] == ["url"]
    assert main["description"] == "the best source"
    assert "default" not in sent["schema"]["properties"]["confidence"]


async def test_schema_with_open_dict_is_sent_unchanged_and_not_strict() -> None:
    class Tally(BaseModel):
        counts: dict[str, int]

    fake = FakeOpenAI((OK, completion({"content": '{"counts": {"a": 1}}'}), {}))
    schema = OutputSchema(name="Tally counts!", json_schema=Tally.model_json_schema())

    response = await fake.model().request([Message(role="user", content="x")], output_schema=schema)

    assert response.structured == {"counts": {"a": 1}}
    sent = fake.bodies[0]["response_format"]["json_schema"]
    assert sent == {"name": "Tally_counts_", "schema": Tally.model_json_schema(), "strict": False}


async def test_structured_output_that_is_not_json_leaves_structured_empty() -> None:
    fake = FakeOpenAI((OK, completion({"content": "Sorry, here it is: {oops"}), {}))
    schema = OutputSchema(name="Report", json_schema=Report.model_json_schema())
    response = await fake.model().request([Message(role="user", content="x")], output_schema=schema)
    assert response.structured is None
    assert response.text == "Sorry, here it is: {oops"


def test_strict_json_schema_rules() -> None:
    assert strict_json_schema({"type": "string"}) is None
    assert (
        strict_json_schema(
            {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}
        )
        is None
    )
    strict = strict_json_schema(
        {
            "type": "object",
            "properties": {
                "tags": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"k": {"type": "string"}}},
                }
            },
        }
    )
    assert strict is not None
    item = strict["properties"]["tags"]["items"]
    assert item == {
        "type": "object",
        "properties": {"k": {"type": "string"}},
        "required": ["k"],
        "additionalProperties": False,
    }


async def test_429_is_retryable_with_retry_after_seconds() -> None:
    fake = FakeOpenAI(
        (
            429,
            api_error("Rate limit reached for gpt-4o-mini", "requests", "rate_limit_exceeded"),
            {"retry-after": "7"},
        )
    )
    with pytest.raises(RetryableModelError) as caught:
        await fake.model().request([Message(role="user", content="x")])
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 7.0
    assert "Rate limit reached for gpt-4o-mini" in str(caught.value)
    assert len(fake.requests) == 1


async def test_retry_after_ms_wins() -> None:
    fake = FakeOpenAI(
        (429, api_error("slow down", "requests"), {"retry-after-ms": "1500", "retry-after": "9"})
    )
    with pytest.raises(RetryableModelError) as caught:
        await fake.model().request([Message(role="user", content="x")])
    assert caught.value.retry_after == 1.5


async def test_500_is_retryable_and_sent_exactly_once() -> None:
    fake = FakeOpenAI(
        (
            500,
            api_error("The server had an error while processing your request.", "server_error"),
            {},
        )
    )
    with pytest.raises(RetryableModelError) as caught:
        await fake.model().request([Message(role="user", content="x")])
    assert caught.value.status_code == 500
    assert caught.value.retry_after is None
    # max_retries=0: the SDK made no retry of its own.
    assert len(fake.requests) == 1


async def test_400_is_not_retryable_and_quotes_the_provider() -> None:
    fake = FakeOpenAI(
        (
            400,
            api_error(
                "Invalid schema for response_format 'Report': 'required' is required",
                "invalid_request_error",
            ),
            {},
        )
    )
    with pytest.raises(NonRetryableModelError) as caught:
        await fake.model().request([Message(role="user", content="x")])
    assert caught.value.status_code == 400
    assert "Invalid schema for response_format 'Report'" in str(caught.value)
    assert len(fake.requests) == 1


async def test_401_names_the_key_variable() -> None:
    fake = FakeOpenAI((401, api_error("Incorrect API key provided", "invalid_request_error"), {}))
    with pytest.raises(NonRetryableModelError, match="OPENAI_API_KEY"):
        await fake.model().request([Message(role="user", content="x")])


async def test_timeout_and_connection_errors_are_retryable() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    def stall(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("read timed out", request=request)

    for handler, expected in ((refuse, "could not connect"), (stall, "timed out")):
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        model = OpenAIModel("gpt-4o-mini", api_key="sk-test", http_client=client)
        with pytest.raises(RetryableModelError, match=expected):
            await model.request([Message(role="user", content="x")])


def test_missing_key_names_the_environment_variable() -> None:
    with pytest.raises(NonRetryableModelError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4o-mini")


async def test_base_url_server_needs_no_key_and_gets_max_tokens() -> None:
    fake = FakeOpenAI((OK, completion({"content": "local says hi"}), {}))
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(fake.handle))
    model = OpenAIModel("qwen", base_url="http://127.0.0.1:8080/v1", http_client=client)

    response = await model.request([Message(role="user", content="x")], max_output_tokens=20)

    assert response.text == "local says hi"
    assert str(fake.requests[0].url) == "http://127.0.0.1:8080/v1/chat/completions"
    assert fake.bodies[0]["max_tokens"] == 20
    assert "max_completion_tokens" not in fake.bodies[0]


async def test_agent_tool_loop_over_the_real_sdk() -> None:
    from sleuth.agent import Agent
    from sleuth.tools import tool

    @tool
    def market_size(market: str) -> str:
        """Look up a market's size."""
        return f"{market}: $80bn"

    call = {
        "id": "call_77",
        "type": "function",
        "function": {"name": "market_size", "arguments": '{"market": "CRM"}'},
    }
    fake = FakeOpenAI(
        (OK, completion({"content": None, "tool_calls": [call]}, "tool_calls"), {}),
        (OK, completion({"content": "The CRM market is about $80bn."}), {}),
    )
    agent = Agent(fake.model(), tools=[market_size], system_prompt="You size markets.")

    result = await agent.arun("How big is CRM?")

    assert result.message == "The CRM market is about $80bn."
    assert [(item.tool, item.success) for item in result.evidence] == [("market_size", True)]
    assert result.usage.input_tokens == 38
    second = fake.bodies[1]["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "call_77"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_77", "content": "CRM: $80bn"}
