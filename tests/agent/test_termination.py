"""Exit conditions: each `check(state)` on its own, and `&` / `|` composition, without a model."""

from __future__ import annotations

import pytest

from sleuth.agent.state import EvidenceItem, LoopState
from sleuth.agent.termination import (
    AllOf,
    AnyOf,
    ConfidenceMet,
    CustomCondition,
    MaxIterations,
    NoToolCalls,
    TextMention,
    TimeLimit,
    TokenLimit,
    ToolCalled,
)
from sleuth.models.base import Usage


def evidence(tool: str, *, success: bool = True) -> EvidenceItem:
    return EvidenceItem(index=1, tool=tool, success=success)


def test_max_iterations() -> None:
    condition = MaxIterations(3)
    assert condition.check(LoopState(iterations=2)) == (False, "max_iterations")
    assert condition.check(LoopState(iterations=3)) == (True, "max_iterations")
    with pytest.raises(ValueError, match="at least 1"):
        MaxIterations(0)


def test_token_limit_counts_input_and_output_tokens() -> None:
    condition = TokenLimit(100)
    assert not condition.check(LoopState(usage=Usage(input_tokens=60, output_tokens=39)))[0]
    assert condition.check(LoopState(usage=Usage(input_tokens=60, output_tokens=40))) == (
        True,
        "token_limit",
    )


def test_time_limit_reads_an_injected_clock() -> None:
    now = [1000.0]
    condition = TimeLimit(30, clock=lambda: now[0])
    state = LoopState(started_at=1000.0)
    assert not condition.check(state)[0]
    now[0] = 1029.9
    assert not condition.check(state)[0]
    now[0] = 1030.0
    assert condition.check(state) == (True, "time_limit")


def test_tool_called_with_and_without_required_success() -> None:
    failed = LoopState(evidence=[evidence("search"), evidence("submit", success=False)])
    assert ToolCalled("submit").check(failed) == (True, "tool_called:submit")
    assert not ToolCalled("submit", require_success=True).check(failed)[0]
    assert not ToolCalled("other").check(failed)[0]
    succeeded = LoopState(evidence=[evidence("submit")])
    assert ToolCalled("submit", require_success=True).check(succeeded)[0]


def test_confidence_met_reads_the_submitted_confidence() -> None:
    condition = ConfidenceMet(0.7)
    assert not condition.check(LoopState())[0]
    assert not condition.check(LoopState(confidence=0.69))[0]
    assert condition.check(LoopState(confidence=0.7)) == (True, "confidence_met")


def test_confidence_met_reads_the_structured_output_confidence_field() -> None:
    condition = ConfidenceMet(0.8)
    assert condition.check(LoopState(structured_output={"answer": "x", "confidence": 0.9}))[0]
    assert condition.check(LoopState(structured_output={"confidence": "0.85"}))[0]
    assert not condition.check(LoopState(structured_output={"confidence": 0.5}))[0]
    assert not condition.check(LoopState(structured_output={"confidence": "high"}))[0]
    assert not condition.check(LoopState(structured_output={"answer": "no confidence"}))[0]
    # The submit tool's value wins over the structured output when both exist.
    assert not condition.check(LoopState(confidence=0.1, structured_output={"confidence": 0.99}))[0]


def test_no_tool_calls_holds_only_after_a_turn_without_tools() -> None:
    condition = NoToolCalls()
    assert not condition.check(LoopState())[0]
    assert not condition.check(LoopState(iterations=1, last_tool_names=["search"]))[0]
    assert condition.check(LoopState(iterations=2, last_tool_names=[])) == (True, "no_tool_calls")


def test_text_mention_is_case_insensitive_unless_asked() -> None:
    state = LoopState(last_text="All done: FINAL ANSWER below")
    assert TextMention("final answer").check(state) == (True, "text_mention:final answer")
    assert not TextMention("final answer", case_sensitive=True).check(state)[0]
    assert TextMention("FINAL ANSWER", case_sensitive=True).check(state)[0]
    assert not TextMention("give up").check(state)[0]


def test_custom_condition_wraps_a_predicate_with_its_reason() -> None:
    condition = CustomCondition(lambda s: len(s.evidence) >= 2, reason="enough_evidence")
    assert condition.check(LoopState(evidence=[evidence("a")])) == (False, "enough_evidence")
    assert condition.check(LoopState(evidence=[evidence("a"), evidence("b")]))[0]


def test_and_requires_every_condition_and_joins_their_reasons() -> None:
    both = ToolCalled("submit") & ConfidenceMet(0.5)
    assert isinstance(both, AllOf)
    assert not both.check(LoopState(confidence=0.9))[0]
    assert not both.check(LoopState(evidence=[evidence("submit")], confidence=0.1))[0]
    assert both.check(LoopState(evidence=[evidence("submit")], confidence=0.9)) == (
        True,
        "tool_called:submit & confidence_met",
    )


def test_or_stops_on_the_first_condition_that_holds() -> None:
    either = MaxIterations(5) | TextMention("done") | TokenLimit(10)
    assert isinstance(either, AnyOf)
    assert len(either.conditions) == 3  # flattened, not nested
    assert either.check(LoopState(iterations=1)) == (False, "")
    assert either.check(LoopState(iterations=1, last_text="done")) == (True, "text_mention:done")
    assert either.check(LoopState(iterations=5, last_text="done")) == (True, "max_iterations")


def test_composition_nests() -> None:
    condition = (ToolCalled("submit") & ConfidenceMet(0.8)) | MaxIterations(10)
    submitted_low = LoopState(iterations=3, evidence=[evidence("submit")], confidence=0.5)
    assert not condition.check(submitted_low)[0]
    submitted_high = submitted_low.model_copy(update={"confidence": 0.8})
    assert condition.check(submitted_high) == (True, "tool_called:submit & confidence_met")
    exhausted = submitted_low.model_copy(update={"iterations": 10})
    assert condition.check(exhausted) == (True, "max_iterations")
    assert "|" in repr(condition) and "&" in repr(condition)
