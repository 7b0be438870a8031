"""Research-quality benchmark: the demo research config over the Python language reference.

    python -m bench.research_quality [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b]
                                     [--limit N] [--questions id,id,...] [--threads N]
                                     [--report FILE] [--reports DIR]

Every question (22, over CPython's language reference in `pydoc_data.topics`, the demo corpus)
lists the key facts a complete answer states, as case-insensitive regular expressions. Some ask
one thing, some several (`multi`), some need two different topics of the reference (`two-topic`).
Each runs in-process through the demo's research config (`sleuth.apps.demo.docs_research`: plan,
execute per sub-question, causal inference, summarize, grounding eval, regenerate/replan) with
the named local model, and the benchmark prints, per question:

- `recall`: the share of the key facts the answer (summary and key findings) states;
- `found`: the share of the key facts the evidence trail holds (what any answer written from
  this evidence could state: below `recall`'s reach means the search missed, above it that the
  writer left out what was found);
- `judge`: the share of the report's claims the grounding judge found grounded;
- `quotes`: the share of claims whose citations all carry a quote found verbatim in the evidence
  (`missing`: claims with no quote, or a quote the evidence does not hold);
- `covered`: sub-questions with an answering passage, of those planned;
- `tools`, `replans`, `regens`: tool calls, replans and regenerations;
- `wall`: seconds for the whole run (each node's finish time goes to stderr as it happens);

then the medians per model, side by side. Goals (issue #12): median recall ≥ 0.7, no claim in a
final report whose quote is missing, median wall ≤ 180 s per question on 2 cores. `--report`
writes the first question's report, as `sleuth research` prints it, to FILE; `--reports DIR`
writes every run's report to DIR/<model>-<question>.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.activities.research_models import ResearchOutcome
from sleuth.apps.demo import docs_research
from sleuth.models import resolve
from sleuth.rag.demo import ensure_demo_store
from sleuth.research import ResearchReport, ResearchState, report_text
from sleuth.runtime.events import Event, forward_events
from sleuth.workers.cli_research import format_report

DEFAULT_MODELS = "qwen2.5-coder-1.5b,qwen2.5-coder-0.5b"


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    """`single`, `multi` (several parts) or `two-topic` (parts from two topics)."""
    text: str
    facts: tuple[str, ...]
    """Regular expressions (case-insensitive), one per key fact an answer must state."""


QUESTIONS: tuple[Question, ...] = (
    Question(
        "with-exit",
        "multi",
        "When the body of a with statement raises an exception, what does the __exit__ method of "
        "the context manager receive, how can it suppress the exception, and how does this "
        "compare with a try/finally statement?",
        (r"\btype\b", r"traceback", r"true", r"suppress", r"finally"),
    ),
    Question(
        "try-finally-return",
        "multi",
        "What happens when a finally clause of a try statement executes a return statement, and "
        "what happens to an exception that was being handled?",
        (r"finally", r"return", r"discard|lost"),
    ),
    Question(
        "for-else-break",
        "multi",
        "When is the else clause of a for loop executed, and what does a break statement do to it?",
        (r"exhaust|no more items|empty", r"break", r"(without|not|skip\w*) (executing|executed)"),
    ),
    Question(
        "global-nonlocal",
        "two-topic",
        "What does the global statement do, and how does the nonlocal statement differ from it?",
        (r"global", r"nonlocal", r"enclosing"),
    ),
    Question(
        "lambda",
        "single",
        "What can the body of a lambda expression contain, and what does a lambda expression "
        "create?",
        (r"(single|one) expression|expression", r"function"),
    ),
    Question(
        "yield-generator",
        "multi",
        "What does a yield expression in a function body make the function return, and what "
        "happens when the generator's __next__() method is called?",
        (r"generator", r"yield", r"__next__|next"),
    ),
    Question(
        "raise-from",
        "single",
        "What does the from clause of a raise statement do, and which attribute stores the cause?",
        (r"__cause__", r"chain"),
    ),
    Question(
        "augassign",
        "single",
        "How does an augmented assignment such as x += 1 differ from x = x + 1?",
        (r"(evaluated|evaluates) only once|only (evaluated )?once", r"in[- ]place"),
    ),
    Question(
        "is-vs-eq",
        "two-topic",
        "What does the is operator compare, and what does the == operator compare?",
        (r"identity|same object", r"value"),
    ),
    Question(
        "truth",
        "multi",
        "Which values are considered false in a Boolean context, and which special methods decide "
        "the truth value of an object?",
        (r"\bNone\b", r"\bFalse\b", r"zero|\b0\b", r"__bool__", r"__len__"),
    ),
    Question(
        "async-with",
        "single",
        "Which methods does an async with statement call on entry and on exit, and where may it "
        "be used?",
        (r"__aenter__", r"__aexit__", r"coroutine"),
    ),
    Question(
        "import",
        "multi",
        "What two steps does a basic import statement perform, and what does its as clause do?",
        (r"\bfind", r"load|initiali[sz]", r"\bbind|\bbound"),
    ),
    Question(
        "assert",
        "multi",
        "What is an assert statement equivalent to, and when are assertions not evaluated?",
        (r"__debug__", r"AssertionError", r"-O\b|optimi[sz]"),
    ),
    Question(
        "del-name",
        "single",
        "What does deleting a name with the del statement do, and what happens if the name is "
        "unbound?",
        (r"unbind|remov", r"NameError"),
    ),
    Question(
        "slicing",
        "single",
        "What do the parts of an extended slice like a[start:stop:step] mean, and what object "
        "does a slice expression pass to the sequence?",
        (r"\bstep\b", r"slice object"),
    ),
    Question(
        "dict-keys",
        "multi",
        "In what order does a dictionary keep its keys, and which objects can be dictionary keys?",
        (r"insertion order", r"hashable"),
    ),
    Question(
        "string-prefixes",
        "two-topic",
        "What does an r prefix on a string literal do, and what does an f prefix do?",
        (r"\braw\b", r"backslash", r"formatted string|f-string|replacement field"),
    ),
    Question(
        "power",
        "two-topic",
        "How does the power operator bind compared with a unary minus on its left, and what does "
        "2**-1 evaluate to?",
        (r"more tightly|binds more|higher", r"0\.5"),
    ),
    Question(
        "with-and-except",
        "two-topic",
        "Which methods of a context manager does the with statement call, and how does an except "
        "clause of a try statement decide that it matches an exception?",
        (r"__enter__", r"__exit__", r"\bclass\b|base class", r"except"),
    ),
    Question(
        "class-and-def",
        "two-topic",
        "What does a class definition bind in the local namespace, and what does a function "
        "definition bind?",
        (r"class object", r"function object"),
    ),
    Question(
        "while-continue",
        "multi",
        "What does continue do inside a while loop, and when is the else clause of a while loop "
        "executed?",
        (r"next cycle|next iteration|continues with", r"\bfalse\b", r"\belse\b"),
    ),
    Question(
        "bare-raise",
        "two-topic",
        "What happens when an exception is not handled at all, and what does a raise statement "
        "with no expression re-raise?",
        (r"terminat|traceback", r"re-?raise|currently being handled|active"),
    ),
)


@dataclass
class Row:
    """One question's measures for one model."""

    model: str
    question: str
    kind: str
    recall: float
    found: float
    judge: float | None
    quotes: float | None
    missing: int
    claims: int
    covered: int
    planned: int
    tool_calls: int
    replans: int
    regenerations: int
    wall: float
    report: str = ""


