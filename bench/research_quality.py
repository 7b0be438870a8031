"""Research-quality benchmark: research on material the project was never tuned on.

    python -m bench.research_quality [--corpus NAME|PATH,...] [--kind KIND,...] [--limit N]
                                     [--questions id,...] [--seeds N] [--model NAME,...]
                                     [--threads N] [--reports DIR] [--docs FILE | --no-docs]

Every corpus is a folder of public documents (`bench/corpora/<name>/`: licence texts, Python
package READMEs, manual pages, release notes; each with a `SOURCE.md` naming where the text comes
from and its licence) and a `questions.yaml` of four kinds: `single` (one fact), `multi` (several
parts), `synthesis` (parts from two documents) and `unanswerable` (a plausible fact the documents
do not hold). Each question lists its key facts and the statements that would be wrong, as
case-insensitive regular expressions (see `load_corpus`); an unanswerable one describes what an
honest answer says. `--corpus` also takes a path to such a folder, so corpora the project has
never seen measure the same things; `--corpus python-docs` runs the 22 questions over the demo's
Python language reference.

Each corpus is ingested into a fresh store with `sleuth ingest` (as a user would), and every
question is asked in-process through the documented own-documents path: `create_research_workflow`
with the corpus as its datastore and the demo's settings (`sleuth.apps.demo.docs_research`). Each run is
scored from the report's JSON alone (`score_run`):

- `recall`: the share of the key facts the final answer (summary and structured output) states;
- `found`: the share the evidence trail holds (below `recall`'s reach: the search missed);
- `wrong`: statements in the final answer that match a wrong-statement pattern;
- `rejected`: claims the judge rejected that the final answer still states;
- `status`: the report's `status` (grounded, partial, not_found) or, for reports without the
  field, one derived from `end_reason` and the grounding (`ungrounded`: under the threshold);
- `ok`: the report ends grounded, or honestly partial (every part it does not answer is said to
  be missing, and no rejected claim is asserted); for an unanswerable question, honest;
- `honest` (unanswerable only): the answer says the sources do not hold it (status `not_found`,
  every part `not_stated`, or a sentence such as "the documents do not say ...") and states no
  wrong value;
- `better`: judged drafts the run discarded that were better than its final report (from
  `drafts`/`best_draft`: grounding score, then parts answered; else from `score_history`);
- `wall`: seconds for the whole run.

Then a summary per corpus and overall: mean recall, answers with a wrong statement, answers
stating a rejected claim, reports ok, unanswerable questions answered honestly, runs that ended
on a worse draft, and the median wall time. `--seeds N` runs each question N times: seed 0 decodes
greedily (what a user gets), seeds 1.. sample the researcher at `--temperature` with that seed
while the judge stays greedy, so one greedy draw decides nothing. The latest summary and per-run
table go into `docs/benchmarks.md` between `<!-- bench:research_quality:start -->` and
`<!-- bench:research_quality:end -->`, with the command, date and machine.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from bench._docs_table import write_section

CORPORA_DIR = Path(__file__).resolve().parent / "corpora"
KINDS = ("single", "multi", "synthesis", "unanswerable")
DEMO_CORPUS = "python-docs"
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
DOCS_SECTION = "research_quality"
NOT_DOCUMENTS = {"SOURCE.md", "questions.yaml", "questions.yml"}
"""Files of a corpus folder that describe it rather than belong to it: never ingested."""


class CorpusError(ValueError):
    """A corpus folder or its questions file is not usable; the message says what to fix."""


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    """One of `KINDS`."""
    text: str
    facts: tuple[str, ...]
    """Regular expressions (case-insensitive), one per key fact a correct answer states."""
    wrong: tuple[str, ...] = ()
    """Regular expressions (case-insensitive) that match a statement that would be wrong."""
    honest: str = ""
    """For an unanswerable question: what an honest answer says."""
    answer: str = ""
    """A reference answer in its own words (it states every fact and nothing wrong)."""
    sources: tuple[str, ...] = ()
    """The documents that hold the answer (two for a synthesis question; none if unanswerable)."""


@dataclass(frozen=True)
class Corpus:
    name: str
    description: str
    questions: tuple[Question, ...]
    folder: Path | None = None
    """The corpus folder; None for the demo corpus (the demo store)."""

    def documents(self) -> list[Path]:
        if self.folder is None:
            return []
        return sorted(
            p for p in self.folder.iterdir() if p.is_file() and p.name not in NOT_DOCUMENTS
        )


def _patterns(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CorpusError(f"{where}: expected a list of regular expressions (strings)")
    for pattern in value:
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise CorpusError(f"{where}: {pattern!r} is not a regular expression: {exc}") from exc
    return tuple(value)


def load_corpus(folder: Path) -> Corpus:
    """The corpus in `folder`: its documents and `questions.yaml`, which holds

        corpus: NAME            # optional, default the folder's name
        description: TEXT       # what the documents are (the datastore's description)
        questions:
          - id: ID
            kind: single | multi | synthesis | unanswerable
            question: TEXT      # as a user would ask it
            facts: [REGEX, ...] # key facts a correct answer states (none if unanswerable)
            wrong: [REGEX, ...] # statements that would be wrong
            honest: TEXT        # unanswerable only: what an honest answer says
            answer: TEXT        # optional reference answer
            sources: [FILE, ...]

    Raises `CorpusError` naming the file and question when something is missing or malformed."""
    path = folder / "questions.yaml"
    if not path.is_file():
        raise CorpusError(f"{folder}: no questions.yaml (see bench/corpora/*/questions.yaml)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise CorpusError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise CorpusError(f"{path}: expected a mapping with a 'questions' list")
    name = str(data.get("corpus") or folder.name)
    documents = {p.name for p in folder.iterdir() if p.is_file()} - NOT_DOCUMENTS
    if not documents:
        raise CorpusError(f"{folder}: no documents next to questions.yaml")
    questions: list[Question] = []
    for number, entry in enumerate(data["questions"], 1):
        where = f"{path}, question {number}"
        if not isinstance(entry, dict):
            raise CorpusError(f"{where}: expected a mapping")
        qid, kind, text = entry.get("id"), entry.get("kind"), entry.get("question")
        if not isinstance(qid, str) or not qid:
            raise CorpusError(f"{where}: missing 'id'")
        where = f"{path}, question {qid!r}"
        if kind not in KINDS:
            raise CorpusError(f"{where}: kind {kind!r}; use one of {', '.join(KINDS)}")
        if not isinstance(text, str) or not text.strip():
            raise CorpusError(f"{where}: missing 'question'")
        facts = _patterns(f"{where}, facts", entry.get("facts"))
        wrong = _patterns(f"{where}, wrong", entry.get("wrong"))
        honest = str(entry.get("honest") or "").strip()
        if kind == "unanswerable":
            if facts:
                raise CorpusError(f"{where}: an unanswerable question has no facts")
            if not honest:
                raise CorpusError(f"{where}: say what an honest answer says ('honest')")
            if not wrong:
                raise CorpusError(f"{where}: list the invented answers it invites ('wrong')")
        elif not facts:
            raise CorpusError(f"{where}: list the key facts a correct answer states ('facts')")
        sources = tuple(str(s) for s in entry.get("sources") or ())
        unknown = [s for s in sources if s not in documents]
        if unknown:
            raise CorpusError(f"{where}: sources {unknown} are not documents of {folder}")
        if any(q.id == qid for q in questions):
            raise CorpusError(f"{where}: a second question with this id")
        questions.append(
            Question(
                id=qid,
                kind=kind,
                text=" ".join(text.split()),
                facts=facts,
                wrong=wrong,
                honest=honest,
                answer=" ".join(str(entry.get("answer") or "").split()),
                sources=sources,
            )
        )
    description = " ".join(str(data.get("description") or f"the {name} documents").split())
    return Corpus(name=name, description=description, questions=tuple(questions), folder=folder)


def shipped_corpora(root: Path = CORPORA_DIR) -> list[Corpus]:
    """Every corpus under `bench/corpora/`, by name."""
    return [load_corpus(p) for p in sorted(root.iterdir()) if (p / "questions.yaml").is_file()]


def _demo(qid: str, kind: str, text: str, facts: tuple[str, ...]) -> Question:
    return Question(id=qid, kind=kind, text=text, facts=facts)


DEMO_QUESTIONS: tuple[Question, ...] = (
    _demo(
        "with-exit",
        "multi",
        "When the body of a with statement raises an exception, what does the __exit__ method of "
        "the context manager receive, how can it suppress the exception, and how does this "
        "compare with a try/finally statement?",
        (r"\btype\b", r"traceback", r"true", r"suppress", r"finally"),
    ),
    _demo(
        "try-finally-return",
        "multi",
        "What happens when a finally clause of a try statement executes a return statement, and "
        "what happens to an exception that was being handled?",
        (r"finally", r"return", r"discard|lost"),
    ),
    _demo(
        "for-else-break",
        "multi",
        "When is the else clause of a for loop executed, and what does a break statement do to it?",
        (r"exhaust|no more items|empty", r"break", r"(without|not|skip\w*) (executing|executed)"),
    ),
    _demo(
        "global-nonlocal",
        "synthesis",
        "What does the global statement do, and how does the nonlocal statement differ from it?",
        (r"global", r"nonlocal", r"enclosing"),
    ),
    _demo(
        "lambda",
        "single",
        "What can the body of a lambda expression contain, and what does a lambda expression "
        "create?",
        (r"(single|one) expression|expression", r"function"),
    ),
    _demo(
        "yield-generator",
        "multi",
        "What does a yield expression in a function body make the function return, and what "
        "happens when the generator's __next__() method is called?",
        (r"generator", r"yield", r"__next__|next"),
    ),
    _demo(
        "raise-from",
        "single",
        "What does the from clause of a raise statement do, and which attribute stores the cause?",
        (r"__cause__", r"chain"),
    ),
    _demo(
        "augassign",
        "single",
        "How does an augmented assignment such as x += 1 differ from x = x + 1?",
        (r"(evaluated|evaluates) only once|only (evaluated )?once", r"in[- ]place"),
    ),
    _demo(
        "is-vs-eq",
        "synthesis",
        "What does the is operator compare, and what does the == operator compare?",
        (r"identity|same object", r"value"),
    ),
    _demo(
        "truth",
        "multi",
        "Which values are considered false in a Boolean context, and which special methods decide "
        "the truth value of an object?",
        (r"\bNone\b", r"\bFalse\b", r"zero|\b0\b", r"__bool__", r"__len__"),
    ),
    _demo(
        "async-with",
        "single",
        "Which methods does an async with statement call on entry and on exit, and where may it "
        "be used?",
        (r"__aenter__", r"__aexit__", r"coroutine"),
    ),
    _demo(
        "import",
        "multi",
        "What two steps does a basic import statement perform, and what does its as clause do?",
        (r"\bfind", r"load|initiali[sz]", r"\bbind|\bbound"),
    ),
    _demo(
        "assert",
        "multi",
        "What is an assert statement equivalent to, and when are assertions not evaluated?",
        (r"__debug__", r"AssertionError", r"-O\b|optimi[sz]"),
    ),
    _demo(
        "del-name",
        "single",
        "What does deleting a name with the del statement do, and what happens if the name is "
        "unbound?",
        (r"unbind|remov", r"NameError"),
    ),
    _demo(
        "slicing",
        "single",
        "What do the parts of an extended slice like a[start:stop:step] mean, and what object "
        "does a slice expression pass to the sequence?",
        (r"\bstep\b", r"slice object"),
    ),
    _demo(
        "dict-keys",
        "multi",
        "In what order does a dictionary keep its keys, and which objects can be dictionary keys?",
        (r"insertion order", r"hashable"),
    ),
    _demo(
        "string-prefixes",
        "synthesis",
        "What does an r prefix on a string literal do, and what does an f prefix do?",
        (r"\braw\b", r"backslash", r"formatted string|f-string|replacement field"),
    ),
    _demo(
        "power",
        "synthesis",
        "How does the power operator bind compared with a unary minus on its left, and what does "
        "2**-1 evaluate to?",
        (r"more tightly|binds more|higher", r"0\.5"),
    ),
    _demo(
        "with-and-except",
        "synthesis",
        "Which methods of a context manager does the with statement call, and how does an except "
        "clause of a try statement decide that it matches an exception?",
        (r"__enter__", r"__exit__", r"\bclass\b|base class", r"except"),
    ),
    _demo(
        "class-and-def",
        "synthesis",
        "What does a class definition bind in the local namespace, and what does a function "
        "definition bind?",
        (r"class object", r"function object"),
    ),
    _demo(
        "while-continue",
        "multi",
        "What does continue do inside a while loop, and when is the else clause of a while loop "
        "executed?",
        (r"next cycle|next iteration|continues with", r"\bfalse\b", r"\belse\b"),
    ),
    _demo(
        "bare-raise",
        "synthesis",
        "What happens when an exception is not handled at all, and what does a raise statement "
        "with no expression re-raise?",
        (r"terminat|traceback", r"re-?raise|currently being handled|active"),
    ),
)


def demo_corpus() -> Corpus:
    """The demo's Python language reference (the `python-docs` store) and its 22 questions."""
    from sleuth.rag.demo import DEMO_DESCRIPTION

    return Corpus(name=DEMO_CORPUS, description=DEMO_DESCRIPTION, questions=DEMO_QUESTIONS)


