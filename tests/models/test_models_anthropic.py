"""AnthropicModel against the real Anthropic SDK over a local mock transport (no network)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx2
import pytest
from anthropic.lib._parse._transform import transform_schema
from pydantic import BaseModel, Field

from sleuth.models import (
    Message,
    ModelRequestParameters,
    NonRetryableModelError,
    OutputSchema,
    RetryableModelError,
    ToolCall,
    ToolSpec,
)
from sleuth.models.anthropic import AnthropicModel


@pytest.fixture(autouse=True)
def no_base_url_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests talk to the default endpoint unless they set one."""
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


class FakeAnthropic:
    """Answers each request with the next queued (status, body, headers) and records requests."""

    def __init__(self, *replies: tuple[int, dict[str, Any], dict[str, str]]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        status, body, headers = self.replies.pop(0)
        return httpx2.Response(status, json=body, headers=headers)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]

    def model(self, name: str = "claude-sonnet-4-6", **settings: Any) -> AnthropicModel:
        settings.setdefault("api_key", "sk-ant-test")
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return AnthropicModel(name, http_client=client, **settings)


def message(content: list[dict[str, Any]], stop_reason: str = "end_turn") -> dict[str, Any]:
    """A Messages API response body as api.anthropic.com sends it."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6-20260217",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 25,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 5,
            "output_tokens": 12,
            "service_tier": "standard",
        },
    }


def api_error(type_: str, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": text}}


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


async def test_plain_text_system_prompt_and_usage() -> None:
    fake = FakeAnthropic((OK, message([{"type": "text", "text": "Hello there."}]), {}))

    response = await fake.model().request(
        [Message(role="system", content="Be brief."), Message(role="user", content="Hi")]
    )

    assert response.text == "Hello there."
    assert response.tool_calls == []
    # Cache reads are input tokens too.
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 12)
    assert response.finish_reason == "end_turn"
    assert response.model == "claude-sonnet-4-6-20260217"
    (request,) = fake.requests
    assert request.url.path == "/v1/messages"
    assert request.headers["authorization"] == "Bearer sk-ant-test"
    body = fake.bodies[0]
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert body["max_tokens"] == 4096
    assert "tools" not in body and "output_config" not in body


async def test_tool_use_round_trip_and_message_mapping() -> None:
    reply = message(
        [
            {"type": "text", "text": "Let me look that up."},
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "search",
                "input": {"query": "crm market"},
            },
        ],
        stop_reason="tool_use",
    )
    fake = FakeAnthropic((OK, reply, {}))
    history = [
        Message(role="system", content="You research."),
        Message(role="user", content="Size the CRM market"),
        Message(
            role="assistant",
            content="",
            tool_calls=[
                ToolCall(id="toolu_1", name="search", arguments={"query": "crm"}),
                ToolCall(id="toolu_2", name="search", arguments={"query": "crm size"}),
            ],
        ),
        Message(role="tool", tool_call_id="toolu_1", content="CRM is $80bn"),
        Message(role="tool", tool_call_id="toolu_2", content="growing 12%"),
        Message(role="system", content="Budget: 2 more steps."),
    ]

    response = await fake.model(anthropic_effort="low").request(
        history, tools=[SEARCH], tool_choice="required", max_output_tokens=300
    )

    assert response.text == "Let me look that up."
    assert response.finish_reason == "tool_use"
    assert response.tool_calls == [
        ToolCall(
            id="toolu_01A09q90qw90lq917835lq9", name="search", arguments={"query": "crm market"}
        )
    ]
    body = fake.bodies[0]
    assert body["system"] == "You research."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Size the CRM market"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "crm"}},
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "search",
                    "input": {"query": "crm size"},
                },
            ],
        },
        {
            # Both results of one assistant turn arrive in one user turn, and a later system
            # message keeps its place as user text.
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "CRM is $80bn"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "growing 12%"},
                {"type": "text", "text": "Budget: 2 more steps."},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "search",
            "description": "Search the corpus.",
            "input_schema": {**SEARCH.parameters, "additionalProperties": False},
            "strict": True,
        }
    ]
    assert body["tool_choice"] == {"type": "any"}
    assert body["max_tokens"] == 300
    assert body["output_config"] == {"effort": "low"}


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("search", {"type": "tool", "name": "search"}),
    ],
)
async def test_tool_choice_mapping(choice: str, expected: dict[str, Any]) -> None:
    fake = FakeAnthropic((OK, message([{"type": "text", "text": "ok"}]), {}))
    await fake.model().request(
        [Message(role="user", content="x")], tools=[SEARCH], tool_choice=choice
    )
    assert fake.bodies[0]["tool_choice"] == expected


class Source(BaseModel):
    url: str


class Report(BaseModel):
    answer: str
    confidence: float = Field(0.5, ge=0, le=1)
    sources: list[Source] = []


ANSWER = {"answer": "CRM is large", "confidence": 0.8, "sources": [{"url": "https://example.com"}]}
REPORT_SCHEMA = OutputSchema(name="Report", json_schema=Report.model_json_schema())


async def test_native_structured_output() -> None:
    fake = FakeAnthropic((OK, message([{"type": "text", "text": json.dumps(ANSWER)}]), {}))

    response = await fake.model().request(
        [Message(role="user", content="report")], output_schema=REPORT_SCHEMA
    )

    assert response.structured == ANSWER
    Report.model_validate(response.structured)
    output_format = fake.bodies[0]["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    schema = output_format["schema"]
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Source"]["additionalProperties"] is False
    assert "tools" not in fake.bodies[0]


async def test_tool_mode_structured_output_forces_the_output_tool() -> None:
    reply = message(
        [{"type": "tool_use", "id": "toolu_9", "name": "final_Report", "input": ANSWER}],
        stop_reason="tool_use",
    )
    fake = FakeAnthropic((OK, reply, {}))

    response = await fake.model(anthropic_structured_output="tool").request(
        [Message(role="user", content="report")], output_schema=REPORT_SCHEMA
    )

    assert response.structured == ANSWER
    assert response.tool_calls == []
    assert json.loads(response.text) == ANSWER
    body = fake.bodies[0]
    assert "output_config" not in body
    assert body["tools"][0]["name"] == "final_Report"
    assert body["tools"][0]["input_schema"] == transform_schema(Report.model_json_schema())
    assert body["tools"][0]["strict"] is True
    assert response.output_mode == "tool"
    assert body["tool_choice"] == {"type": "tool", "name": "final_Report"}


async def test_429_retry_after_http_date() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    fake = FakeAnthropic(
        (
            429,
            api_error("rate_limit_error", "Number of request tokens has exceeded your rate limit"),
            {"retry-after": format_datetime(when, usegmt=True)},
        )
    )
    with pytest.raises(RetryableModelError) as caught:
        await fake.model().request([Message(role="user", content="x")])
    assert caught.value.status_code == 429
    assert caught.value.retry_after is not None and 20 < caught.value.retry_after <= 30
    assert "exceeded your rate limit" in str(caught.value)


async def test_529_overloaded_is_retryable_and_sent_exactly_once() -> None:
    fake = FakeAnthropic((529, api_error("overloaded_error", "Overloaded"), {}))
    with pytest.raises(RetryableModelError) as caught:
        await fake.model().request([Message(role="user", content="x")])
    assert caught.value.status_code == 529
    assert len(fake.requests) == 1


async def test_500_is_retryable_and_sent_exactly_once() -> None:
    fake = FakeAnthropic((500, api_error("api_error", "Internal server error"), {}))
    with pytest.raises(RetryableModelError):
        await fake.model().request([Message(role="user", content="x")])
    assert len(fake.requests) == 1


async def test_400_is_not_retryable_and_quotes_the_provider() -> None:
    fake = FakeAnthropic(
        (
            400,
            api_error("invalid_request_error", "messages: text content blocks must be non-empty"),
            {},
        )
    )
    with pytest.raises(NonRetryableModelError) as caught:
        await fake.model().request([Message(role="user", content="x")])
    assert caught.value.status_code == 400
    assert "text content blocks must be non-empty" in str(caught.value)
    assert len(fake.requests) == 1


async def test_404_points_at_the_model_name() -> None:
    fake = FakeAnthropic((404, api_error("not_found_error", "model: claude-nope"), {}))
    with pytest.raises(NonRetryableModelError, match="check the model name 'claude-nope'"):
        await fake.model("claude-nope").request([Message(role="user", content="x")])


async def test_timeout_is_retryable() -> None:
    def stall(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("read timed out", request=request)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(stall))
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", http_client=client)
    with pytest.raises(RetryableModelError, match="timed out"):
        await model.request([Message(role="user", content="x")])


def test_missing_key_names_the_environment_variable() -> None:
    with pytest.raises(NonRetryableModelError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-6")


def test_tool_message_without_call_id_fails_loudly() -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="k")
    with pytest.raises(NonRetryableModelError, match="tool_call_id"):
        model._params([Message(role="tool", content="x")], ModelRequestParameters())


async def test_schema_native_mode_cannot_express_falls_back_to_the_output_tool() -> None:
    class Loose(BaseModel):
        payload: Any

    reply = message(
        [{"type": "tool_use", "id": "toolu_3", "name": "final_Loose", "input": {"payload": [1]}}],
        stop_reason="tool_use",
    )
    fake = FakeAnthropic((OK, reply, {}))
    schema = OutputSchema(name="Loose", json_schema=Loose.model_json_schema())

    response = await fake.model().request([Message(role="user", content="x")], output_schema=schema)

    assert response.structured == {"payload": [1]}
    body = fake.bodies[0]
    assert "output_config" not in body
    assert body["tool_choice"] == {"type": "tool", "name": "final_Loose"}
