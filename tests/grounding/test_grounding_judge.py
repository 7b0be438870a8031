"""The claim-level judge with scripted judge models: every path of `ground_claims`."""

from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from sleuth.agent.state import EvidenceItem
from sleuth.grounding import ground_claims
from sleuth.grounding.calibration import VETO_CAP, calibration_for
from sleuth.grounding.judge import NO_EVIDENCE
from sleuth.grounding.passages import PassageIndex, split_passages
from sleuth.grounding.scoring import (
    ANSWER_TOKENS,
    JUDGE_SYSTEM,
    QUOTE_SYSTEM,
    TOP_LOGPROBS,
    cited_passages,
    yes_probability,
)
from sleuth.models.base import ModelResponse, TokenLogprob, TopLogprob
from sleuth.models.scripted import ModelCall, ScriptedModel, text

ITEMS = Path(__file__).resolve().parents[2] / "bench" / "grounding_data" / "items.json"

WITH_ROWS = [
    {
        "id": "w1",
        "source": "python-docs/with",
        "location": "chars 803-1230",
        "score": 1.0,
        "text": (
            "7. The context manager's __exit__() method is invoked. If an exception caused "
            "the suite to be exited, its type, value, and traceback are passed as arguments "
            "to __exit__(). Otherwise, three None arguments are supplied. If the return value "
            "was true, the exception is suppressed, and execution continues with the "
            "statement following the with statement."
        ),
    },
    {
        "id": "t1",
        "source": "python-docs/try",
        "location": "chars 5988-6200",
        "score": 0.6,
        "text": (
            "If the finally clause raises another exception, the saved exception is set as "
            "the context of the new exception. The exception information is not available "
            "to the program during execution of the finally clause."
        ),
    },
]
CHANGELOG = (
    "gzip (1.12-1) sid; urgency=high\n\n"
    "  * new upstream release\n"
    "    - zgrep: fix arbitrary-file-write vulnerability\n"
    "      address CVE-2022-1271 (closes: #1009168)\n"
    "    - report correct length of 4 GiB and larger files (closes: #149775)\n\n"
    " -- Milan Kupcevic <milan@debian.org>  Sat, 09 Apr 2022 22:22:26 -0400"
)
SUPPRESSED = "If the return value was true, the exception is suppressed."
FOUR_GIB = "gzip 1.12-1 reports the correct length of files of 4 GiB and larger."
BOTH_PASSAGES = (
    "The exception is suppressed if the return value was true, and the saved exception becomes "
    "the context of a new exception raised by the finally clause."
)


def trail() -> list[EvidenceItem]:
    return [
        EvidenceItem(
            index=1,
            tool="search_python_docs",
            arguments={"query": "with"},
            output=json.dumps(WITH_ROWS),
        ),
        EvidenceItem(
            index=2, tool="read_changelog", arguments={"package": "gzip"}, output=CHANGELOG
        ),
    ]


def answer(probability: float, *, word: str = "Yes") -> ModelResponse:
    """A judge answer whose first token has P(Yes) = `probability`."""
    yes, no = math.log(max(probability, 1e-9)), math.log(max(1 - probability, 1e-9))
    top = sorted(
        [TopLogprob(token=word, logprob=yes), TopLogprob(token="No", logprob=no)],
        key=lambda c: -c.logprob,
    )
    first = top[0]
    return ModelResponse(
        text=first.token,
        logprobs=[TokenLogprob(token=first.token, logprob=first.logprob, top=top)],
    )


def claim_of(call: ModelCall) -> str:
    return call.last_user_text.split("Claim: ", 1)[1].split("\n", 1)[0]


def judge_by(probabilities: dict[str, float]) -> ScriptedModel:
    """A judge with P(Yes) per claim (0.5 for others), answering with token probabilities."""

    def respond(call: ModelCall) -> ModelResponse:
        return answer(probabilities.get(claim_of(call), 0.5))

    return ScriptedModel(responder=respond)


