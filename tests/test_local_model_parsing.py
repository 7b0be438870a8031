"""How the local model's decoded text becomes tool calls, and its grammars (no weights needed)."""

from __future__ import annotations

import pytest

from sleuth.models import Message, NonRetryableModelError, OutputSchema, ToolSpec
from sleuth.models.local import (
    _awaiting_first_action,
    _default_threads,
    _grammar,
    _parse_tool_calls,
)

LOOKUP = ToolSpec(
    name="lookup",
    parameters={
        "type": "object",
        "properties": {"topic": {"type": "string"}},
        "required": ["topic"],
        "additionalProperties": False,
    },
)
OFFERED = [LOOKUP]


def test_tagged_calls_are_parsed_and_the_prose_before_them_kept() -> None:
    text = (
        "Let me check.\n<tool_call>\n"
        '{"name": "lookup", "arguments": {"topic": "crm"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "lookup", "arguments": "{\\"topic\\": \\"pricing\\"}"}\n</tool_call>'
    )

    content, calls, malformed = _parse_tool_calls(text, OFFERED)

    assert content == "Let me check."
    assert [(c.name, c.arguments) for c in calls] == [
        ("lookup", {"topic": "crm"}),
        ("lookup", {"topic": "pricing"}),
    ]
    assert not malformed
    assert len({c.id for c in calls}) == 2


def test_bare_call_objects_after_prose_or_in_a_fence_are_calls() -> None:
    text = (
        "I will look it up:\n```json\n"
        '{"name": "lookup", "arguments": {"topic": "crm"}}\n'
        '{"name": "lookup", "arguments": {"topic": "pricing"}}\n```'
    )

    content, calls, malformed = _parse_tool_calls(text, OFFERED)

    assert content == "I will look it up:"
    assert [c.arguments["topic"] for c in calls] == ["crm", "pricing"]
    assert not malformed


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "lookup", "arguments": {"topic": "crm", "required": ["topic"]}}',  # extra key
        '{"name": "lookup", "arguments": {}}',  # missing required
        '<tool_call>\n{"name": "lookup", "arguments": {"topic": \n</tool_call>',  # cut off
        'Calling {"name": "lookup", "arguments": {"topic": "c',  # bare and cut off
    ],
)
def test_a_call_that_does_not_fit_is_reported_malformed(text: str) -> None:
    _, calls, malformed = _parse_tool_calls(text, OFFERED)

    assert calls == [] and malformed


def test_json_that_names_no_offered_tool_is_plain_text() -> None:
    text = '{"name": "Acme", "arguments": {"topic": "crm"}}'

    assert _parse_tool_calls(text, OFFERED) == (text, [], False)
    assert _parse_tool_calls("Revenue grew 12%.", OFFERED) == ("Revenue grew 12%.", [], False)
    assert _parse_tool_calls('<tool_call>{"name": "lookup"}', []) == (
        '<tool_call>{"name": "lookup"}',
        [],
        False,
    )


def test_the_first_answer_to_a_user_message_is_the_one_awaiting_an_action() -> None:
    user = Message(role="user", content="q")
    tool = Message(role="tool", content="r", tool_call_id="1")
    assistant = Message(role="assistant", content="")

    assert _awaiting_first_action([Message(role="system", content="s"), user])
    assert not _awaiting_first_action([user, assistant, tool])
    assert _awaiting_first_action([user, assistant, tool, assistant, user])


def test_grammars_combine_calls_and_answer_schemas_with_shared_definitions() -> None:
    pytest.importorskip("llama_cpp")
    answer = OutputSchema(
        name="Report",
        json_schema={
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
            "required": ["items"],
            "$defs": {"Item": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        },
    )

    grammar = _grammar(calls=OFFERED, answer=answer)

    assert grammar is not None
    assert "<tool_call>" in grammar._grammar  # the call alternative is there


def test_thread_count_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_LOCAL_THREADS", "1")
    assert _default_threads() == 1
    monkeypatch.setenv("SLEUTH_LOCAL_THREADS", "many")
    with pytest.raises(NonRetryableModelError, match="SLEUTH_LOCAL_THREADS"):
        _default_threads()
    monkeypatch.delenv("SLEUTH_LOCAL_THREADS")
    assert _default_threads() >= 1
