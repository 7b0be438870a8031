"""`ScriptedModel`: plays turns back in order, records calls, refuses unscripted ones."""

from __future__ import annotations

import pytest

from sleuth.models import Model, RetryableModelError
from sleuth.models.base import Message, ModelResponse, OutputSchema, ToolSpec
from sleuth.models.scripted import (
    ModelCall,
    ScriptedModel,
    UnscriptedCallError,
    structured,
    text,
    tool_call,
    tool_calls,
)


def user(content: str) -> list[Message]:
    return [Message(role="system", content="sys"), Message(role="user", content=content)]


async def test_turns_play_back_in_order_and_every_call_is_recorded() -> None:
    model = ScriptedModel(
        [text("hello"), tool_call("search", query="crm"), structured({"answer": 1})]
    )
    assert isinstance(model, Model)
    spec = ToolSpec(name="search")
    schema = OutputSchema(name="out", json_schema={"type": "object"})

    first = await model.request(user("hi"), max_output_tokens=50)
    second = await model.request(user("find"), tools=[spec], tool_choice="auto")
    third = await model.request(user("answer"), output_schema=schema)

    assert first.text == "hello" and first.tool_calls == []
    assert [(c.name, c.arguments) for c in second.tool_calls] == [("search", {"query": "crm"})]
    assert third.structured == {"answer": 1} and third.text == '{"answer": 1}'
    assert [c.last_user_text for c in model.calls] == ["hi", "find", "answer"]
    assert model.calls[0].max_output_tokens == 50
    assert model.calls[1].tool_names == ["search"] and model.calls[1].tool_choice == "auto"
    assert model.calls[2].output_schema == schema
    assert model.calls[0].system_text == "sys"
    model.assert_complete()


async def test_an_unscripted_call_raises() -> None:
    model = ScriptedModel([text("only one")])
    await model.request(user("first"))
    with pytest.raises(UnscriptedCallError, match="got call #2 but only 1 turns"):
        await model.request(user("second question"))
    assert len(model.calls) == 2


async def test_assert_complete_fails_while_turns_remain() -> None:
    model = ScriptedModel([text("a"), text("b")])
    await model.request(user("q"))
    assert model.remaining == 1
    with pytest.raises(AssertionError, match="1 unused turn"):
        model.assert_complete()


async def test_a_scripted_exception_is_raised_at_its_turn() -> None:
    outage = RetryableModelError("rate limited", status_code=429, retry_after=2.0)
    model = ScriptedModel([outage, text("recovered")])
    with pytest.raises(RetryableModelError) as raised:
        await model.request(user("q"))
    assert raised.value.retry_after == 2.0
    assert (await model.request(user("q"))).text == "recovered"


async def test_callable_turns_and_responders_compute_answers_from_the_call() -> None:
    def echo(call: ModelCall) -> ModelResponse:
        return text(f"echo {call.last_user_text}")

    async def async_echo(call: ModelCall) -> ModelResponse:
        return text(f"async {call.last_user_text}")

    model = ScriptedModel([echo], responder=async_echo)
    assert (await model.request(user("one"))).text == "echo one"
    assert (await model.request(user("two"))).text == "async two"
    assert (await model.request(user("three"))).text == "async three"
    sync_responder = ScriptedModel(responder=echo)
    assert (await sync_responder.request(user("four"))).text == "echo four"


async def test_recorded_calls_and_returned_turns_are_copies() -> None:
    messages = user("original")
    turn = tool_call("search", query="x")
    model = ScriptedModel([turn])
    response = await model.request(messages)
    messages[1].content = "changed later"
    response.tool_calls[0].arguments["query"] = "mutated"
    assert model.calls[0].last_user_text == "original"
    assert turn.tool_calls[0].arguments == {"query": "x"}


def test_turn_helpers_build_real_shaped_responses() -> None:
    several = tool_calls(("a", {"x": 1}), ("b", {}), input_tokens=7, output_tokens=2)
    assert [c.name for c in several.tool_calls] == ["a", "b"]
    assert len({c.id for c in several.tool_calls}) == 2
    assert several.usage.total_tokens == 9 and several.finish_reason == "tool_calls"
    answer = text("x" * 40, input_tokens=3)
    assert answer.usage.output_tokens == 10 and answer.finish_reason == "stop"
