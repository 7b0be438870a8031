"""A scripted three-part research question for the plan/coverage tests of both runners.

The question asks what `__exit__` receives, how it suppresses an exception, and how `with`
compares with try/finally. `DocsSearch` answers each part from a fact of its own, and can hold one
part back for a number of calls (an uncovered part). `three_part_script` plans the three parts and
makes one search per execute step, for the sub-question the step's prompt names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, text, tool_call
from sleuth.tools import Tool, tool
from tests.helpers.research_scripts import ResearchScript, tool_rounds

QUESTION = (
    "What does __exit__ receive, how does it suppress an exception, and how does a with "
    "statement compare with try/finally?"
)
SUB_QUESTIONS = [
    "What arguments does __exit__ receive?",
    "How does __exit__ suppress an exception?",
    "How does the with statement compare with try/finally?",
]
FACTS = {
    "receive": "The __exit__ method receives three arguments: the exception type, value and "
    "traceback.",
    "suppress": "If __exit__ returns a true value, the exception is suppressed.",
    "finally": "A with statement is like a try/finally statement: the exit code always runs.",
}
SUMMARY = " ".join(FACTS.values())
REWORDED = {
    "receive": "The exception type, value and traceback are the three arguments __exit__ receives.",
    "suppress": "The exception is suppressed if __exit__ returns a true value.",
    "finally": "The exit code always runs: a with statement is like a try/finally statement.",
}
REWORDED_SUMMARY = " ".join(REWORDED.values())
"""What a rewrite of `SUMMARY` says (`ResearchScript.rewrite`)."""
_PART = re.compile(r"Research this part of the question \(part \d+ of \d+\):\n(?P<part>.+)")


@dataclass
class DocsSearch:
    """The docs search tool: the fact whose key word the query holds, as a search row. The
    `withheld` topic finds nothing for its first `withheld_calls` searches."""

    withheld: str | None = None
    withheld_calls: int = 1
    queries: list[str] = field(default_factory=list)

    def tool(self) -> Tool:
        @tool
        def search_docs(query: str) -> str:
            """Search the Python language reference."""
            self.queries.append(query)
            rows = []
            for topic, fact in FACTS.items():
                if topic not in query.lower():
                    continue
                if topic == self.withheld and self._searched(topic) <= self.withheld_calls:
                    continue
                rows.append(
                    {"text": fact, "source": f"reference#{topic}", "location": "chars 0-80"}
                )
            return json.dumps(rows)

        return search_docs

    def _searched(self, topic: str) -> int:
        return sum(1 for query in self.queries if topic in query.lower())


def named_part(call: ModelCall) -> str:
    """The sub-question an execute step's prompt names ("" when it names none)."""
    first_user = next((m.content for m in call.messages if m.role == "user"), "")
    match = _PART.search(first_user)
    return match["part"] if match else ""


def search_turn(call: ModelCall) -> ModelResponse:
    """One search for the named part (the whole question when none is named), then an answer."""
    if tool_rounds(call) == 0:
        return tool_call("search_docs", query=named_part(call) or QUESTION)
    return text("Answered from the search result.")


def three_part_script(verdicts: list[bool] | None = None) -> ResearchScript:
    return ResearchScript(
        verdicts=verdicts or [True],
        sub_questions=list(SUB_QUESTIONS),
        summary=SUMMARY,
        rewrite=REWORDED_SUMMARY,
        execute_turn=search_turn,
    )