# -- scoring: pure, from the report's JSON -------------------------------------------------------

NOT_IN_SOURCES = re.compile(
    r"\b(?:do|does|did)(?: not|n['’]t) (?:say|state|mention|specify|contain|include|give|"
    r"provide|describe|cover|answer|list|name|discuss|document|address|indicate|define)\b"
    r"|\bnot (?:stated|mentioned|specified|found|given|provided|described|covered|documented|"
    r"addressed|included|available|indicated|defined)\b"
    r"|\bno (?:information|mention|details?|data|indication|statement)\b"
    r"|\b(?:cannot|can['’]t|could not|couldn['’]t|unable to) (?:find|determine|answer|tell|"
    r"confirm)\b"
    r"|\bnone of the (?:sources|documents|passages|pages)\b"
    r"|\bnot in the (?:sources|documents|passages|evidence|indexed)\b",
    re.IGNORECASE,
)
"""A general "the sources do not say" sentence, for reports without `status` and `parts`."""

STATUSES = ("grounded", "partial", "not_found")
_CITATION = re.compile(r"\[\s*\d+(?:\s*[,;\-–]\s*\d+)*\s*\]")
_NON_WORD = re.compile(r"[^\w]+")


def normalise(text: str) -> str:
    """Lower case, citation marks and punctuation dropped, one space between words."""
    return " ".join(_NON_WORD.sub(" ", _CITATION.sub(" ", text.lower())).split())


