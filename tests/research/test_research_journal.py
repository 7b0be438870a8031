"""`ResearchSpec.execute(..., journal=...)`: the one research loop, resuming an execute round from
a journal (as a knowledge scan's activity does) instead of repeating a finished tool call."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from sleuth import create_research_workflow
from sleuth.research import Node
from sleuth.tools import tool
from tests.helpers.research_scripts import FACT, ResearchScript, lookup, scripted_model

ModelT = TypeVar("ModelT", bound=BaseModel)


class DictJournal:
    """A `sleuth.research.RoundJournal` in memory: what a crashed attempt saved is there for the next one."""

    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}
        self.saved: list[list[str]] = []

    def get(self, key: str, model: type[ModelT]) -> ModelT | None:
        raw = self.entries.get(key)
        return None if raw is None else model.model_validate(raw)

    async def save(self, **entries: BaseModel | None) -> str:
        for key, value in entries.items():
            if value is None:
                self.entries.pop(key, None)
            else:
                self.entries[key] = value.model_dump(mode="json")
        self.saved.append(sorted(entries))
        return f"checkpoint-{len(self.saved)}"


class WorkerDied(BaseException):
    """Stands for the process dying mid-tool-call: nothing in the agent loop catches it."""


async def test_a_journaled_run_resumes_its_round_without_repeating_a_finished_tool_call() -> None:
    calls: list[str] = []
    die_on_call = 2

    @tool
    def market_notes(topic: str) -> str:
        """Look a topic up in the market notes."""
        calls.append(topic)
        if len(calls) == die_on_call:
            raise WorkerDied()
        return lookup(topic)

    script = ResearchScript(tool_name="market_notes", tool_calls_per_round=2)
    spec = create_research_workflow(
        stop_when_covered=False, model=scripted_model(script), tools=[market_notes]
    )
    journal = DictJournal()

    try:
        await spec.execute("How fast did the CRM market grow?", journal=journal)
    except WorkerDied:
        pass
    else:
        raise AssertionError("the first attempt should have died in its second tool call")
    # The first tool call's result is in the journal's loop checkpoint; the round has not ended.
    assert "loop" in journal.entries and len(calls) == 2

    result = await spec.execute("How fast did the CRM market grow?", journal=journal)
    first, second = calls[0], calls[1]
    assert calls.count(first) == 1, calls  # the finished call never ran again
    assert calls[2:] == [second]  # the interrupted one ran once more
    assert result.final_state.summary == FACT
    # The plan was journaled before the first round, so the retried attempt did not plan again.
    assert result.state.nodes[:3] == [Node.PLAN, Node.EXECUTE, Node.CAUSAL_INFERENCE]
    # The round ended: its end state replaced the loop checkpoint.
    assert "loop" not in journal.entries and "research" in journal.entries


async def test_without_a_journal_a_rerun_starts_over() -> None:
    calls: list[str] = []

    @tool
    def market_notes(topic: str) -> str:
        """Look a topic up in the market notes."""
        calls.append(topic)
        return lookup(topic)

    script = ResearchScript(tool_name="market_notes", tool_calls_per_round=2)
    spec = create_research_workflow(
        stop_when_covered=False, model=scripted_model(script), tools=[market_notes]
    )
    await spec.execute("How fast did the CRM market grow?")
    await spec.execute("How fast did the CRM market grow?")
    assert len(calls) == 4 and calls[:2] == calls[2:]