async def test_each_claim_gets_its_own_question_with_its_passages_before_it() -> None:
    claims = [SUPPRESSED, FOUR_GIB, "The saved exception becomes the context of the new one."]
    judge = judge_by({})
    report = await ground_claims(claims, trail(), judge)

    # Three questions over passages, then (the judge has token probabilities) three about the
    # quoted sentences.
    asked, quoted = judge.calls[:3], judge.calls[3:]
    assert len(judge.calls) == 6 and [v.claim for v in report.claims] == claims
    assert sorted(claim_of(call) for call in asked) == sorted(claims)
    assert sorted(claim_of(call) for call in quoted) == sorted(claims)
    assert all(call.system_text == QUOTE_SYSTEM for call in quoted)
    for call in asked:
        assert call.system_text == JUDGE_SYSTEM
        question = call.last_user_text
        assert question.count("Claim: ") == 1
        assert question.index("Passages:\n[1] (") < question.index("Claim: ")
        assert call.top_logprobs == TOP_LOGPROBS
    # Once the first answer showed token probabilities, one answer token is enough.
    assert judge.calls[0].max_output_tokens == ANSWER_TOKENS
    assert [c.max_output_tokens for c in judge.calls[1:]] == [1] * 5
    gzip_call = next(c for c in asked if claim_of(c) == FOUR_GIB)
    assert "4 GiB" in gzip_call.last_user_text and "read_changelog(package=gzip)" in (
        gzip_call.last_user_text
    )


async def test_a_claims_verdict_does_not_depend_on_the_other_claims() -> None:
    probabilities = {SUPPRESSED: 0.9, FOUR_GIB: 0.2}
    alone = await ground_claims([SUPPRESSED], trail(), judge_by(probabilities))
    together = await ground_claims(
        [FOUR_GIB, SUPPRESSED, "Something else entirely about zgrep."],
        trail(),
        judge_by(probabilities),
    )
    assert alone.claims[0] == together.claims[1]


async def test_the_model_score_is_p_yes_from_the_answer_tokens_probabilities() -> None:
    report = await ground_claims([SUPPRESSED], trail(), judge_by({SUPPRESSED: 0.8}))
    (verdict,) = report.claims

    assert report.method == "logprobs" and report.judge == "scripted"
    assert verdict.model_score == pytest.approx(0.8)
    calibration = calibration_for("scripted", "logprobs")
    assert verdict.quote_score == pytest.approx(0.8)  # the scripted judge answers both alike
    assert verdict.score == pytest.approx(calibration.combine(0.8, verdict.features, 0.8), abs=1e-4)
    assert verdict.checks == [] and verdict.features["coverage"] == 1.0
    assert report.threshold == calibration.threshold
    (citation,) = verdict.citations
    assert citation.quote.startswith("If the return value was true, the exception is suppressed")
    assert citation.reference.startswith("python-docs/with#chars ")


def test_yes_probability_sums_the_spellings_of_each_answer() -> None:
    response = ModelResponse(
        text="Yes",
        logprobs=[
            TokenLogprob(
                token="Yes",
                logprob=math.log(0.5),
                top=[
                    TopLogprob(token="Yes", logprob=math.log(0.5)),
                    TopLogprob(token=" yes", logprob=math.log(0.1)),
                    TopLogprob(token="No", logprob=math.log(0.2)),
                    TopLogprob(token="The", logprob=math.log(0.2)),
                ],
            )
        ],
    )
    assert yes_probability(response) == pytest.approx(0.6 / 0.8)
    assert yes_probability(text("Yes")) is None
    neither = response.model_copy(
        update={"logprobs": [TokenLogprob(token="The", logprob=0.0, top=[])]}
    )
    assert yes_probability(neither) is None


async def test_without_token_probabilities_the_generated_verdict_scores() -> None:
    def respond(call: ModelCall) -> ModelResponse:
        return text("Yes [1]" if claim_of(call) == SUPPRESSED else "No.")

    judge = ScriptedModel(responder=respond)
    report = await ground_claims([SUPPRESSED, FOUR_GIB], trail(), judge)

    assert report.method == "verdict"
    assert [v.model_score for v in report.claims] == [1.0, 0.0]
    assert all(c.max_output_tokens == ANSWER_TOKENS for c in judge.calls)
    calibration = calibration_for("scripted", "verdict")
    assert report.threshold == calibration.threshold
    assert report.claims[0].score > report.claims[1].score


