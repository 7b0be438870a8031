"""OpenAIModel against servers that support less than api.openai.com (mock transport, real SDK):
structured-output modes and the `auto` fallback, token probabilities, tool calls left in text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from sleuth.models import (
    Message,
    NonRetryableModelError,
    OutputSchema,
    RetryableModelError,
    ToolCall,
    ToolSpec,
)
from sleuth.models.base import TokenLogprob, TopLogprob
from sleuth.models.openai_compat import MEMORY
from tests.helpers.fake_openai import FakeOpenAI, Reply, api_error, completion

OK = 200


@pytest.fixture(autouse=True)
def fresh_server_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("SLEUTH_OPENAI_STRUCTURED_OUTPUT", raising=False)
    MEMORY.forget()


class Capital(BaseModel):
    country: str
    capital: str


CAPITAL = OutputSchema(name="Capital", json_schema=Capital.model_json_schema())
ANSWER = {"country": "France", "capital": "Paris"}
ASK = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="What is the capital of France?"),
]
SEARCH = ToolSpec(
    name="search",
    description="Search the corpus.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)
# What llama-cpp-python's server answers to `response_format: {"type": "json_schema", ...}`.
LLAMA_CPP_REFUSAL: Reply = (
    500,
    api_error(
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}",
        "internal_server_error",
    ),
    {},
)
JSON_OBJECT_REFUSAL: Reply = (
    400,
    api_error("response_format type json_object is not supported", "invalid_request_error"),
    {},
)
TOOLS_REFUSAL: Reply = (
    400,
    api_error("tool_choice is not supported by this model", "invalid_request_error"),
    {},
)


def answer_text(text: str) -> Reply:
    return (OK, completion({"content": text}), {})


def system_prompt(body: dict[str, Any]) -> str:
    assert body["messages"][0]["role"] == "system"
    return str(body["messages"][0]["content"])


async def test_auto_falls_back_through_every_mode_and_remembers_per_server_and_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = FakeOpenAI(
        LLAMA_CPP_REFUSAL,
        JSON_OBJECT_REFUSAL,
        TOOLS_REFUSAL,
        answer_text(f"Here you go:\n```json\n{json.dumps(ANSWER)}\n```"),
        answer_text(json.dumps(ANSWER)),
        answer_text(json.dumps(ANSWER)),
    )
    model = fake.model()

    first = await model.request(ASK, output_schema=CAPITAL)

    assert first.structured == ANSWER
    schema_mode, object_mode, tool_mode, prompt_mode = fake.bodies
    assert schema_mode["response_format"]["type"] == "json_schema"
    assert object_mode["response_format"] == {"type": "json_object"}
    assert "JSON schema" in system_prompt(object_mode)
    assert system_prompt(object_mode).startswith("You are terse.")
    assert tool_mode["tools"][0]["function"]["name"] == "final_Capital"
    assert tool_mode["tools"][0]["function"]["parameters"] == {
        **CAPITAL.json_schema,
        "additionalProperties": False,
    }
    assert tool_mode["tools"][0]["function"]["strict"] is True
    assert tool_mode["tool_choice"] == {"type": "function", "function": {"name": "final_Capital"}}
    assert "response_format" not in tool_mode
    assert "response_format" not in prompt_mode and "tools" not in prompt_mode
    assert json.dumps(CAPITAL.json_schema) in system_prompt(prompt_mode)
    logged = capsys.readouterr()
    assert (logged.out + logged.err).count("openai.structured_output_fallback") == 3

    # Remembered: the next request goes straight to the mode that worked, without a log line.
    second = await model.request(ASK, output_schema=CAPITAL)
    assert second.structured == ANSWER
    assert len(fake.requests) == 5
    assert "response_format" not in fake.bodies[4] and "tools" not in fake.bodies[4]
    assert "openai.structured_output_fallback" not in "".join(capsys.readouterr())

    # Per model: another model on the same server starts from json_schema again.
    await fake.model("other-model").request(ASK, output_schema=CAPITAL)
    assert fake.bodies[5]["response_format"]["type"] == "json_schema"


async def test_a_chosen_mode_the_server_refuses_fails_at_once_naming_the_setting() -> None:
    fake = FakeOpenAI(LLAMA_CPP_REFUSAL)

    with pytest.raises(NonRetryableModelError) as caught:
        await fake.model(openai_structured_output="json_schema").request(ASK, output_schema=CAPITAL)

    message = str(caught.value)
    assert "does not support 'response_format'" in message
    assert "SLEUTH_OPENAI_STRUCTURED_OUTPUT" in message and "json_object" in message
    assert "Input should be 'text' or 'json_object'" in message
    assert caught.value.status_code == 500
    assert len(fake.requests) == 1


async def test_the_mode_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_OPENAI_STRUCTURED_OUTPUT", "json_object")
    fake = FakeOpenAI(answer_text(json.dumps(ANSWER)))

    response = await fake.model().request(ASK, output_schema=CAPITAL)

    assert response.structured == ANSWER
    assert fake.bodies[0]["response_format"] == {"type": "json_object"}

    monkeypatch.setenv("SLEUTH_OPENAI_STRUCTURED_OUTPUT", "grammar")
    with pytest.raises(NonRetryableModelError, match="SLEUTH_OPENAI_STRUCTURED_OUTPUT='grammar'"):
        fake.model()
    with pytest.raises(
        NonRetryableModelError, match="auto, json_schema, json_object, tool, prompt"
    ):
        fake.model(openai_structured_output="xml")  # type: ignore[arg-type]


async def test_tool_mode_reads_the_answer_from_the_forced_call() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "final_Capital", "arguments": json.dumps(ANSWER)},
    }
    fake = FakeOpenAI(
        (OK, completion({"content": None, "tool_calls": [call]}, "tool_calls"), {}),
        # A server that ignores tool_choice and writes the answer as text.
        answer_text(f"Sure! {json.dumps(ANSWER)}"),
    )
    model = fake.model(openai_structured_output="tool")

    forced = await model.request(ASK, output_schema=CAPITAL)
    ignored = await model.request(ASK, output_schema=CAPITAL)

    assert forced.structured == ANSWER and json.loads(forced.text) == ANSWER
    assert forced.tool_calls == [] and forced.finish_reason == "stop"
    assert ignored.structured == ANSWER and ignored.tool_calls == []


async def test_prompt_mode_adds_a_system_message_when_there_is_none() -> None:
    fake = FakeOpenAI(answer_text(json.dumps(ANSWER)), answer_text("I cannot say."))
    model = fake.model(openai_structured_output="prompt")
    question = [Message(role="user", content="Capital of France?")]

    answered = await model.request(question, output_schema=CAPITAL)
    unanswered = await model.request(question, output_schema=CAPITAL)

    assert answered.structured == ANSWER
    assert unanswered.structured is None and unanswered.text == "I cannot say."
    messages = fake.bodies[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "JSON schema" in messages[0]["content"]


async def test_a_refused_parameter_is_never_retried_even_as_a_500() -> None:
    fake = FakeOpenAI(
        (500, api_error("Unrecognized request argument supplied: seed", "server_error"), {})
    )

    with pytest.raises(NonRetryableModelError, match="does not support 'seed'"):
        await fake.model(openai_seed=7).request(ASK)
    assert len(fake.requests) == 1


async def test_a_plain_server_error_stays_transient_whatever_was_sent() -> None:
    fake = FakeOpenAI(
        (500, api_error("The server had an error processing your request", "server_error"), {})
    )

    with pytest.raises(RetryableModelError):
        await fake.model().request(ASK, tools=[SEARCH], top_logprobs=2)
    assert len(fake.requests) == 1


JUDGE = [
    Message(role="system", content="Answer yes or no."),
    Message(role="user", content="Evidence: Paris is the capital of France.\nClaim: ...\n"),
]


def yes_with_logprobs() -> dict[str, Any]:
    return completion(
        {"content": "Yes"},
        finish_reason="length",
        logprobs={
            "content": [
                {
                    "token": "Yes",
                    "logprob": -0.1,
                    "bytes": [89, 101, 115],
                    "top_logprobs": [
                        {"token": "Yes", "logprob": -0.1, "bytes": None},
                        {"token": "No", "logprob": -2.4, "bytes": None},
                    ],
                }
            ],
            "refusal": None,
        },
    )


async def test_logprobs_are_requested_and_mapped() -> None:
    fake = FakeOpenAI((OK, yes_with_logprobs(), {}))

    response = await fake.model().request(JUDGE, max_output_tokens=1, top_logprobs=2)

    assert fake.bodies[0]["logprobs"] is True and fake.bodies[0]["top_logprobs"] == 2
    assert response.logprobs == [
        TokenLogprob(
            token="Yes",
            logprob=-0.1,
            top=[TopLogprob(token="Yes", logprob=-0.1), TopLogprob(token="No", logprob=-2.4)],
        )
    ]


async def test_without_top_logprobs_none_are_asked_for() -> None:
    fake = FakeOpenAI(answer_text("Yes"))
    response = await fake.model().request(JUDGE, max_output_tokens=1)
    assert "logprobs" not in fake.bodies[0] and response.logprobs is None


async def test_a_server_refusing_logprobs_is_asked_again_without_and_not_asked_again() -> None:
    refusal: Reply = (
        400,
        api_error(
            "Unsupported parameter: 'logprobs' is not supported with this model.",
            "invalid_request_error",
            code="unsupported_parameter",
            param="logprobs",
        ),
        {},
    )
    fake = FakeOpenAI(refusal, answer_text("Yes"), answer_text("No"))
    model = fake.model("o-reasoner")

    first = await model.request(JUDGE, max_output_tokens=1, top_logprobs=5)
    second = await model.request(JUDGE, max_output_tokens=1, top_logprobs=5)

    assert (first.text, first.logprobs) == ("Yes", None)
    assert (second.text, second.logprobs) == ("No", None)
    assert [("logprobs" in body) for body in fake.bodies] == [True, False, False]


async def test_top_logprobs_outside_the_apis_range_is_refused_before_sending() -> None:
    fake = FakeOpenAI()
    with pytest.raises(NonRetryableModelError, match="outside 0..20"):
        await fake.model().request(JUDGE, top_logprobs=50)
    assert fake.requests == []


async def test_tool_calls_left_in_the_text_are_parsed() -> None:
    written = (
        "Let me search.\n<tool_call>\n"
        '{"name": "search", "arguments": {"query": "crm market size"}}\n</tool_call>'
    )
    fake = FakeOpenAI(answer_text(written), answer_text(written))
    model = fake.model()

    response = await model.request(ASK, tools=[SEARCH])
    declined = await model.request(ASK, tools=[SEARCH], tool_choice="none")

    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("search", {"query": "crm market size"})
    ]
    assert response.text == "Let me search." and response.finish_reason == "tool_calls"
    # Sent explicitly: some servers show the model its tools only when tool_choice is set.
    assert fake.bodies[0]["tool_choice"] == "auto"
    assert declined.tool_calls == [] and declined.text == written


async def test_a_call_left_broken_in_the_text_is_asked_for_by_name() -> None:
    call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "search", "arguments": '{"query": "crm"}'},
    }
    fake = FakeOpenAI(
        # llama-cpp-python's chatml-function-calling, when its model starts a call as prose.
        answer_text("functions.search:"),
        (OK, completion({"content": None, "tool_calls": [call]}, "tool_calls"), {}),
    )

    response = await fake.model().request(ASK, tools=[SEARCH])

    assert [(c.name, c.arguments) for c in response.tool_calls] == [("search", {"query": "crm"})]
    assert [body["tool_choice"] for body in fake.bodies] == [
        "auto",
        {"type": "function", "function": {"name": "search"}},
    ]
    assert response.usage.input_tokens == 38  # both requests counted


CALLED = [
    Message(role="user", content="Size the CRM market"),
    Message(
        role="assistant",
        tool_calls=[ToolCall(id="call_1", name="search", arguments={"query": "crm"})],
    ),
    Message(role="tool", tool_call_id="call_1", name="search", content="CRM is $80bn"),
]
# llama-cpp-python's server on an assistant turn with `content: null` (a pydantic error, as a 500).
NULL_CONTENT_REFUSAL: Reply = (
    500,
    api_error(
        "1 validation error:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
        "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
        "string', 'input': None}",
        "internal_server_error",
    ),
    {},
)


async def test_a_server_wanting_string_content_gets_it_from_then_on() -> None:
    fake = FakeOpenAI(NULL_CONTENT_REFUSAL, answer_text("About $80bn."), answer_text("Yes."))
    model = fake.model()

    first = await model.request(CALLED, tools=[SEARCH])
    second = await model.request(CALLED, tools=[SEARCH])

    assert (first.text, second.text) == ("About $80bn.", "Yes.")
    assert [body["messages"][1]["content"] for body in fake.bodies] == [None, "", ""]


async def test_a_500_that_is_a_validation_error_is_not_transient() -> None:
    refusal: Reply = (
        500,
        api_error(
            "1 validation error: {'type': 'missing', 'loc': ('body', 'messages', 0, 'role'), "
            "'msg': 'Field required'}",
            "internal_server_error",
        ),
        {},
    )
    fake = FakeOpenAI(refusal)

    with pytest.raises(NonRetryableModelError, match="refused the request .* as invalid"):
        await fake.model().request(ASK)
    assert len(fake.requests) == 1