def answer_text(report: ResearchReport) -> str:
    """What the answer states: the summary and, with a schema, every text field of the report."""
    data = report.model_dump(mode="json", include={"structured_output"})["structured_output"]
    structured = report_text(data) if isinstance(data, dict) else ""
    return f"{report.summary}\n{structured}"


def fact_recall(text: str, facts: tuple[str, ...]) -> float:
    return sum(1 for fact in facts if re.search(fact, text, re.IGNORECASE)) / len(facts)


def _texts(output: str) -> list[str]:
    """The tool output, and the decoded text of each search row in it."""
    texts = [output]
    try:
        data = json.loads(output)
    except ValueError:
        return texts
    for row in data if isinstance(data, list) else [data]:
        if isinstance(row, dict) and isinstance(row.get("text"), str):
            texts.append(row["text"])
        elif isinstance(row, str):
            texts.append(row)
    return texts


def quote_check(report: ResearchReport, state: ResearchState) -> tuple[float | None, int]:
    """The share of claims whose citations all carry a quote found verbatim in the cited
    evidence item (the full trail in `state`), and how many claims fail that."""
    if not report.claims:
        return None, 0
    outputs = {item.index: _texts(item.output) for item in state.evidence}
    passed = 0
    for claim in report.claims:
        citations = claim.citations
        if citations and all(
            c.quote and any(c.quote in text for text in outputs.get(c.evidence, []))
            for c in citations
        ):
            passed += 1
    return passed / len(report.claims), len(report.claims) - passed


def evidence_text(state: ResearchState) -> str:
    """Everything the evidence trail holds: each tool output and the text of each passage in it."""
    return "\n".join(text for item in state.evidence for text in _texts(item.output))