async def test_no_evidence_means_no_grounding_and_no_question() -> None:
    judge = ScriptedModel()  # any request would fail the test
    claims = [SUPPRESSED, FOUR_GIB]
    for evidence in (
        [],
        [EvidenceItem(index=1, tool="search", output=CHANGELOG, success=False, error="boom")],
        [EvidenceItem(index=1, tool="weather", output="Sunny, 21 degrees.")],
    ):
        report = await ground_claims(claims, evidence, judge)
        assert report.score == 0.0 and len(report.claims) == 2
        for verdict in report.claims:
            assert not verdict.grounded and verdict.score == 0.0
            assert verdict.rationale == NO_EVIDENCE and verdict.citations == []
    assert judge.calls == []


async def test_passage_numbers_the_judge_invents_are_dropped() -> None:
    def respond(call: ModelCall) -> ModelResponse:
        return text("Yes [2, 9, 0]")

    judge = ScriptedModel(responder=respond)
    report = await ground_claims([BOTH_PASSAGES], trail(), judge, passages_per_claim=3)
    (verdict,) = report.claims

    blocks = re.findall(r"^\[(\d+)\] \((.*?)\) (.*)$", judge.calls[0].last_user_text, re.M)
    assert [number for number, _, _ in blocks] == ["1", "2"]
    second = blocks[1][2]
    assert len(verdict.citations) == 1
    assert " ".join(verdict.citations[0].quote.split()) in second
    assert cited_passages("Yes [2, 9, 0] and 3", 3) == [2, 3]


def texts_of(item: EvidenceItem) -> list[str]:
    """Where a quote may be found verbatim: the output, or each search row's text."""
    try:
        rows = json.loads(item.output)
    except json.JSONDecodeError:
        return [item.output]
    return [row["text"] for row in rows] if isinstance(rows, list) else [item.output]


def seeded_judge(verdicts: bool) -> ScriptedModel:
    """A judge whose answer is a fixed function of the claim: P(Yes) from a hash, or a generated
    Yes/No citing passage numbers that partly do not exist."""

    def respond(call: ModelCall) -> ModelResponse:
        seed = zlib.crc32(claim_of(call).encode())
        if verdicts:
            return text(f"{'Yes' if seed % 2 else 'No'} [{seed % 5}, {seed % 3 + 1}]")
        return answer((seed % 100) / 100)

    return ScriptedModel(responder=respond)


@pytest.mark.parametrize("verdicts", [False, True], ids=["logprobs", "verdict"])
async def test_every_cited_span_is_found_verbatim_in_the_evidence(verdicts: bool) -> None:
    """Over every group of the grounding benchmark: 100% of quotes are verbatim, located where
    their location says, and shorter than a tool output of more than a passage."""
    groups = json.loads(ITEMS.read_text(encoding="utf-8"))["groups"]
    cited = 0
    for group in groups:
        evidence = [EvidenceItem.model_validate(item) for item in group["evidence"]]
        claims = [c["text"] for c in group["claims"]]
        report = await ground_claims(claims, evidence, seeded_judge(verdicts))
        for verdict in report.claims:
            assert verdict.citations, verdict.claim
            for citation in verdict.citations:
                cited += 1
                item = evidence[citation.evidence - 1]
                assert citation.tool == item.tool
                assert any(citation.quote in t for t in texts_of(item)), citation
                start, end = map(int, re.findall(r"chars (\d+)-(\d+)$", citation.location)[0])
                assert end - start == len(citation.quote)
                if not citation.source.startswith("python-docs/"):
                    assert item.output[start:end] == citation.quote
                assert len(citation.quote) < max(len(item.output), 401)
                assert citation.quote.strip() == citation.quote and citation.quote
            if verdict.grounded:
                assert verdict.evidence == sorted({c.evidence for c in verdict.citations})
            else:
                assert verdict.evidence == []
    assert cited >= sum(len(g["claims"]) for g in groups)


async def test_the_checks_overrule_a_confident_judge_on_a_changed_number() -> None:
    changed = "gzip 1.12-1 reports the correct length of files of 2 GiB and larger."
    report = await ground_claims(
        [FOUR_GIB, changed], trail(), judge_by({FOUR_GIB: 0.95, changed: 0.95})
    )
    kept, rejected = report.claims
    assert kept.grounded and kept.checks == []
    # 2 GiB is nowhere in the evidence: the check decides, however sure the judge is.
    assert not rejected.grounded and rejected.checks == ["numbers"]
    assert rejected.score <= VETO_CAP and rejected.features["vetoed"] == 1.0
    assert "numbers: 2" in rejected.rationale


