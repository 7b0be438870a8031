"""The research graph's grounding with the claim-level judge, in both runners.

A judge that says yes to everything (the failure issue #11 starts from) must not let a falsified
claim through: the deterministic checks flag it, the run regenerates or replans because of it,
and the prompts name the claim and the check that failed. Citations quote the evidence verbatim,
invented passage numbers are dropped, and a report written without evidence is not grounded.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import uuid
from collections.abc import Callable
from typing import Any

from temporalio.testing import WorkflowEnvironment

from sleuth import App, create_research_workflow
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.agent.state import EvidenceItem
from sleuth.grounding import calibration_for
from sleuth.grounding.judge import NO_EVIDENCE
from sleuth.models.base import Message, ModelResponse, TokenLogprob, TopLogprob
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import (
    CAUSAL_PROMPT,
    REGENERATE_PROMPT,
    SUMMARIZE_PROMPT,
    WRITER_PROMPT,
    Node,
    ResearchReport,
    ResearchSpec,
    ResearchState,
    node_of_request,
)
from sleuth.research.citations import (
    drop_invented_citations,
    passage_references,
    render_passages,
    writer_passages,
)
from sleuth.workers.cli_research import NO_EVIDENCE_NOTE, format_report
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow

FACT = "Acme shipped 40 thousand widgets in 2024 according to its annual report."
TRUE_CLAIM = "Acme shipped 40 thousand widgets in 2024 [1]."
FALSIFIED = "Acme shipped 55 thousand widgets in 2024 [1]."


def lookup(topic: str) -> str:
    """Look a topic up in Acme's annual report."""
    return json.dumps({"text": FACT, "source": "acme-annual-report.pdf"})


def yes(probability: float) -> ModelResponse:
    """A judge's one-token answer with P(Yes) = `probability`, from its token probabilities."""
    top = [
        TopLogprob(token="Yes", logprob=math.log(probability)),
        TopLogprob(token="No", logprob=math.log(1 - probability)),
    ]
    return ModelResponse(
        text="Yes", logprobs=[TokenLogprob(token="Yes", logprob=top[0].logprob, top=top)]
    )