def _structured_text(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _structured_text(v)]
    if isinstance(value, list):
        return [t for v in value for t in _structured_text(v)]
    return []


def answer_text(data: Mapping[str, Any]) -> str:
    """What the final answer states: the summary and every text of the structured output."""
    texts = [str(data.get("summary") or "")]
    structured = data.get("structured_output")
    if isinstance(structured, Mapping):
        texts += [
            t for key, v in structured.items() if key != "sources" for t in _structured_text(v)
        ]
    return "\n".join(t for t in texts if t.strip())


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def asserted_text(text: str) -> str:
    """`text` without its sentences that say the sources do not hold something: a key fact or a
    wrong value named there ("the documents do not say how X compares") is not stated."""
    sentences = _SENTENCE_END.split(text)
    return "\n".join(s for s in sentences if s.strip() and not says_not_in_sources(s))


def matching(patterns: Iterable[str], text: str) -> list[str]:
    return [p for p in patterns if re.search(p, text, re.IGNORECASE)]


def fact_recall(text: str, facts: Sequence[str]) -> float | None:
    return len(matching(facts, text)) / len(facts) if facts else None


def says_not_in_sources(text: str) -> bool:
    return NOT_IN_SOURCES.search(text) is not None


def rejected_in_answer(data: Mapping[str, Any], text: str) -> list[str]:
    """The claims the judge rejected that the answer still states (word for word, normalised).
    A sentence saying the sources do not hold something asserts no fact, so it never counts."""
    answer = normalise(text)
    out = []
    for claim in data.get("claims") or []:
        sentence = str(claim.get("claim") or "")
        words = normalise(sentence)
        if claim.get("grounded") or not words or says_not_in_sources(sentence):
            continue
        if words in answer:
            out.append(str(claim.get("claim")))
    return out


