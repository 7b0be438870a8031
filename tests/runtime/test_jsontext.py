"""`json_from_text`: JSON out of what models really write."""

from __future__ import annotations

import pytest

from sleuth._util.jsontext import json_from_text, truncated_json_object


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


def test_a_cut_object_keeps_what_it_completed() -> None:
    """A writer cut at its output cap while repeating a finding: the complete members and
    elements survive, the open list and object are closed, the half-written string is dropped."""
    cut = (
        '```json\n{ "summary": "Exit gets three arguments [1].", "key_findings": '
        '[ "It returns a true value [2].", "It returns a true value [2].", "It ret'
    )
    assert json_from_text(cut, kind="object") is None
    assert truncated_json_object(cut) == {
        "summary": "Exit gets three arguments [1].",
        "key_findings": ["It returns a true value [2].", "It returns a true value [2]."],
    }
    nested = '{"a": {"b": [1, {"c": "}, ]"}], "d": 2}, "e": "unfinished'
    assert truncated_json_object(nested) == {"a": {"b": [1, {"c": "}, ]"}], "d": 2}}
    assert truncated_json_object('{"summary": "no comma yet') is None
    assert truncated_json_object('{"done": true}') is None  # finished: json_from_text's
    assert truncated_json_object("no JSON here") is None
    assert truncated_json_object('{"a": 1,') == {"a": 1}


def test_a_cut_string_value_keeps_its_complete_sentences() -> None:
    """A small writer looped in its summary until the cap cut it mid-word: the summary's complete
    sentences are the report, rather than the raw text starting `{ "summary": "`."""
    looped = (
        '{ "summary": "The __exit__ method receives the exception type, value, and traceback. '
        "It can suppress the exception by returning True. The __exit__ method does not suppress "
        "the exception by not using the exc"
    )
    assert truncated_json_object(looped) == {
        "summary": "The __exit__ method receives the exception type, value, and traceback. "
        "It can suppress the exception by returning True."
    }
    # A written line break or the end of the text ends a sentence too; "e.g" does not.
    assert truncated_json_object('{"summary": "One!\\nTwo, e.g') == {"summary": "One!"}
    assert truncated_json_object('{"summary": "Done?') == {"summary": "Done?"}


def test_a_cut_key_is_not_completed() -> None:
    """A cut inside a key, even one that reads like a sentence, gives no half member."""
    assert truncated_json_object('{"summary": "All done.", "key_fin. dings') == {
        "summary": "All done."
    }
    assert truncated_json_object('{"a": {"b": 1}, "c. d') == {"a": {"b": 1}}
    assert truncated_json_object('{"Odd key. name') is None


def test_a_cut_string_in_a_list_keeps_the_earlier_elements_and_its_sentences() -> None:
    cut = (
        '{"summary": "S.", "key_findings": ["It returns a true value [2].", '
        '"Exit gets three arguments [1]. It returns Fal'
    )
    assert truncated_json_object(cut) == {
        "summary": "S.",
        "key_findings": ["It returns a true value [2].", "Exit gets three arguments [1]."],
    }
    nested = '{"a": [{"b": "One. Two'
    assert truncated_json_object(nested) == {"a": [{"b": "One."}]}


def test_a_cut_string_with_no_complete_sentence_is_dropped() -> None:
    cut = '{"summary": "Exit gets three arguments [1].", "key_findings": ["It returns a tr'
    assert truncated_json_object(cut) == {"summary": "Exit gets three arguments [1]."}
    assert truncated_json_object('{"summary": "Cut in version 3.14 and') is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{'a': 1, 'b': [1,2,],}", {"a": 1, "b": [1, 2]}),
        ('```json\n{"a": "x", "b": [1, 2,],}\n```\nDone.', {"a": "x", "b": [1, 2]}),
        ('Here: {"ok": True, "none": None} as asked', {"ok": True, "none": None}),
        ('The list: ["a", "b",] and no more', ["a", "b"]),
    ],
    ids=["single-quotes-trailing-commas", "fenced-trailing-comma", "python-literals", "list"],
)
def test_json_a_model_almost_wrote_is_mended(text: str, expected: object) -> None:
    assert json_from_text(text) == expected


def test_mending_keeps_to_spans_that_look_like_json_and_to_the_kind_asked_for() -> None:
    # Braces in prose hold no quoted key: they stay prose.
    assert json_from_text("Use {braces} and {not: json} here") is None
    # Valid JSON later in the text wins over a mendable span before it.
    assert json_from_text("{'a': 1,} then {\"b\": 2}") == {"b": 2}
    assert json_from_text("Plan: ['x', 'y',] then {'a': 1,}", "object") == {"a": 1}
    assert json_from_text("Plan: ['x', 'y',] then {'a': 1,}", "array") == ["x", "y"]


def test_a_cut_object_drops_a_number_the_cut_may_have_shortened() -> None:
    assert truncated_json_object('{"a": "x", "confidence": 0') == {"a": "x"}
    assert truncated_json_object('{"a": "x", "n": [1, 12') == {"a": "x", "n": [1]}
    # A value something ended counts: a closed string, a number before a space.
    assert truncated_json_object('{"a": ["x.", "Two words"') == {"a": ["x.", "Two words"]}
    assert truncated_json_object('{"a": "x", "confidence": 0.8 ') == {"a": "x", "confidence": 0.8}
