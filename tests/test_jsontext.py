"""`json_from_text`: JSON out of what models really write."""

from __future__ import annotations

import pytest

from sleuth.jsontext import json_from_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"direct": true}', {"direct": True}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```\nThat is my answer.', {"a": 1}),
        ('Sure! Here it is: {"a": 1, "b": "x"} Hope that helps.', {"a": 1, "b": "x"}),
        ('["first", "second"]', ["first", "second"]),
        ('The subtasks:\n["a", "b"]\n', ["a", "b"]),
        (
            '{"outer": {"inner": [1, {"deep": [2, 3]}]}, "n": 4}',
            {"outer": {"inner": [1, {"deep": [2, 3]}]}, "n": 4},
        ),
        ('{"text": "a } inside and { here", "n": 1}', {"text": "a } inside and { here", "n": 1}),
        ('Use {braces} like so: {"ok": true}', {"ok": True}),
        ('{"a": 1} and then {"b": 2}', {"a": 1}),
    ],
    ids=[
        "bare-object",
        "json-fence",
        "plain-fence-with-prose",
        "prose-around",
        "bare-list",
        "list-after-prose",
        "nested",
        "braces-in-strings",
        "malformed-candidate-first",
        "first-of-two",
    ],
)
def test_finds_the_first_json_value(text: str, expected: object) -> None:
    assert json_from_text(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "no json here", "{not: json}", '{"unclosed": [1, 2', "```json\n```"],
)
def test_none_when_there_is_no_json(text: str) -> None:
    assert json_from_text(text) is None


def test_kind_skips_values_of_the_other_kind_whole() -> None:
    text = 'Plan: [{"step": 1}] then {"direct": false, "subtasks": ["x"]}'
    assert json_from_text(text, "object") == {"direct": False, "subtasks": ["x"]}
    assert json_from_text(text, "array") == [{"step": 1}]
    assert json_from_text('[{"a": 1}]', "object") is None  # not the object inside the list
    assert json_from_text('{"a": [1]}', "array") is None
