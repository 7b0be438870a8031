"""Tool calls written in text (the local model's decoding, weaker OpenAI-compatible servers)."""

from __future__ import annotations

import pytest

from sleuth.models import ToolSpec
from sleuth.models.toolcalls import intended_tool, parse_tool_calls

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

    content, calls, malformed = parse_tool_calls(text, OFFERED)

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

    content, calls, malformed = parse_tool_calls(text, OFFERED)

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
    _, calls, malformed = parse_tool_calls(text, OFFERED)

    assert calls == [] and malformed


def test_json_that_names_no_offered_tool_is_plain_text() -> None:
    text = '{"name": "Acme", "arguments": {"topic": "crm"}}'

    assert parse_tool_calls(text, OFFERED) == (text, [], False)
    assert parse_tool_calls("Revenue grew 12%.", OFFERED) == ("Revenue grew 12%.", [], False)
    assert parse_tool_calls('<tool_call>{"name": "lookup"}', []) == (
        '<tool_call>{"name": "lookup"}',
        [],
        False,
    )


@pytest.mark.parametrize(
    "text",
    [
        '[TOOL_CALLS] [{"name": "lookup", "arguments": {"topic": "crm"}}]',  # Mistral
        '<|python_tag|>{"name": "lookup", "parameters": {"topic": "crm"}}',  # Llama 3.1
        '```json\n[{"name": "lookup", "arguments": "{\\"topic\\": \\"crm\\"}"}]\n```',
    ],
)
def test_other_servers_call_formats_are_calls(text: str) -> None:
    content, calls, malformed = parse_tool_calls(text, OFFERED)

    assert [(c.name, c.arguments) for c in calls] == [("lookup", {"topic": "crm"})]
    assert not malformed
    assert content == ""


def test_llama_cpp_function_calling_prefix_is_a_call() -> None:
    content, calls, malformed = parse_tool_calls('functions.lookup:\n{ "topic": "crm" }', OFFERED)
    assert [(c.name, c.arguments) for c in calls] == [("lookup", {"topic": "crm"})]
    assert content == "" and not malformed

    # The server cut the call off after its name: a call the model meant, to ask for by name.
    cut = "functions.lookup:"
    assert parse_tool_calls(cut, OFFERED) == ("", [], True)
    assert intended_tool(cut, OFFERED) == "lookup"
    assert intended_tool('<tool_call>{"name": "lookup", "arguments": {', OFFERED) == "lookup"
    assert intended_tool("functions.unknown:", OFFERED) is None