async def test_the_threshold_defaults_to_the_calibration_and_can_be_overridden() -> None:
    probabilities = {SUPPRESSED: 0.7, FOUR_GIB: 0.7}
    default = await ground_claims([SUPPRESSED, FOUR_GIB], trail(), judge_by(probabilities))
    assert default.threshold == calibration_for("scripted", "logprobs").threshold
    strict = await ground_claims(
        [SUPPRESSED, FOUR_GIB], trail(), judge_by(probabilities), threshold=1.0
    )
    assert strict.threshold == 1.0 and strict.score == 0.0
    lenient = await ground_claims(
        [SUPPRESSED, FOUR_GIB], trail(), judge_by(probabilities), threshold=0.0
    )
    assert lenient.score == 1.0
    with pytest.raises(ValueError, match="threshold must be within 0..1"):
        await ground_claims([SUPPRESSED], trail(), judge_by({}), threshold=1.5)
    with pytest.raises(ValueError, match="passages_per_claim"):
        await ground_claims([SUPPRESSED], trail(), judge_by({}), passages_per_claim=0)


async def test_claims_about_the_same_passages_are_asked_one_after_another() -> None:
    """So a local judge evaluates the shared passages once and only the claim after them."""
    claims = [
        SUPPRESSED,
        FOUR_GIB,
        "If the return value was true, execution continues after the with statement.",
    ]
    judge = judge_by({})
    await ground_claims(claims, trail(), judge, passages_per_claim=1, concurrency=1)
    questions = [c for c in judge.calls if c.system_text == JUDGE_SYSTEM]
    prefixes = [c.last_user_text.split("Claim: ")[0] for c in questions]
    asked = [claim_of(c) for c in questions]
    with_claims = [i for i, claim in enumerate(asked) if claim != FOUR_GIB]
    assert with_claims in ([0, 1], [1, 2])
    assert prefixes[with_claims[0]] == prefixes[with_claims[1]]


async def test_without_a_judge_the_checks_alone_decide() -> None:
    stated = "zgrep: fix arbitrary-file-write vulnerability, address CVE-2022-1271"
    changed = "zgrep: fix arbitrary-file-write vulnerability, address CVE-2022-1272"
    report = await ground_claims([stated, changed], trail(), None)
    assert report.method == "checks" and report.judge == ""
    assert [v.grounded for v in report.claims] == [True, False]
    assert all(v.model_score is None for v in report.claims)


async def test_a_passage_every_search_returned_fills_one_of_a_claims_slots() -> None:
    """Three searches returned the same chunk, a fourth a different one: the claim is judged
    against both texts, not against three copies of one (which left out what it rests on)."""
    repeated = {**WITH_ROWS[1], "text": "The with statement calls __exit__ when its suite ends."}
    searches = [
        EvidenceItem(
            index=n,
            tool="search_python_docs",
            arguments={"query": "with"},
            output=json.dumps([repeated]),
        )
        for n in (1, 2, 3)
    ]
    searches.append(
        EvidenceItem(
            index=4,
            tool="search_python_docs",
            arguments={"query": "exit"},
            output=json.dumps([WITH_ROWS[0]]),
        )
    )
    asked: list[str] = []

    def respond(call: ModelCall) -> ModelResponse:
        if call.system_text == JUDGE_SYSTEM:
            asked.append(call.last_user_text)
        return answer(0.9)

    claim = (
        "The with statement calls __exit__ when its suite ends, and __exit__ gets the "
        "exception's type, value, and traceback as arguments."
    )
    report = await ground_claims([claim], searches, ScriptedModel(responder=respond))
    [prompt] = asked
    assert prompt.split("Claim:")[0].count("calls __exit__ when its suite ends") == 1
    assert "type, value, and traceback are passed" in prompt
    [verdict] = report.claims
    assert verdict.grounded and "unsupported_content" not in verdict.rationale