def report_status(data: Mapping[str, Any]) -> tuple[str, bool]:
    """The report's status and whether the report said it (`status`) or it was derived: reports
    from before `status` existed are `grounded` when they ended grounded, `not_found` when no
    claim is grounded and the answer says the sources do not hold it, `partial` when the claims
    met the threshold but the run ended for another reason (a part uncovered), else
    `ungrounded`."""
    status = data.get("status")
    if status in STATUSES:
        return str(status), True
    if data.get("end_reason") == "grounded":
        return "grounded", False
    claims = data.get("claims") or []
    if not any(c.get("grounded") for c in claims) and says_not_in_sources(answer_text(data)):
        return "not_found", False
    score, threshold = data.get("grounding_score"), data.get("grounding_threshold")
    if claims and score is not None and threshold is not None and score >= threshold:
        return "partial", False
    return "ungrounded", False


def missing_parts_stated(data: Mapping[str, Any], text: str) -> bool:
    """Whether the answer says which parts of the question it leaves open: each part not fully
    answered carries its statement, in the answer (`parts`), or, without `parts`, the answer
    says in words that the sources do not hold something."""
    parts = data.get("parts")
    if isinstance(parts, list) and parts:
        answer = normalise(text)
        for part in parts:
            if part.get("state") == "answered":
                continue
            statement = normalise(str(part.get("statement") or ""))
            if not statement or statement not in answer:
                return False
        return True
    return says_not_in_sources(text)


def _draft_rank(draft: Mapping[str, Any]) -> tuple[float, float]:
    return (float(draft.get("grounding_score") or 0.0), float(draft.get("parts_answered") or 0.0))


def better_drafts_discarded(data: Mapping[str, Any]) -> int:
    """Judged drafts better than the final report: from `drafts` and `best_draft` (grounding
    score, then parts answered) when the report has them, else the earlier grounding scores of
    `score_history` above the final one."""
    drafts = data.get("drafts")
    if isinstance(drafts, list) and drafts:
        best = data.get("best_draft") or 0
        final = next((d for d in drafts if d.get("index") == best), drafts[-1])
        return sum(1 for d in drafts if _draft_rank(d) > _draft_rank(final))
    history = [float(s) for s in data.get("score_history") or []]
    if len(history) < 2:
        return 0
    final_score = data.get("grounding_score")
    final = float(final_score) if final_score is not None else history[-1]
    return sum(1 for s in history[:-1] if s > final + 1e-9)


def _draft_count(data: Mapping[str, Any]) -> int:
    drafts = data.get("drafts")
    if isinstance(drafts, list) and drafts:
        return len(drafts)
    return len(data.get("score_history") or [])


