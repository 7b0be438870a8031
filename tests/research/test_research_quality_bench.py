"""The research-quality benchmark on unseen material (`bench/research_quality.py`): its shipped
corpora are consistent, it runs end to end over a corpus with the scripted model, it scores known
outcomes right from the report's JSON (with and without the loop's `status`/`parts`/`drafts`),
and it replaces its section of the docs page instead of appending to it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import research_quality as rq
from bench._docs_table import DocsSectionError, markers, write_section
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, structured, text, tool_call
from sleuth.research import node_of_request

CORRECT = "The default compression level of gzip is 6 [1]."
# Verbatim from an outdated note of the corpus: any judge finds it supported, yet it answers the
# question wrongly, which only the benchmark's annotation can tell.
OUTDATED = "The default compression level of zstd is 9 [1]."
NOT_FOUND = (
    "The documents do not say which environment variable sets the number of threads gzip uses."
)

DOCUMENTS = {
    "gzip.txt": (
        "gzip compresses files with Lempel-Ziv coding.\n\n"
        "The default compression level of gzip is 6. Level 9 gives the best compression and "
        "level 1 the fastest.\n\n"
        "The -k option keeps the input file; without it gzip replaces the file with a .gz file.\n"
    ),
    "zstd.txt": (
        "zstd is a fast compressor. zstd preserves source files by default; the --rm option "
        "removes them after compression.\n\nThe default level of zstd today is 3.\n"
    ),
    "old-notes.txt": (
        "These notes were written for an early release.\n\n"
        "The default compression level of zstd is 9.\n"
    ),
}
QUESTIONS = """\
corpus: tiny
description: notes on the gzip and zstd compressors
questions:
  - id: gzip-level
    kind: single
    question: What compression level does gzip use by default?
    facts: ['\\b6\\b']
    wrong: ['default[^.]*\\b9\\b']
    answer: gzip compresses at level 6 unless told otherwise.
    sources: [gzip.txt]
  - id: zstd-level
    kind: single
    question: What compression level does zstd use by default?
    facts: ['\\b3\\b']
    wrong: ['default[^.]*\\b9\\b']
    sources: [zstd.txt]
  - id: gzip-threads
    kind: unanswerable
    question: Which environment variable sets the number of threads gzip uses?
    facts: []
    wrong: ['GZIP_THREADS', 'ZSTD_NBTHREADS']
    honest: The documents do not say which environment variable sets gzip's threads.