async def test_no_claims_make_an_empty_report() -> None:
    report = await ground_claims([], trail(), ScriptedModel())
    assert (report.score, report.claims, report.method) == (0.0, [], "none")


async def test_an_embedder_finds_passages_for_a_claim_in_other_words() -> None:
    from tests.grounding.test_grounding_passages import KeywordEmbedder

    evidence = [
        EvidenceItem(index=1, tool="notes", output="The automobile was red. Prices rose in May.")
    ]
    claim = "A car is described"
    without = await ground_claims([claim], evidence, judge_by({claim: 0.9}))
    assert without.claims[0].rationale == NO_EVIDENCE
    judge = judge_by({claim: 0.9})
    with_embedder = await ground_claims(
        [claim], evidence, judge, embedder=KeywordEmbedder(), passages_per_claim=1
    )
    (verdict,) = with_embedder.claims
    assert verdict.model_score == pytest.approx(0.9)
    assert "automobile" in judge.calls[0].last_user_text


async def test_the_judge_is_shown_only_the_passages_that_match_the_claim_nearly_as_well() -> None:
    """A selected passage whose BM25 score is under half the best one's is not in the judge's
    prompt (the try passage shares only "exception" with the first claim; the changelog only
    "new" with the second); `select` still returns every selected passage for the checks."""
    judge = ScriptedModel(responder=lambda call: text("Yes"))
    await ground_claims([SUPPRESSED, BOTH_PASSAGES], trail(), judge, passages_per_claim=3)
    shown = {
        call.last_user_text.split("Claim: ")[1].split("\n")[0]: re.findall(
            r"^\[\d+\] \((.*?)\)", call.last_user_text, re.M
        )
        for call in judge.calls
    }
    assert shown[SUPPRESSED] == ["python-docs/with"]
    assert shown[BOTH_PASSAGES] == ["python-docs/with", "python-docs/try"]
    index = PassageIndex(split_passages(trail()))
    selected, focus = index.select_and_focus(BOTH_PASSAGES, top=3)
    assert len(selected) == 3 and [p.source for p in focus] == shown[BOTH_PASSAGES]
    # With embeddings, a passage as close by cosine as the best is shown though it shares
    # fewer words; one far below is not.
    vectors = np.array([[1.0, 0.0], [0.95, 0.31], [0.0, 1.0]], dtype=np.float32)
    by_vector = PassageIndex(split_passages(trail()), vectors)
    _, focus = by_vector.select_and_focus(SUPPRESSED, top=3, claim_vector=[1.0, 0.0])
    assert [p.source for p in focus] == ["python-docs/with", "python-docs/try"]


async def test_a_judge_with_token_probabilities_is_asked_the_quote_question() -> None:
    """After the yes/no question over the passages, a judge with token probabilities is asked
    whether the claim's quoted sentence alone says what the claim says; the calibration weighs
    both answers, so a doubtful second answer lowers the score."""
    calls: list[ModelCall] = []

    def respond(call: ModelCall) -> ModelResponse:
        calls.append(call)
        return answer(0.1 if call.last_user_text.startswith("Sentence: ") else 0.9)

    report = await ground_claims([SUPPRESSED], trail(), ScriptedModel(responder=respond))
    first, second = calls
    (verdict,) = report.claims
    assert first.system_text == JUDGE_SYSTEM and second.system_text == QUOTE_SYSTEM
    sentence = " ".join(verdict.citations[0].quote.split())
    assert second.last_user_text.startswith(f"Sentence: {sentence}\n\nClaim: {SUPPRESSED}")
    assert "Passages:" not in second.last_user_text and second.max_output_tokens == 1
    assert verdict.model_score == pytest.approx(0.9) and verdict.quote_score == pytest.approx(0.1)
    assert "quoted sentence P(same)=0.10" in verdict.rationale
    calibration = calibration_for("scripted", "logprobs")
    assert calibration.asks_quote
    expected = calibration.combine(0.9, verdict.features, 0.1)
    assert verdict.score == pytest.approx(expected, abs=1e-4)
    agreeing = await ground_claims([SUPPRESSED], trail(), judge_by({SUPPRESSED: 0.9}))
    assert agreeing.claims[0].score > verdict.score

    # Not asked when turned off, nor of a judge without token probabilities.
    calls.clear()
    once = await ground_claims(
        [SUPPRESSED], trail(), ScriptedModel(responder=respond), quote_question=False
    )
    assert len(calls) == 1 and once.claims[0].quote_score is None
    verdict_judge = ScriptedModel(responder=lambda call: text("Yes [1]"))
    generated = await ground_claims([SUPPRESSED], trail(), verdict_judge, quote_question=True)
    assert len(verdict_judge.calls) == 1 and generated.claims[0].quote_score is None