@dataclass
class Score:
    """One run's measures."""

    corpus: str
    question: str
    kind: str
    model: str
    seed: int
    status: str
    status_reported: bool
    """Whether the report carried `status` (False: derived, see `report_status`)."""
    end_reason: str
    recall: float | None
    found: float | None
    wrong: list[str]
    rejected: list[str]
    ok: bool
    honest: bool | None
    better: int
    drafts: int
    judge: float | None
    wall: float
    report: str = field(default="", repr=False)


def score_run(
    corpus: str,
    question: Question,
    data: Mapping[str, Any],
    *,
    evidence: str = "",
    model: str = "",
    seed: int = 0,
    wall: float = 0.0,
) -> Score:
    """Score one finished run from its report's JSON (`ResearchReport.model_dump(mode="json")`
    or a durable outcome's `final_state`) and the text of its evidence trail."""
    text = answer_text(data)
    stated = asserted_text(text)
    wrong = matching(question.wrong, stated)
    rejected = rejected_in_answer(data, text)
    status, reported = report_status(data)
    honest: bool | None = None
    if question.kind == "unanswerable":
        parts = data.get("parts") if isinstance(data.get("parts"), list) else []
        said = (
            status == "not_found"
            or (bool(parts) and all(p.get("state") == "not_stated" for p in parts))
            or says_not_in_sources(text)
        )
        honest = said and not wrong and not rejected
        ok = honest
    else:
        ok = status == "grounded" or (
            status == "partial" and not rejected and missing_parts_stated(data, text)
        )
    claims = data.get("claims") or []
    grounded = [bool(c.get("grounded")) for c in claims]
    return Score(
        corpus=corpus,
        question=question.id,
        kind=question.kind,
        model=model,
        seed=seed,
        status=status,
        status_reported=reported,
        end_reason=str(data.get("end_reason") or ""),
        recall=fact_recall(stated, question.facts),
        found=fact_recall(evidence, question.facts) if evidence else None,
        wrong=wrong,
        rejected=rejected,
        ok=ok,
        honest=honest,
        better=better_drafts_discarded(data),
        drafts=_draft_count(data),
        judge=sum(grounded) / len(grounded) if grounded else None,
        wall=wall,
    )


# -- running: ingest each corpus as a user would, ask through the own-documents path ------------


class CorpusReport(BaseModel):
    """The report asked of a corpus: the demo's fields, about the user's own documents."""

    summary: str = Field(description="A direct answer to the question, in a few sentences.")
    # Bounded like the demo's: left free, a small model can repeat one finding until its output
    # cap cuts the JSON.
    key_findings: list[str] = Field(
        max_length=6, description="Facts from the documents that support the answer."
    )
    sources: list[str] = Field(max_length=6, description="The documents the findings come from.")
    confidence: float = Field(
        ge=0.0, le=1.0, description="How well the passages answer the question."
    )


SYSTEM_PROMPT = (
    "You answer questions using only {description}. Search them with search_{store} (short "
    "keyword queries work best, one topic per query), read the passages, and base every "
    "statement on what they say. Cite the source of each passage you use."
)
"""The demo's system prompt (`sleuth.apps.demo.DOCS_SYSTEM_PROMPT`) with the corpus in place of the
Python reference."""

_NOT_SETTINGS = {
    "model",
    "tools",
    "output_schema",
    "datastores",
    "system_prompt",
    "name",
    "judge_model",
    "review",
    "grounding_embedder",
    "max_cost_usd",
}

MakeModels = Callable[[str, int], "tuple[Any, Any]"]
"""(model name, seed) -> (the researcher's model, the judge's model or None for the same)."""


def store_name(corpus: Corpus) -> str:
    from sleuth.rag.demo import DEMO_STORE

    if corpus.folder is None:
        return DEMO_STORE
    return re.sub(r"[^a-z0-9_-]+", "-", corpus.name.lower()).strip("-") or "corpus"


def _sleuth_command() -> list[str]:
    script = Path(sys.executable).with_name("sleuth")
    if script.is_file():
        return [str(script)]
    found = shutil.which("sleuth")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from workers.cli import main; sys.exit(main())"]