async def run_question(model_name: str, spec: Any, question: Question) -> Row:
    started = time.perf_counter()

    def progress(event: Event) -> None:
        if event.event_type == "research.node":
            elapsed = time.perf_counter() - started
            print(f"  {question.id}: {event.data['node']} done at {elapsed:.0f} s", file=sys.stderr)

    with forward_events(progress):
        result = await spec.execute(question.text)
    wall = time.perf_counter() - started
    report: ResearchReport = result.final_state
    state: ResearchState = result.state
    quotes, missing = quote_check(report, state)
    grounded = [c.grounded for c in report.claims]
    outcome = ResearchOutcome(
        final_state=report,
        state_ref="(in-process)",
        research="default",
        workflow_id="-",
        run_id="-",
    )
    return Row(
        model=model_name,
        question=question.id,
        kind=question.kind,
        recall=fact_recall(answer_text(report), question.facts),
        found=fact_recall(evidence_text(state), question.facts),
        judge=sum(grounded) / len(grounded) if grounded else None,
        quotes=quotes,
        missing=missing,
        claims=len(report.claims),
        covered=sum(1 for entry in report.coverage if entry.covered),
        planned=len(report.coverage),
        tool_calls=report.evidence_count,
        replans=report.replan_count,
        regenerations=report.regeneration_count,
        wall=wall,
        report=format_report(outcome, "(in-process run)"),
    )


def _share(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:5.2f}"


HEADER = (
    f"{'model':<20} {'question':<20} {'kind':<9} {'recall':>6} {'found':>6} {'judge':>6} {'quotes':>6} "
    f"{'missing':>7} {'covered':>7} {'tools':>5} {'replans':>7} {'regens':>6} {'wall s':>7}"
)


def format_row(row: Row) -> str:
    return (
        f"{row.model:<20} {row.question:<20} {row.kind:<9} {_share(row.recall):>6} "
        f"{_share(row.found):>6} {_share(row.judge):>6} {_share(row.quotes):>6} {f'{row.missing}/{row.claims}':>7} "
        f"{f'{row.covered}/{row.planned}':>7} {row.tool_calls:>5} {row.replans:>7} "
        f"{row.regenerations:>6} {row.wall:>7.0f}"
    )


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def format_medians(model: str, rows: list[Row]) -> str:
    if not rows:
        return f"{model:<20} (no questions run)"
    return (
        f"{model:<20} {f'median of {len(rows)}':<20} {'':<9} "
        f"{_share(_median([r.recall for r in rows])):>6} "
        f"{_share(_median([r.found for r in rows])):>6} "
        f"{_share(_median([r.judge for r in rows])):>6} "
        f"{_share(_median([r.quotes for r in rows])):>6} "
        f"{f'{sum(r.missing for r in rows)}/{sum(r.claims for r in rows)}':>7} "
        f"{f'{sum(r.covered for r in rows)}/{sum(r.planned for r in rows)}':>7} "
        f"{statistics.median(r.tool_calls for r in rows):>5.0f} "
        f"{statistics.median(r.replans for r in rows):>7.0f} "
        f"{statistics.median(r.regenerations for r in rows):>6.0f} "
        f"{statistics.median(r.wall for r in rows):>7.0f}"
    )


def select(ids: str | None, limit: int | None) -> list[Question]:
    chosen = list(QUESTIONS)
    if ids:
        wanted = [i.strip() for i in ids.split(",") if i.strip()]
        known = {q.id: q for q in QUESTIONS}
        unknown = [i for i in wanted if i not in known]
        if unknown:
            raise SystemExit(
                f"unknown question id(s) {', '.join(unknown)}; known: {', '.join(known)}"
            )
        chosen = [known[i] for i in wanted]
    return chosen[:limit] if limit else chosen


async def main(args: argparse.Namespace) -> None:
    questions = select(args.questions, args.limit)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    retriever = ensure_demo_store()
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(
        f"{len(questions)} questions x {len(models)} models; {args.threads} llama.cpp threads; "
        f"load average {load}",
        flush=True,
    )
    print(HEADER, flush=True)
    by_model: dict[str, list[Row]] = {}
    for name in models:
        spec = docs_research(
            retriever, model=resolve(f"local:{name}", local_n_threads=args.threads)
        )
        rows = by_model.setdefault(name, [])
        for question in questions:
            row = await run_question(name, spec, question)
            rows.append(row)
            print(format_row(row), flush=True)
            shown = f"$ {question.text}\n{row.report}\n"
            if args.report and len(rows) == 1 and name == models[0]:
                Path(args.report).write_text(shown)
            if args.reports:
                folder = Path(args.reports)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{name}-{question.id}.txt").write_text(shown)
    print(flush=True)
    print(HEADER)
    for name in models:
        print(format_medians(name, by_model.get(name, [])))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--models", default=DEFAULT_MODELS, help="local model names, comma-separated"
    )
    parser.add_argument("--limit", type=int, default=None, help="run the first N questions")
    parser.add_argument("--questions", default=None, help="question ids, comma-separated")
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="llama.cpp threads (fewer than cores is faster on a busy machine)",
    )
    parser.add_argument("--report", default=None, help="write the first question's report here")
    parser.add_argument(
        "--reports", default=None, help="write every run's report to DIR/<model>-<question>.txt"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