def test_a_second_answer_without_token_probabilities_counts_the_first_twice() -> None:
    calibration = calibration_for("scripted", "logprobs")
    features = {"coverage": 1.0}
    assert calibration.combine(0.8, features, None) == pytest.approx(
        calibration.combine(0.8, features, 0.8)
    )
    assert calibration.combine(0.8, features, 0.2) < calibration.combine(0.8, features, 0.8)


async def test_an_earlier_answer_to_the_same_question_is_reused_not_asked_again() -> None:
    """A later grounding (after a regeneration or a replan) passes the earlier verdicts'
    answers: a claim asked about against the same passages by the same judge is not asked
    again, and its verdict is the one it had; a new claim, other passages or another judge
    are asked."""
    first_judge = judge_by({SUPPRESSED: 0.9, FOUR_GIB: 0.2})
    first = await ground_claims([SUPPRESSED, FOUR_GIB], trail(), first_judge)
    assert len(first_judge.calls) == 4  # two claims, two questions each
    earlier = [v.answer for v in first.claims if v.answer is not None]
    assert len(earlier) == 2 and all(a.quote is not None for a in earlier)

    # The new judge would answer differently: the verdict kept shows it was not asked.
    later_judge = judge_by({SUPPRESSED: 0.1, BOTH_PASSAGES: 0.7})
    later = await ground_claims([SUPPRESSED, BOTH_PASSAGES], trail(), later_judge, earlier=earlier)
    assert sorted(claim_of(c) for c in later_judge.calls) == [BOTH_PASSAGES, BOTH_PASSAGES]
    assert later.claims[0] == first.claims[0]
    assert later.claims[1].model_score == pytest.approx(0.7)
    # The judge's answers being known to carry token probabilities, one answer token will do.
    assert [c.max_output_tokens for c in later_judge.calls] == [1, 1]

    # The same claim against other passages is a new question.
    row = {**WITH_ROWS[0], "text": WITH_ROWS[0]["text"] + " Otherwise it propagates."}
    moved = [trail()[0].model_copy(update={"output": json.dumps([row, WITH_ROWS[1]])})]
    other_passages = judge_by({SUPPRESSED: 0.1})
    again = await ground_claims([SUPPRESSED], moved, other_passages, earlier=earlier)
    # (Its quoted sentence is the same, so the second question's answer still stands.)
    assert [c.system_text for c in other_passages.calls] == [JUDGE_SYSTEM]
    assert again.claims[0].model_score == pytest.approx(0.1)
    assert again.claims[0].quote_score == first.claims[0].quote_score

    # So is the same question to another judge.
    other = judge_by({SUPPRESSED: 0.1})
    other.name = "another-judge"
    renamed = await ground_claims([SUPPRESSED], trail(), other, earlier=earlier)
    assert len(other.calls) == 2 and renamed.claims[0].model_score == pytest.approx(0.1)


async def test_a_reused_generated_verdict_keeps_the_passages_it_named() -> None:
    verdict_judge = ScriptedModel(responder=lambda call: text("Yes [1]"))
    first = await ground_claims([SUPPRESSED], trail(), verdict_judge)
    (verdict,) = first.claims
    assert verdict.answer is not None and verdict.answer.method == "verdict"
    assert verdict.answer.cited == [1] and verdict.answer.quote is None

    refusing = ScriptedModel(responder=lambda call: text("No"))
    later = await ground_claims([SUPPRESSED, FOUR_GIB], trail(), refusing, earlier=[verdict.answer])
    assert later.claims[0] == verdict and later.method == "verdict"
    # Only the new claim was asked, with room for a generated verdict and its passages.
    [call] = refusing.calls
    assert claim_of(call) == FOUR_GIB and call.max_output_tokens == ANSWER_TOKENS
    assert not later.claims[1].grounded