def ingest_corpus(corpus: Corpus, home: Path) -> Any:
    """A fresh store under `home` holding the corpus, filled by `sleuth ingest`, and a retriever
    over it (BM25, as a user without an embedder gets). The documents are named as the user
    would name them from inside the folder (`apache-2.0.txt`)."""
    from sleuth.rag.retriever import RAGRetriever
    from sleuth.rag.stores.sqlite import SQLiteStore

    if corpus.folder is None:
        from sleuth.rag.demo import ensure_demo_store

        return ensure_demo_store(home)
    name = store_name(corpus)
    documents = [p.name for p in corpus.documents()]
    command = [*_sleuth_command(), "ingest", *documents, "--store", name]
    done = subprocess.run(
        command,
        cwd=corpus.folder,
        env={**os.environ, "SLEUTH_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise CorpusError(
            f"`sleuth ingest` of corpus {corpus.name} failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-2000:]}"
        )
    return RAGRetriever(store=SQLiteStore.named(name, home))


def demo_settings(retriever: Any) -> dict[str, Any]:
    """The demo research config's settings (thresholds, loop limits, plan size, output cap...),
    read from `sleuth.apps.demo.docs_research` so the benchmark follows the demo when it changes."""
    from sleuth.apps.demo import docs_research
    from sleuth.models.scripted import ScriptedModel
    from sleuth.research import create_research_workflow

    demo = docs_research(retriever, model=ScriptedModel())
    names = inspect.signature(create_research_workflow).parameters
    return {n: getattr(demo, n) for n in names if n not in _NOT_SETTINGS and hasattr(demo, n)}


def research_spec(corpus: Corpus, retriever: Any, model: Any, judge: Any = None) -> Any:
    """The own-documents research config: the corpus as the one datastore, the demo's
    settings; `judge` None judges with `model`, as the demo does."""
    from sleuth.apps.demo import docs_research
    from sleuth.research import create_research_workflow

    settings = demo_settings(retriever)
    if corpus.folder is None:
        demo = docs_research(retriever, model=model)
        system_prompt, schema, datastores = demo.system_prompt, demo.output_schema, demo.datastores
    else:
        store = store_name(corpus)
        system_prompt = SYSTEM_PROMPT.format(description=corpus.description, store=store)
        schema = CorpusReport
        datastores = {
            store: {"retriever": retriever, "description": corpus.description, "top_k": 3}
        }
    return create_research_workflow(
        model=model,
        judge_model=judge,
        output_schema=schema,
        datastores=datastores,
        system_prompt=system_prompt,
        name=f"bench-{store_name(corpus)}",
        **settings,
    )


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


def evidence_text(state: Any) -> str:
    """Everything the evidence trail holds: each tool output and the text of each passage in it."""
    return "\n".join(text for item in state.evidence for text in _texts(item.output))


def report_data(report: Any) -> dict[str, Any]:
    """The report as JSON data (the shape a durable outcome's `final_state` has)."""
    data: dict[str, Any] = report.model_dump(mode="json")
    return data


async def run_question(spec: Any, question: Question, label: str) -> tuple[Any, Any, float]:
    """Run one question in-process; returns the final report, the final state and the wall time."""
    from sleuth.runtime.events import Event, forward_events

    started = time.perf_counter()

    def progress(event: Event) -> None:
        if event.event_type == "research.node":
            elapsed = time.perf_counter() - started
            print(f"  {label}: {event.data['node']} done at {elapsed:.0f} s", file=sys.stderr)

    with forward_events(progress):
        result = await spec.execute(question.text)
    return result.final_state, result.state, time.perf_counter() - started


def printed_report(report: Any, question: Question) -> str:
    """The report as `sleuth research` prints it."""
    from sleuth.activities.research_models import ResearchOutcome
    from sleuth.workers.cli_research import format_report

    outcome = ResearchOutcome(
        final_state=report, state_ref="(in-process)", research="bench", workflow_id="-", run_id="-"
    )
    return f"$ {question.text}\n{format_report(outcome, '(in-process run)')}\n"


def local_models(threads: int | None, temperature: float) -> MakeModels:
    """Seed 0: the local model decoding greedily, judging itself (the demo's set-up). Seed k > 0:
    the researcher samples at `temperature` with seed k; the judge stays greedy."""
    from sleuth.models import resolve

    def make(name: str, seed: int) -> tuple[Any, Any]:
        spec = name if name.startswith("local:") else f"local:{name}"
        greedy = resolve(spec, local_n_threads=threads)
        if seed == 0:
            return greedy, None
        sampled = resolve(
            spec, local_n_threads=threads, local_temperature=temperature, local_seed=seed
        )
        return sampled, greedy

    return make


def select_questions(
    corpus: Corpus,
    kinds: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Question]:
    """The corpus's questions of `kinds` (all by default) and `ids` (all by default), at most
    `limit` of each kind, in file order."""
    chosen = [q for q in corpus.questions if (not kinds or q.kind in kinds)]
    if ids:
        chosen = [q for q in chosen if q.id in ids]
    if limit:
        taken: dict[str, int] = {}
        kept = []
        for q in chosen:
            if taken.get(q.kind, 0) < limit:
                taken[q.kind] = taken.get(q.kind, 0) + 1
                kept.append(q)
        chosen = kept
    return chosen


async def run_benchmark(
    plan: Sequence[tuple[Corpus, Sequence[Question]]],
    models: Sequence[str],
    seeds: int,
    make_models: MakeModels,
    home: Path,
    *,
    reports: Path | None = None,
    on_score: Callable[[Score], None] | None = None,
) -> list[Score]:
    """Ingest each corpus into a fresh store under `home`, then ask each of its questions with
    each model and seed; returns every run's score in order."""
    scores: list[Score] = []
    for corpus, questions in plan:
        if not questions:
            continue
        retriever = ingest_corpus(corpus, home)
        for name in models:
            for seed in range(seeds):
                model, judge = make_models(name, seed)
                spec = research_spec(corpus, retriever, model, judge)
                for question in questions:
                    label = f"{corpus.name}/{question.id}/s{seed}"
                    report, state, wall = await run_question(spec, question, label)
                    score = score_run(
                        corpus.name,
                        question,
                        report_data(report),
                        evidence=evidence_text(state),
                        model=name,
                        seed=seed,
                        wall=wall,
                    )
                    if reports is not None:
                        reports.mkdir(parents=True, exist_ok=True)
                        file = f"{Path(name).name}-{corpus.name}-{question.id}-s{seed}.txt"
                        (reports / file).write_text(printed_report(report, question))
                        # The JSON too, so a run can be scored again after the annotations change.
                        (reports / f"{file[:-4]}.json").write_text(
                            json.dumps(report_data(report), indent=1, default=str)
                        )
                    scores.append(score)
                    if on_score is not None:
                        on_score(score)
    return scores


# -- tables -------------------------------------------------------------------------------------


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _of(count: int, total: int) -> str:
    return f"{count}/{total}" if total else "-"


RUN_HEADER = (
    f"{'model':<20} {'corpus':<14} {'question':<32} {'kind':<12} {'seed':>4} {'status':<11} "
    f"{'end':<17} {'recall':>6} {'found':>6} {'wrong':>5} {'rejected':>8} {'ok':>3} "
    f"{'honest':>6} {'better':>6} {'drafts':>6} {'judge':>6} {'wall s':>7}"
)


def format_run(score: Score) -> str:
    status = score.status if score.status_reported else f"{score.status}~"
    honest = "" if score.honest is None else ("yes" if score.honest else "no")
    return (
        f"{Path(score.model).name:<20} {score.corpus:<14} {score.question:<32} {score.kind:<12} "
        f"{score.seed:>4} {status:<11} {score.end_reason:<17} {_share(score.recall):>6} "
        f"{_share(score.found):>6} {len(score.wrong):>5} {len(score.rejected):>8} "
        f"{'yes' if score.ok else 'no':>3} {honest:>6} {score.better:>6} {score.drafts:>6} "
        f"{_share(score.judge):>6} {score.wall:>7.0f}"
    )


SUMMARY_HEADER = (
    f"{'model':<20} {'corpus':<14} {'runs':>4} {'recall':>6} {'wrong':>7} {'rejected':>8} "
    f"{'ok':>7} {'honest':>7} {'worse end':>9} {'better':>6} {'median wall s':>13}"
)


def format_summary(model: str, label: str, scores: Sequence[Score]) -> str:
    runs = len(scores)
    recalls = [s.recall for s in scores if s.recall is not None]
    unanswerable = [s for s in scores if s.honest is not None]
    return (
        f"{Path(model).name:<20} {label:<14} {runs:>4} "
        f"{_share(statistics.fmean(recalls) if recalls else None):>6} "
        f"{_of(sum(1 for s in scores if s.wrong), runs):>7} "
        f"{_of(sum(1 for s in scores if s.rejected), runs):>8} "
        f"{_of(sum(1 for s in scores if s.ok), runs):>7} "
        f"{_of(sum(1 for s in unanswerable if s.honest), len(unanswerable)):>7} "
        f"{_of(sum(1 for s in scores if s.better), runs):>9} "
        f"{sum(s.better for s in scores):>6} "
        f"{statistics.median(s.wall for s in scores) if scores else 0:>13.0f}"
    )


def summary_table(scores: Sequence[Score]) -> str:
    """Per model: a row per corpus, then `all`."""
    lines = [SUMMARY_HEADER]
    for model in dict.fromkeys(s.model for s in scores):
        mine = [s for s in scores if s.model == model]
        for corpus in dict.fromkeys(s.corpus for s in mine):
            lines.append(format_summary(model, corpus, [s for s in mine if s.corpus == corpus]))
        lines.append(format_summary(model, "all", mine))
    return "\n".join(lines)


def runs_table(scores: Sequence[Score]) -> str:
    return "\n".join([RUN_HEADER, *(format_run(s) for s in scores)])


LEGEND = """\
Per corpus and overall, for each model: `recall`, the mean share of the key facts the final
answers state (answerable questions); `wrong`, answers that state something the question marks
as wrong; `rejected`, answers that still state a claim the judge rejected; `ok`, reports that
end grounded or honestly partial (an unanswerable question: answered honestly); `honest`,
unanswerable questions answered "not in the sources" (status `not_found`, or an answer that says
so, with no invented value); `worse end`, runs whose final report is worse than a draft they
discarded (`better`: how many such drafts); the median wall time per run. In the per-run table
a status marked `~` was derived (the report has no `status` field: see `report_status`)."""


def docs_body(scores: Sequence[Score], seeds: int) -> str:
    return (
        f"{LEGEND}\n\n{len(scores)} runs, {seeds} seed(s) per question.\n\n"
        f"```\n{summary_table(scores)}\n```\n\n```\n{runs_table(scores)}\n```\n"
    )


# -- command line -------------------------------------------------------------------------------


def resolve_corpora(spec: str | None, root: Path = CORPORA_DIR) -> list[Corpus]:
    """`--corpus`: names under `bench/corpora/`, `python-docs`, or paths to corpus folders
    (default: every shipped corpus)."""
    if not spec:
        return shipped_corpora(root)
    corpora = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item == DEMO_CORPUS:
            corpora.append(demo_corpus())
        elif (root / item / "questions.yaml").is_file():
            corpora.append(load_corpus(root / item))
        elif Path(item).is_dir():
            corpora.append(load_corpus(Path(item).resolve()))
        else:
            known = [c.name for c in shipped_corpora(root)] + [DEMO_CORPUS]
            raise CorpusError(
                f"--corpus {item!r}: no such corpus; known: {', '.join(known)}, or give the "
                "path of a folder with documents and a questions.yaml"
            )
    return corpora


def _names(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    parser.add_argument(
        "--corpus", default=None, help="corpus names or folders, comma-separated (default: all)"
    )
    parser.add_argument(
        "--kind", default=None, help=f"question kinds, comma-separated: {', '.join(KINDS)}"
    )
    parser.add_argument("--questions", default=None, help="question ids, comma-separated")
    parser.add_argument(
        "--limit", type=int, default=None, help="at most N questions of each kind per corpus"
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="decoding seeds per question (seed 0 is greedy)"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.7,
        help="the researcher's sampling temperature for seeds after the first",
    )
    parser.add_argument(
        "--model",
        "--models",
        dest="model",
        default=DEFAULT_MODEL,
        help="local model names (or .gguf paths), comma-separated",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="llama.cpp threads (fewer than cores is faster on a busy machine)",
    )
    parser.add_argument(
        "--reports", default=None, help="write every run's printed report into this folder"
    )
    parser.add_argument(
        "--docs",
        default=None,
        help="the page to write the tables into (default docs/benchmarks.md)",
    )
    parser.add_argument("--no-docs", action="store_true", help="do not write the docs page")
    parser.add_argument(
        "--keep-stores",
        default=None,
        help="ingest into this folder and keep it (default: a temporary one)",
    )
    args = parser.parse_args(argv)
    kinds = _names(args.kind)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"--kind {','.join(unknown)}: use {', '.join(KINDS)}")
    if args.seeds < 1:
        parser.error("--seeds must be 1 or more")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be 1 or more")
    return args


def main(
    argv: Sequence[str] | None = None, *, make_models: MakeModels | None = None
) -> list[Score]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    corpora = resolve_corpora(args.corpus)
    kinds, ids = _names(args.kind), _names(args.questions)
    plan = [(c, select_questions(c, kinds, ids, args.limit)) for c in corpora]
    known = {q.id for _, qs in plan for q in qs}
    missing = [i for i in ids if i not in known]
    if missing:
        raise SystemExit(f"--questions: no question {', '.join(missing)} in the chosen corpora")
    models = _names(args.model)
    total = sum(len(qs) for _, qs in plan) * len(models) * args.seeds
    load = " ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(
        f"{total} runs: {', '.join(f'{c.name} ({len(qs)})' for c, qs in plan)} x "
        f"{len(models)} model(s) x {args.seeds} seed(s); {args.threads} llama.cpp threads; "
        f"load average {load}",
        flush=True,
    )
    print(RUN_HEADER, flush=True)
    make = make_models or local_models(args.threads, args.temperature)
    home = (
        Path(args.keep_stores)
        if args.keep_stores
        else Path(tempfile.mkdtemp(prefix="sleuth-bench-"))
    )
    try:
        scores = asyncio.run(
            run_benchmark(
                plan,
                models,
                args.seeds,
                make,
                home,
                reports=Path(args.reports) if args.reports else None,
                on_score=lambda s: print(format_run(s), flush=True),
            )
        )
    finally:
        if not args.keep_stores:
            shutil.rmtree(home, ignore_errors=True)
    print(flush=True)
    print(summary_table(scores), flush=True)
    if not args.no_docs and scores:
        command = " ".join(["python -m bench.research_quality", *map(_quote, argv)])
        page = write_section(
            DOCS_SECTION,
            docs_body(scores, args.seeds),
            command=command,
            title="Research quality on unseen material",
            path=Path(args.docs) if args.docs else None,
        )
        print(f"\nwrote the tables into {page}", flush=True)
    return scores


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


if __name__ == "__main__":
    main()