class Writer:
    """A research model whose judge says yes (P=0.95) to every claim, and whose first report
    holds a falsified number; a rewrite keeps only the true sentence. Records every prompt."""

    def __init__(self, *, searches: int = 1) -> None:
        self.searches = searches
        self.prompts: dict[str, list[str]] = {}
        self.reports = 0

    def __call__(self, call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        self.prompts.setdefault(node, []).append(call.last_user_text)
        if node == Node.EXECUTE:
            done = sum(1 for m in call.messages if m.role == "tool")
            if done < self.searches:
                return tool_call("lookup", topic=f"acme-{len(call.messages)}")
            return text("Acme shipped widgets.")
        if node == Node.GROUNDING_EVAL:
            return yes(0.95)
        if node in (Node.SUMMARIZE, Node.REGENERATE):
            self.reports += 1
            return text(f"{TRUE_CLAIM} {FALSIFIED}" if self.reports == 1 else TRUE_CLAIM)
        return text("Find how many widgets Acme shipped in 2024.")


async def in_both_runners(
    env: WorkflowEnvironment, make_spec: Callable[[], ResearchSpec], inputs: dict[str, Any]
) -> list[ResearchReport]:
    """The report of one run in-process (`spec.execute`) and of one durable run
    (`ResearchWorkflow` on the time-skipping server), each with a fresh spec."""
    in_process = (await make_spec().execute(inputs)).final_state
    app = App()
    app.research("grounding", make_spec())
    task_queue = str(uuid.uuid4())
    async with build_worker(env.client, app, task_queue=task_queue):
        outcome: ResearchOutcome = await env.client.execute_workflow(
            ResearchWorkflow.run,
            ResearchRequest.model_validate({**inputs, "research": "grounding"}),
            id=f"research-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    return [in_process, outcome.final_state]


async def test_a_falsified_claim_makes_the_run_regenerate(time_env: WorkflowEnvironment) -> None:
    """With `regenerate="rewrite"` the writer writes the report again, told what failed."""
    writers: list[Writer] = []

    def make_spec() -> ResearchSpec:
        writers.append(Writer())
        return create_research_workflow(
            model=ScriptedModel(responder=writers[-1]), tools=[lookup], regenerate="rewrite"
        )

    runs = await in_both_runners(time_env, make_spec, {"prompt": "How many widgets?"})
    for report, writer in zip(runs, writers, strict=True):
        check_regenerated(report, writer)
        assert report.removed_claims == []


async def test_a_falsified_claim_is_taken_out_without_asking_the_writer(
    time_env: WorkflowEnvironment,
) -> None:
    """By default the regeneration repairs the report by quoting: the falsified claim's closest
    quote is the fact a grounded claim already states, so the claim is dropped; the writer is
    not asked again, and the report says what was taken out."""
    writers: list[Writer] = []

    def make_spec() -> ResearchSpec:
        writers.append(Writer())
        return create_research_workflow(model=ScriptedModel(responder=writers[-1]), tools=[lookup])

    runs = await in_both_runners(time_env, make_spec, {"prompt": "How many widgets?"})
    for report, writer in zip(runs, writers, strict=True):
        assert report.nodes[-3:] == ["grounding_eval", "regenerate", "grounding_eval"]
        assert report.score_history == [0.5, 1.0] and report.end_reason == "grounded"
        assert Node.REGENERATE not in writer.prompts and writer.reports == 1
        assert report.summary == TRUE_CLAIM and report.removed_claims == [FALSIFIED]
        assert [c.claim for c in report.claims] == [TRUE_CLAIM]
        assert report.regeneration_count == 1
        outcome = ResearchOutcome(
            final_state=report, state_ref="-", research="grounding", workflow_id="-", run_id="-"
        )
        printed = format_report(outcome, "http://ui")
        assert "Removed as unsupported (replaced by the closest quote, or dropped)" in printed
        assert f"- {FALSIFIED}" in printed.split("Removed as unsupported", 1)[1]


def check_regenerated(report: ResearchReport, writer: Writer) -> None:
    assert report.nodes == [
        "plan",
        "execute",
        "causal_inference",
        "summarize",
        "grounding_eval",
        "regenerate",
        "grounding_eval",
    ]
    assert report.score_history == [0.5, 1.0] and report.end_reason == "grounded"
    # The regenerate prompt names the falsified claim and the check that caught it, with what
    # the evidence says instead.
    [regenerate] = writer.prompts[Node.REGENERATE]
    unsupported = regenerate.split("Unsupported claims", 1)[1]
    assert FALSIFIED in unsupported and TRUE_CLAIM not in unsupported
    assert "numbers: 55" in unsupported and f'"{FACT}"' in unsupported
    assert [c.claim for c in report.claims] == [TRUE_CLAIM]
    # The first eval asked both of the judge's questions about each of its two claims; the
    # second asked nothing: the rewrite kept the true sentence word for word, against the same
    # passages, so its answers were reused.
    judged = writer.prompts[Node.GROUNDING_EVAL]
    assert len(judged) == 4 and sum(f"Claim: {TRUE_CLAIM[:-5]}." in p for p in judged) == 2
    [claim] = report.claims
    assert claim.grounded and claim.model_score == 0.95
    assert claim.citations[0].quote == FACT and claim.evidence_text == [FACT]
    assert report.claim_threshold == calibration_for("scripted", "logprobs").threshold
    assert report.grounding_method == "logprobs" and report.grounding_judge == "scripted"


async def test_a_falsified_claim_with_no_regeneration_left_makes_the_run_replan() -> None:
    writer = Writer()
    spec = create_research_workflow(
        model=ScriptedModel(responder=writer), tools=[lookup], max_regenerations=0
    )
    report = (await spec.execute("How many widgets did Acme ship?")).final_state
    assert report.nodes.count("replan") == 1 and report.nodes.count("execute") == 2
    [replan] = writer.prompts[Node.REPLAN]
    assert FALSIFIED in replan and "numbers: 55" in replan
    assert report.end_reason == "grounded" and report.replan_count == 1


async def test_the_claim_threshold_is_the_judges_calibrated_one_unless_set() -> None:
    def spec(**options: object):  # type: ignore[no-untyped-def]
        writer = Writer()
        writer.reports = 1  # every report is the true sentence alone
        return create_research_workflow(
            model=ScriptedModel(responder=writer), tools=[lookup], max_replans=0, **options
        )  # type: ignore[arg-type]

    calibrated = (await spec().execute("q?")).final_state
    assert calibrated.claim_threshold == calibration_for("scripted", "logprobs").threshold
    assert calibrated.grounding_score == 1.0
    # A threshold above any score this judge gives makes the same claim ungrounded.
    strict = (await spec(claim_threshold=0.999).execute("q?")).final_state
    assert strict.claim_threshold == 0.999 and strict.grounding_score == 0.0
    # A per-run value overrides the config's.
    relaxed = (
        await spec(claim_threshold=0.999).execute({"prompt": "q?", "claim_threshold": 0.2})
    ).final_state
    assert relaxed.claim_threshold == 0.2 and relaxed.grounding_score == 1.0


async def test_a_report_written_without_evidence_is_not_grounded(
    time_env: WorkflowEnvironment,
) -> None:
    writers: list[Writer] = []

    def make_spec() -> ResearchSpec:
        writers.append(Writer(searches=0))  # the agent answers from memory: no evidence
        return create_research_workflow(
            model=ScriptedModel(responder=writers[-1]), max_replans=1, max_regenerations=1
        )

    runs = await in_both_runners(time_env, make_spec, {"prompt": "How many widgets?"})
    for report, writer in zip(runs, writers, strict=True):
        assert report.evidence == [] and report.score_history == [0.0, 0.0, 0.0]
        assert report.end_reason == "max_replans"
        assert report.claims and all(
            not c.grounded and c.rationale == NO_EVIDENCE and not c.citations for c in report.claims
        )
        assert Node.GROUNDING_EVAL not in writer.prompts  # nothing to ask the judge about
        assert "(no evidence was gathered)" in writer.prompts[Node.SUMMARIZE][0]
        # The printed report says so before anything else.
        outcome = ResearchOutcome(
            final_state=report, state_ref="-", research="default", workflow_id="-", run_id="-"
        )
        printed = format_report(outcome, "-")
        assert NO_EVIDENCE_NOTE in printed
        assert printed.index(NO_EVIDENCE_NOTE) < printed.index("Findings")


async def test_a_durable_run_without_evidence_says_so_in_its_activity_summaries(
    time_env: WorkflowEnvironment,
) -> None:
    app = App()
    app.research(
        "memory",
        create_research_workflow(
            model=ScriptedModel(responder=Writer(searches=0)), max_replans=0, max_regenerations=0
        ),
    )
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        handle = await time_env.client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="How many widgets?", research="memory"),
            id=f"no-evidence-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        await handle.result()
        summaries = [
            event.user_metadata.summary.data.decode()
            async for event in handle.fetch_history_events()
            if event.HasField("activity_task_scheduled_event_attributes")
            and event.user_metadata.HasField("summary")
        ]
    assert any("summarize with no evidence (execute gathered none)" in s for s in summaries)


async def test_writers_get_numbered_passages_and_invented_numbers_are_dropped(
    time_env: WorkflowEnvironment,
) -> None:
    prompts: list[str] = []

    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node == Node.EXECUTE:
            if not any(m.role == "tool" for m in call.messages):
                return tool_call("lookup", topic="acme")
            return text("done")
        if node == Node.SUMMARIZE:
            assert call.messages[0].content == WRITER_PROMPT and "[2]" in SUMMARIZE_PROMPT
            assert call.last_user_text.endswith(SUMMARIZE_PROMPT)
            prompts.append(call.last_user_text)
            return text("Acme shipped 40 thousand widgets [1, 7]. It did so in 2024 [9].")
        return yes(0.95)

    def make_spec() -> ResearchSpec:
        return create_research_workflow(
            model=ScriptedModel(responder=respond), tools=[lookup], causal_inference=False
        )

    runs = await in_both_runners(time_env, make_spec, {"prompt": "How many widgets?"})
    assert len(prompts) == 2
    for prompt, report in zip(prompts, runs, strict=True):
        assert f"Passages:\nFrom acme-annual-report.pdf:\n[1] {FACT}" in prompt
        assert "[2]" not in prompt.removesuffix(SUMMARIZE_PROMPT)  # one passage: no [2] given
        assert report.summary == "Acme shipped 40 thousand widgets [1]. It did so in 2024."
        assert report.passage_references == [f"acme-annual-report.pdf#chars 0-{len(FACT)}"]


def test_drop_invented_citations_keeps_numbers_that_exist() -> None:
    assert (
        drop_invented_citations("A [1]. B [4]. C [2, 5]. D [1-3].", 2)
        == "A [1]. B. C [2]. D [1, 2]."
    )
    assert drop_invented_citations("A [0] and [12] here.", 12) == "A and [12] here."
    assert drop_invented_citations("No marks at all.", 0) == "No marks at all."


def generated_evidence(rng: random.Random) -> list[EvidenceItem]:
    words = [
        "Acme",
        "widgets",
        "shipped",
        "annual",
        "report",
        "Gartner",
        "market",
        "grew",
        "percent",
        "vendors",
        "seats",
    ]

    def sentence() -> str:
        picked = rng.sample(words, 5)
        return f"{' '.join(picked).capitalize()} {rng.randint(1, 99)}."

    rows = [
        {"text": "  ".join(sentence() for _ in range(rng.randint(1, 6))), "source": f"doc-{n}"}
        for n in range(rng.randint(1, 4))
    ]
    plain = "\n\n".join(" ".join(sentence() for _ in range(3)) for _ in range(rng.randint(1, 5)))
    return [
        EvidenceItem(index=1, tool="search", arguments={"q": "x"}, output=json.dumps(rows)),
        EvidenceItem(index=2, tool="read", arguments={"name": "notes"}, output=plain),
    ]


async def test_every_quote_the_research_report_cites_is_verbatim_in_the_evidence() -> None:
    """Property over many generated claims and judges that name passages at random (some that
    do not exist): every citation's quote is the evidence text at its location, exactly."""
    rng = random.Random(11)
    checked = 0
    for _ in range(30):
        evidence = generated_evidence(rng)
        documents = [r["text"] for r in json.loads(evidence[0].output)] + [evidence[1].output]
        texts = [s for document in documents for s in re.split(r"(?<=\.)\s+", document)]
        claims = [
            rng.choice(texts).replace(str(rng.randint(1, 9)), str(rng.randint(1, 9)))
            for _ in range(8)
        ]

        def judge(call: ModelCall) -> ModelResponse:
            return text(f"{rng.choice(['Yes', 'No'])} [{rng.randint(0, 5)}, {rng.randint(1, 3)}]")

        spec = create_research_workflow(model=ScriptedModel(responder=judge))
        state = ResearchState(prompt="q?", evidence=evidence, summary="\n".join(claims))
        judged = await spec.run_node(Node.GROUNDING_EVAL, state)
        for claim in judged.claims:
            assert claim.citations, claim
            for citation in claim.citations:
                item = evidence[citation.evidence - 1]
                rows = json.loads(item.output) if citation.tool == "search" else None
                row = next((r for r in rows or [] if r["source"] == citation.source), None)
                document = row["text"] if row is not None else item.output
                start, end = map(int, citation.location.removeprefix("chars ").split("-"))
                assert document[start:end] == citation.quote
                assert citation.quote in claim.evidence_text
                checked += 1
    assert checked > 200


def test_writer_passages_are_grouped_by_source_and_numbered_in_that_order() -> None:
    rows = [
        {"text": "Alpha one.", "source": "a.md"},
        {"text": "Beta one.", "source": "b.md"},
        {"text": "Alpha two.", "source": "a.md"},
        {"text": "Alpha one.", "source": "a.md"},  # the same text again is shown once
    ]
    state = ResearchState(
        prompt="q?",
        evidence=[EvidenceItem(index=1, tool="search", output=json.dumps(rows))],
    )
    passages = writer_passages(state)
    assert render_passages(passages) == (
        "From a.md:\n[1] Alpha one.\n[2] Alpha two.\nFrom b.md:\n[3] Beta one."
    )
    assert passage_references(passages) == ["a.md#chars 0-10", "a.md#chars 0-10", "b.md#chars 0-9"]


async def test_the_writers_requests_share_the_question_notes_and_passages_as_one_prefix() -> None:
    """Causal inference, summarize and regenerate send the same system prompt and begin their
    message with the same question, notes and passages; each names its task last. A model that
    reuses a prompt's prefix (the local model's KV cache) then reads the passages once."""
    writer = Writer()
    requests: dict[Node, list[str]] = {}

    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node in (Node.CAUSAL_INFERENCE, Node.SUMMARIZE, Node.REGENERATE):
            assert call.messages[0].content == WRITER_PROMPT
            requests.setdefault(node, []).append(call.last_user_text)
        if node == Node.CAUSAL_INFERENCE:
            return text("Demand -> shipments [1]")
        return writer(call)

    spec = create_research_workflow(
        stop_when_covered=False,
        model=ScriptedModel(responder=respond),
        tools=[lookup],
        regenerate="rewrite",
    )
    report = (await spec.execute("How many widgets did Acme ship?")).final_state
    assert report.regeneration_count == 1
    [causal], [summary], [rewrite] = (
        requests[n] for n in (Node.CAUSAL_INFERENCE, Node.SUMMARIZE, Node.REGENERATE)
    )
    shared = os.path.commonprefix([causal, summary, rewrite])
    assert shared.startswith("Question:\nHow many widgets did Acme ship?")
    assert (
        "Research notes:\n" in shared
        and f"Passages:\nFrom acme-annual-report.pdf:\n[1] {FACT}" in shared
    )
    assert causal.endswith(CAUSAL_PROMPT) and summary.endswith(SUMMARIZE_PROMPT)
    assert rewrite.endswith(REGENERATE_PROMPT) and FALSIFIED in rewrite
    assert "Causal chain:\nDemand -> shipments [1]" in summary and "Causal chain" not in causal


def test_a_writers_schema_repair_turn_is_still_that_writers_request() -> None:
    for task, node in ((SUMMARIZE_PROMPT, Node.SUMMARIZE), (REGENERATE_PROMPT, Node.REGENERATE)):
        messages = [
            Message(role="system", content=WRITER_PROMPT),
            Message(role="user", content=f"Question:\nq\n\n{task}"),
            Message(role="assistant", content="{}"),
            Message(role="user", content="That does not match the required schema: ..."),
        ]
        assert node_of_request(messages) == node
    assert node_of_request([Message(role="system", content=WRITER_PROMPT)]) == Node.EXECUTE


def test_the_writers_are_told_why_a_claim_failed_in_words_not_the_judges_digits() -> None:
    """The regenerate and replan prompts name each check's finding, else the judge's doubt, and
    never the judge's probabilities: their last digits move with llama.cpp's batching (a reused
    answer against a re-asked one), and a writer that sees them can take another path."""
    from sleuth.grounding.judge import JUDGE_DOUBT
    from sleuth.research.nodes import unsupported_claims
    from sleuth.research.state import ClaimRecord, ResearchState

    doubted = ClaimRecord(
        claim="The with statement was added in Python 2.5.",
        score=0.31,
        grounded=False,
        rationale="judge P(supported)=0.56 (logprobs); quoted sentence P(same)=0.43",
        model_score=0.5612,
        quote_score=0.4287,
    )
    checked = ClaimRecord(
        claim="It was added in 3.9.",
        score=0.04,
        grounded=False,
        rationale="judge P(supported)=0.91 (logprobs); numbers: 3.9 is in no passage",
        model_score=0.91,
    )
    kept = ClaimRecord(claim="It calls __exit__.", score=0.9, grounded=True, rationale="x")
    state = ResearchState(prompt="q?", claims=[doubted, checked, kept])
    prompt = unsupported_claims(state)
    assert f"- {doubted.claim}\n  failed: {JUDGE_DOUBT}" in prompt
    assert f"- {checked.claim}\n  failed: numbers: 3.9 is in no passage" in prompt
    assert kept.claim not in prompt
    assert not re.search(r"0\.\d\d", prompt), prompt
    assert "P(" not in prompt