"""
ANSWERS = {
    "What compression level does gzip use by default?": CORRECT,
    "What compression level does zstd use by default?": OUTDATED,
    "Which environment variable sets the number of threads gzip uses?": NOT_FOUND,
}


def tiny_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, body in DOCUMENTS.items():
        (folder / name).write_text(body)
    (folder / "questions.yaml").write_text(QUESTIONS)
    (folder / "SOURCE.md").write_text("Written for this test.\n")
    return folder


def _question(call: ModelCall) -> str:
    for message in call.messages:
        for question in ANSWERS:
            if question in message.content:
                return question
    return ""  # the judge's requests name the claim, not the question


def respond(call: ModelCall) -> ModelResponse:
    """A researcher that searches for the question once and writes its scripted answer, and a
    judge that says every claim is supported."""
    node = node_of_request(call.messages)
    question = _question(call)
    if node == "grounding_eval" or not question:
        return text("Yes")
    if node == "plan":
        return text(json.dumps([question]))
    if node == "execute":
        if any(m.role == "tool" for m in call.messages):
            return text("The passages above answer it.")
        return tool_call(call.tool_names[0], query=question)
    if node == "causal_inference":
        return text("(no causal chain)")
    if node in ("summarize", "regenerate"):
        answer = ANSWERS[question]
        if call.output_schema is None:
            return text(answer)
        return structured({"summary": answer, "key_findings": [], "sources": [], "confidence": 0.5})
    if node == "replan":
        return text(question)
    return text("Yes")


def test_harness_runs_end_to_end_and_scores_known_outcomes(tmp_path: Path) -> None:
    corpus = tiny_corpus(tmp_path / "tiny")
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    page.write_text("# Benchmarks\n\nAn introduction that stays.\n")
    seeds: list[int] = []

    def make_models(name: str, seed: int) -> tuple[Any, Any]:
        seeds.append(seed)
        return ScriptedModel(responder=respond), None

    args = ["--corpus", str(corpus), "--model", "scripted", "--seeds", "2", "--docs", str(page)]
    scores = rq.main(args, make_models=make_models)

    assert seeds == [0, 1]
    by_run = {(s.question, s.seed): s for s in scores}
    assert sorted(by_run) == sorted((q, seed) for q in ANSWERS_IDS for seed in (0, 1))
    for seed in (0, 1):
        correct = by_run["gzip-level", seed]
        assert correct.recall == 1.0 and correct.found == 1.0
        assert correct.wrong == [] and correct.rejected == []
        assert correct.status == "grounded" and correct.ok and correct.better == 0
        outdated = by_run["zstd-level", seed]
        assert outdated.recall == 0.0
        assert outdated.wrong == ["default[^.]*\\b9\\b"]
        not_found = by_run["gzip-threads", seed]
        assert not_found.honest is True and not_found.ok and not_found.recall is None
        assert not_found.wrong == []

    table = rq.summary_table(scores)
    row = next(line for line in table.splitlines() if line.split()[1] == "tiny")
    # runs, recall (mean of 1 and 0), wrong, rejected, ok, honest, worse end, better drafts:
    # the outdated answer is grounded (ok) and still wrong, which only the annotation tells
    assert row.split()[2:10] == ["6", "0.50", "2/6", "0/6", "6/6", "2/2", "0/6", "0"]

    first = page.read_text()
    assert "An introduction that stays." in first
    assert f"--corpus {corpus}" in first and "6 runs, 2 seed(s)" in first
    assert first.count(markers("research_quality")[0]) == 1

    again = rq.main(
        [*args[:4], "--kind", "unanswerable", "--docs", str(page)], make_models=make_models
    )
    assert [s.question for s in again] == ["gzip-threads"]
    second = page.read_text()
    start, end = markers("research_quality")
    assert second.count(start) == 1 and second.count(end) == 1
    assert "1 runs, 1 seed(s)" in second and "6 runs" not in second
    assert "An introduction that stays." in second


ANSWERS_IDS = ("gzip-level", "zstd-level", "gzip-threads")


def _question_of(kind: str, **fields: Any) -> rq.Question:
    return rq.Question(id="q", kind=kind, text="?", facts=fields.pop("facts", ()), **fields)


def _claim(sentence: str, grounded: bool) -> dict[str, Any]:
    return {"claim": sentence, "grounded": grounded, "score": 0.9 if grounded else 0.1}


def test_scores_a_report_with_status_parts_and_drafts() -> None:
    statement = "The indexed documents do not say how the two compare."
    data = {
        "summary": f"gzip uses level 6 [1]. {statement}",
        "status": "partial",
        "end_reason": "max_replans",
        "claims": [_claim("gzip uses level 6.", True), _claim("zstd uses level 9.", False)],
        "parts": [
            {"text": "What level does gzip use?", "state": "answered", "statement": ""},
            {"text": "How do they compare?", "state": "not_stated", "statement": statement},
        ],
        "drafts": [
            {"index": 1, "node": "summarize", "grounding_score": 1.0, "parts_answered": 1.0},
            {"index": 2, "node": "regenerate", "grounding_score": 0.5, "parts_answered": 2.0},
            {"index": 3, "node": "summarize", "grounding_score": 1.0, "parts_answered": 0.5},
        ],
        "best_draft": 3,
    }
    question = _question_of("multi", facts=(r"\b6\b", "compar"), wrong=(r"level 9",))
    score = rq.score_run("c", question, data)
    assert (score.status, score.status_reported) == ("partial", True)
    assert score.ok  # honestly partial: the part it leaves open is said to be missing
    assert score.recall == 0.5 and score.wrong == [] and score.rejected == []
    assert score.better == 1 and score.drafts == 3  # draft 1 beat the final draft 3

    assert rq.score_run("c", question, {**data, "best_draft": 1}).better == 0
    silent = {**data, "summary": "gzip uses level 6 [1]."}
    assert not rq.score_run("c", question, silent).ok  # the open part is not stated

    unanswerable = _question_of("unanswerable", wrong=(r"\b22\b",), honest="not said")
    said = {"summary": "", "status": "not_found", "parts": [{"state": "not_stated"}]}
    assert rq.score_run("c", unanswerable, said).honest is True
    invented = {**said, "summary": "The highest level is 22."}
    assert rq.score_run("c", unanswerable, invented).honest is False


def test_scores_a_report_without_the_new_fields() -> None:
    """Reports from before `status`, `parts` and `drafts`: the status is derived from
    `end_reason` and the grounding, discarded drafts come from `score_history`."""
    wrong = "zstd uses level 9 by default."
    data = {
        "summary": f"gzip uses level 6 [1]. {wrong} [2]",
        "structured_output": {"summary": "…", "key_findings": ["gzip is fast"], "sources": ["x"]},
        "end_reason": "max_replans",
        "grounding_score": 0.5,
        "grounding_threshold": 0.8,
        "score_history": [1.0, 0.5],
        "claims": [_claim("gzip uses level 6.", True), _claim(wrong, False)],
    }
    question = _question_of("single", facts=(r"\b6\b", "fast"), wrong=(r"level 9",))
    score = rq.score_run("c", question, data)
    assert (score.status, score.status_reported) == ("ungrounded", False)
    assert score.rejected == [wrong] and score.wrong == ["level 9"]
    assert score.recall == 1.0  # "fast" is stated in the structured output's key findings
    assert score.better == 1 and not score.ok

    above = {**data, "grounding_score": 0.9, "score_history": [0.5, 0.9]}
    assert rq.score_run("c", question, above).status == "partial"
    assert rq.score_run("c", question, above).better == 0
    assert rq.score_run("c", question, {**data, "end_reason": "grounded"}).status == "grounded"

    unanswerable = _question_of("unanswerable", wrong=(r"GZIP_THREADS",), honest="not said")
    honest = {
        "summary": NOT_FOUND,
        "end_reason": "max_replans",
        "claims": [_claim(NOT_FOUND, False)],
    }
    scored = rq.score_run("c", unanswerable, honest)
    assert scored.status == "not_found" and scored.honest is True and scored.rejected == []
    invented = {**honest, "summary": "Set GZIP_THREADS to the number of threads."}
    assert rq.score_run("c", unanswerable, invented).honest is False


def test_shipped_corpora_have_every_kind_and_consistent_annotations() -> None:
    corpora = rq.shipped_corpora()
    assert len(corpora) >= 3
    for corpus in corpora:
        assert corpus.folder is not None and (corpus.folder / "SOURCE.md").is_file()
        assert sum(p.stat().st_size for p in corpus.documents()) < 150_000
        for kind in rq.KINDS:
            assert sum(q.kind == kind for q in corpus.questions) >= 2, (corpus.name, kind)
        for q in corpus.questions:
            if q.kind == "unanswerable":
                # The honest answer passes the benchmark's own check, the invented ones do not.
                assert rq.says_not_in_sources(q.honest), q.id
                assert rq.matching(q.wrong, q.honest) == [], q.id
                continue
            assert q.answer, q.id
            assert rq.fact_recall(q.answer, q.facts) == 1.0, (q.id, q.facts)
            assert rq.matching(q.wrong, q.answer) == [], q.id
            if q.kind == "synthesis":
                assert len(q.sources) >= 2, q.id


def test_docs_section_is_replaced_and_broken_markers_refused(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    write_section("other_bench", "other table", command="python -m bench.other", path=page)
    write_section("research_quality", "first table", command="cmd one", path=page)
    write_section("research_quality", "second table", command="cmd two", path=page)
    body = page.read_text()
    assert "other table" in body and "second table" in body and "cmd two" in body
    assert "first table" not in body and "cmd one" not in body
    assert body.count("<!-- bench:research_quality:start -->") == 1

    start, _ = markers("research_quality")
    page.write_text(body + "\n" + start + "\n")
    with pytest.raises(DocsSectionError, match="expected one of each"):
        write_section("research_quality", "third", command="cmd", path=page)
    assert "second table" in page.read_text()  # the page is left as it was


def test_a_malformed_questions_file_is_refused_with_its_place(tmp_path: Path) -> None:
    folder = tiny_corpus(tmp_path / "bad")
    (folder / "questions.yaml").write_text(
        QUESTIONS.replace("wrong: ['GZIP_THREADS', 'ZSTD_NBTHREADS']", "wrong: ['GZIP_(']")
    )
    with pytest.raises(rq.CorpusError, match=re.escape("'gzip-threads', wrong")):
        rq.load_corpus(folder)
    (folder / "questions.yaml").write_text(
        QUESTIONS.replace("kind: single", "kind: single-fact", 1)
    )
    with pytest.raises(rq.CorpusError, match="kind 'single-fact'; use one of single"):
        rq.load_corpus(folder)
    with pytest.raises(rq.CorpusError, match="no such corpus"):
        rq.resolve_corpora("no-such-corpus")
