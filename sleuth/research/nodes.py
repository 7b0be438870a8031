"""The six node functions of the research graph and their prompts.

Each takes the spec (configuration) and the run's state and returns a new state; none changes
the state it was given. Both runners call these very functions.

Every model request goes through a `_Meter`, which counts the node's usage, prices it and, when
the run has a cost budget, asks `UsageLimits` first: a request the dollars left cannot pay for
is not made (`BudgetSpent`), and the run ends `budget_exhausted`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from pydantic import BaseModel, ValidationError

from sleuth._util.jsontext import json_from_text, truncated_json_object
from sleuth.agent.state import LoopState
from sleuth.grounding import ground_claims, split_claims
from sleuth.grounding.judge import failure_reason
from sleuth.grounding.scoring import JUDGE_SYSTEM, QUOTE_SYSTEM
from sleuth.models.base import (
    Message,
    Model,
    ModelRequestParameters,
    ModelResponse,
    RequestKeywords,
    Usage,
    request_parameters,
)
from sleuth.research.citations import (
    drop_invented_citations,
    drop_invented_in,
    passage_references,
    render_passages,
    writer_passages,
)
from sleuth.research.parts import (
    answered_count,
    asks_synthesis,
    judge_parts,
    part_aids,
    part_texts,
    state_uncovered,
    with_answered_parts,
)
from sleuth.research.plan import (
    COVERED,
    PLAN_PROMPT,
    coverage,
    step_done,
    sub_question_prompt,
    uncovered,
    write_sub_questions,
)
from sleuth.research.report import (
    better_draft,
    clean_text,
    clean_value,
    dedupe_findings,
    dedupe_text_lists,
    report_text,
)
from sleuth.research.requote import requoted
from sleuth.research.router import Node
from sleuth.research.state import ClaimRecord, Draft, ResearchState
from sleuth.runtime.telemetry import model_request
from sleuth.tools import validation_problems
from sleuth.usage.limits import BUDGET_EXHAUSTED, UsageLimitExceeded, UsageLimits
from sleuth.usage.pricing import require_price

if TYPE_CHECKING:
    from sleuth.research.spec import DatastoreSource, ResearchSpec

CheckpointHook = Callable[[LoopState], Awaitable[None] | None]

EXECUTE_PROMPT = (
    "You are a research agent. Use your tools to gather evidence that answers the question. "
    "Prefer several focused tool calls over guessing; every fact you report must come from a tool "
    "result. When you have enough evidence, answer with your findings in plain prose."
)
WRITER_PROMPT = (
    "You are a research writer. You work only from the numbered passages you are given: state "
    "only what they say, and cite the passages by number, like [2]. Cite only numbers listed. "
    "Your task is at the end of the message."
)
"""The system prompt the causal, summarize and regenerate nodes share. Their messages start with
the same text (this prompt, the question, the notes and the passages) and name the node's task
last, so a model that reuses a prompt's prefix (the local llama.cpp model keeps its KV cache)
reads the passages once for all three."""
CAUSAL_PROMPT = (
    "Task: from the numbered passages only, write the causal chain behind the findings: one line "
    "per link, 'cause -> effect [passage number]'. Leave out links the passages do not state."
)
SUMMARIZE_PROMPT = (
    "Task: distil the numbered passages into a report that answers the question. State only what "
    "the passages say, one fact per sentence, and end each sentence with the number of the "
    "passage that states it, like [2]. Cite only numbers listed."
)
REGENERATE_PROMPT = (
    "Task: a fact-check found claims of the current report that the numbered passages do not "
    "support; each is listed above with what failed. Rewrite the report: state each of those "
    "claims only as the passages state it (the quoted sentence shows what they say), or drop it. "
    "Keep the supported sentences. Answer each part of the question listed as unanswered from "
    "the passages. End each sentence with the number of the passage that states "
    "it, like [2]. Do not add facts the passages do not state."
)
REPLAN_PROMPT = (
    "You are a research planner. The report is incomplete: some parts of the question have no "
    "evidence yet, or some claims of the report have no supporting evidence. Write a short, "
    "focused research prompt (at most five sentences) telling a research agent exactly what to "
    "look up so those parts are answered and those claims confirmed or refuted. Reply with the "
    "prompt only."
)
NODE_PROMPTS: dict[Node, str] = {
    Node.PLAN: PLAN_PROMPT,
    Node.CAUSAL_INFERENCE: CAUSAL_PROMPT,
    Node.SUMMARIZE: SUMMARIZE_PROMPT,
    Node.REGENERATE: REGENERATE_PROMPT,
    Node.REPLAN: REPLAN_PROMPT,
    Node.GROUNDING_EVAL: JUDGE_SYSTEM,
}
"""What names each node that makes one model request (execute runs an agent): the system prompt,
or, for the writers under `WRITER_PROMPT`, the task that ends their user message."""
WRITERS = (Node.CAUSAL_INFERENCE, Node.SUMMARIZE, Node.REGENERATE)


class BudgetSpent(UsageLimitExceeded):
    """A node's next model request does not fit in the run's cost budget; `spent` is what the
    node used before it stopped."""

    def __init__(self, message: str, spent: Usage):
        super().__init__(message)
        self.spent = spent


class _Meter:
    """Counts (and prices) the usage of every request one node makes, within the run's cost
    budget (a fresh meter per node call)."""

    def __init__(self, model: Model, state: ResearchState):
        self.model = model
        self.name = model.name
        self.usage = Usage()
        self._before = state.usage
        self._limits = (
            UsageLimits(max_cost_usd=state.max_cost_usd) if state.max_cost_usd is not None else None
        )

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        parameters = request_parameters(parameters, keywords)
        if self._limits is not None:
            try:
                cap = self._limits.check_before_request(
                    self._before + self.usage, messages, require_price(self.model)
                )
            except UsageLimitExceeded as exc:
                raise BudgetSpent(str(exc), self.usage) from exc
            if cap is not None:
                parameters = parameters.model_copy(
                    update={"max_output_tokens": min(cap, parameters.max_output_tokens or cap)}
                )
        response = await model_request(self.model, messages, parameters)
        self.usage = self.usage + response.usage
        return response


async def plan_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """Write the question's sub-questions and queue every one for the first execute round.

    After a reviewer's `revise` the plan is written again, following the remark; that counts as
    a revision (see `_counted`)."""
    meter = _Meter(spec.model, state)
    sub_questions = await write_sub_questions(spec, state, meter)
    return state.model_copy(
        update={
            **_revision(state),
            "sub_questions": sub_questions,
            "pending": list(range(len(sub_questions))),
            "coverage": coverage(sub_questions, state.evidence),
            "round_iterations": 0,
            "round_tokens": 0,
            "usage": state.usage + meter.usage,
        }
    )


async def execute_node(
    spec: ResearchSpec,
    state: ResearchState,
    *,
    app: DatastoreSource | None = None,
    checkpoint: LoopState | None = None,
    on_checkpoint: CheckpointHook | None = None,
) -> ResearchState:
    """One step of an execute round: the agent tool loop (reflexion on) on the next pending
    sub-question, named in its prompt (on the whole question when none is pending). Its tool
    calls are appended to the evidence trail and the coverage of every sub-question is updated.

    The round's budget is `spec.max_iterations` model turns (and `spec.execute_token_budget`
    tokens) over all its steps: each step may spend its share of what the earlier ones left (the
    turns left over the sub-questions still pending), and once the budget is spent the
    sub-questions still pending are dropped, so the round ends. With a cost budget the agent
    may spend what is left of it.
    """
    position = state.pending[0] if state.pending else None
    # A one-part question is researched as asked: its only sub-question is the question itself.
    part = position if position is not None and len(state.sub_questions) > 1 else None
    prompt = execute_prompt(state) if part is None else sub_question_prompt(state, part)
    # A fair share of what is left, so one part's searching cannot starve the parts after it.
    left = spec.max_iterations - state.round_iterations
    budget = max(1, left // max(1, len(state.pending)))
    cost_left = None if state.max_cost_usd is None else state.max_cost_usd - state.usage.cost_usd
    agent = spec.build_agent(
        app,
        max_iterations=budget,
        max_cost_usd=cost_left,
        # The writers read the passages themselves: once the step's results cover what it
        # researches, a model turn restating them would only cost time (~17 s a part, 1.5B).
        done_when=step_done(state, position) if spec.stop_when_covered else None,
    )
    result = await agent.arun(prompt, checkpoint=checkpoint, on_checkpoint=on_checkpoint)
    offset = len(state.evidence)
    gathered = [
        item.model_copy(update={"index": offset + number})
        for number, item in enumerate(result.evidence, start=1)
    ]
    evidence = [*state.evidence, *gathered]
    # A step its results ended wrote no answer: what text its last turn held ("Let me search
    # for …" beside the call) is no research note.
    answer = "" if result.stop_reason == COVERED else result.message.strip()
    if answer and part is not None:
        answer = f"{state.sub_questions[part]}\n{answer}"
    findings = "\n\n".join(p for p in (state.findings, answer) if p)
    round_iterations = state.round_iterations + result.iterations
    round_tokens = state.round_tokens + result.usage.total_tokens
    spent = round_iterations >= spec.max_iterations or (
        spec.execute_token_budget is not None and round_tokens >= spec.execute_token_budget
    )
    covered = coverage(state.sub_questions, evidence, state.coverage)
    if position is not None:
        covered[position].researched += 1
    return state.model_copy(
        update={
            "evidence": evidence,
            "findings": findings,
            "coverage": covered,
            "pending": [] if spent else state.pending[1:],
            "round_iterations": round_iterations,
            "round_tokens": round_tokens,
            "usage": state.usage + result.usage,
            "agent_stop_reasons": [*state.agent_stop_reasons, result.stop_reason],
            "budget_exhausted": left is not None and result.stop_reason == BUDGET_EXHAUSTED,
        }
    )


def execute_prompt(state: ResearchState) -> str:
    """The execute agent's prompt when no sub-question is pending: the question, plus the
    replan's focus after a replan."""
    if not state.focused_prompt:
        return state.prompt
    return (
        f"{state.prompt}\n\nFollow-up research (earlier findings lacked evidence):\n"
        f"{state.focused_prompt}"
    )


async def causal_inference_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """A causal chain built from the evidence."""
    meter = _Meter(spec.model, state)
    response = await meter.request(
        _writer_messages(state, CAUSAL_PROMPT, include_chain=False),
        max_output_tokens=spec.max_output_tokens,
    )
    return state.model_copy(
        update={"causal_chain": response.text.strip(), "usage": state.usage + meter.usage}
    )


async def summarize_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """The evidence distilled into a summary (validated against the output schema, if any)."""
    meter = _Meter(spec.model, state)
    messages = _writer_messages(state, SUMMARIZE_PROMPT, include_chain=True)
    update = await _write_report(spec, meter, messages, _numbered(state))
    return state.model_copy(update={**update, "usage": state.usage + meter.usage})


async def grounding_eval_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """Judge every claim of the report against the evidence passages that match it best
    (`sleuth.grounding.ground_claims`): the score is the share of claims grounded.

    A finding the report states twice (a key finding repeating the summary) is judged once, and
    a claim the previous eval already asked the judge about, against the same passages, is
    answered from that eval (a regeneration keeps the supported sentences). A claim counts as
    grounded when its score meets the run's claim threshold (the judge's
    calibrated one unless configured); with no evidence, no claim is grounded.
    """
    meter = _Meter(spec.judge, state) if spec.judge is not None else None
    claims = dedupe_findings(split_claims(grounded_text(state)))
    report = await ground_claims(
        claims,
        state.evidence,
        meter,
        threshold=state.claim_threshold,
        embedder=spec.grounding_embedder,
        earlier=[c.answer for c in state.claims if c.answer is not None],
    )
    records = [
        ClaimRecord(
            claim=verdict.claim,
            score=verdict.score,
            grounded=verdict.grounded,
            evidence=verdict.evidence,
            evidence_text=[citation.quote for citation in verdict.citations],
            rationale=verdict.rationale,
            citations=verdict.citations,
            checks=verdict.checks,
            model_score=verdict.model_score,
            quote_score=verdict.quote_score,
            answer=verdict.answer,
        )
        for verdict in report.claims
    ]
    answered = with_answered_parts(state.coverage, records)
    parts = judge_parts(part_texts(state), state.sub_questions, answered, records)
    writer = state.nodes[-1] if state.nodes else Node.SUMMARIZE
    draft = Draft(
        index=len(state.drafts) + 1,
        node=writer.value,
        grounding_score=report.score,
        parts_answered=answered_count(parts),
        summary=state.summary,
        structured_output=state.structured_output,
        output_error=state.output_error,
        claims=records,
        parts=parts,
        passage_references=state.passage_references,
        removed_claims=state.removed_claims,
        grounding_method=report.method,
        grounding_judge=report.judge,
        claim_threshold_used=report.threshold,
        coverage=answered,
    )
    best = state.drafts[state.best_draft - 1] if state.best_draft else None
    best = draft if better_draft(draft, best) else best
    return state.model_copy(
        update={
            "coverage": answered,
            "parts": parts,
            "drafts": [*state.drafts, draft],
            "draft_count": draft.index,
            "best_draft": best.index if best is not None else 0,
            "best_score": best.grounding_score if best is not None else None,
            "grounding_score": report.score,
            "grounding_method": report.method,
            "grounding_judge": report.judge,
            "claim_threshold_used": report.threshold,
            "claims": records,
            "score_history": [*state.score_history, report.score],
            "usage": state.usage + (meter.usage if meter else Usage()),
        }
    )


async def regenerate_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """Repair the report without new tool calls: each ungrounded claim is replaced by the quote
    of the evidence closest to it, or dropped (`sleuth.research.requote`; no model call), and
    the claims taken out are kept in `removed_claims`.

    The writer rewrites the report instead (repairing or dropping ungrounded claims) when the
    spec says `regenerate="rewrite"`, when the repair would leave no claim or break the output
    schema, and with a reviewer's remark (a `revise` decision): the rewrite then follows the
    remark too, and counts as a revision, not a regeneration."""
    synthesis = _synthesis_text(state)
    if spec.regenerate == "requote" and not state.review_remark and not synthesis:
        repaired = requoted(state, spec.output_schema)
        if repaired is not None:
            return state.model_copy(update={**repaired, **_counted(state, "regeneration_count")})
    meter = _Meter(spec.model, state)
    messages = _writer_messages(
        state,
        REGENERATE_PROMPT,
        include_chain=True,
        extra=f"Current report:\n{grounded_text(state)}"
        + "\n\nUnsupported claims (what failed, and what the passages say):\n"
        + unsupported_claims(state)
        + _unanswered_text(state)
        + synthesis
        + _remark_text(state),
    )
    update = await _write_report(spec, meter, messages, _numbered(state))
    return state.model_copy(
        update={
            **update,
            **_counted(state, "regeneration_count"),
            "usage": state.usage + meter.usage,
        }
    )


async def replan_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """A prompt focused on the uncovered sub-questions and the ungrounded claims, for the next
    execute round, which researches the uncovered sub-questions again one by one.

    With a reviewer's remark (a `revise` decision on the plan) the current plan is rewritten to
    follow it; that counts as a revision, not a replan, and replaces the plan under review."""
    meter = _Meter(spec.model, state)
    missing_parts = state_uncovered(state)
    aids = part_aids(part_texts(state), state.sub_questions)
    missing = sorted({j for i in missing_parts for j in aids[i] if j in uncovered(state)})
    gaps = _gaps(state, missing_parts)
    current = f"\n\nCurrent plan:\n{state.focused_prompt}" if state.review_remark else ""
    response = await meter.request(
        [
            Message(role="system", content=REPLAN_PROMPT),
            Message(
                role="user",
                content=f"Question:\n{state.prompt}\n\n{gaps}" + current + _remark_text(state),
            ),
        ],
        max_output_tokens=spec.max_output_tokens,
    )
    focused = response.text.strip() or f"Find evidence for what is missing.\n\n{gaps}"
    earlier = state.focused_prompts[:-1] if state.review_remark else state.focused_prompts
    return state.model_copy(
        update={
            "focused_prompt": focused,
            "focused_prompts": [*earlier, focused],
            **_counted(state, "replan_count"),
            "pending": missing,
            "round_iterations": 0,
            "round_tokens": 0,
            "usage": state.usage + meter.usage,
        }
    )


def _unanswered_text(state: ResearchState) -> str:
    """The parts of the question the passages answer and the report does not (nothing if none)."""
    missing = _unanswered_parts(state)
    if not missing:
        return ""
    listed = "\n".join(f"- {state.parts[i].text}" for i in missing)
    return f"\n\nParts of the question the report leaves unanswered:\n{listed}"


def _unanswered_parts(state: ResearchState) -> list[int]:
    """0-based indices of the question's parts the evidence covers and the last judged draft does
    not answer."""
    if not state.drafts:
        return []
    covered = set(range(len(state.parts))) - set(state_uncovered(state))
    return [i for i in sorted(covered) if state.parts[i].state != "answered"]


def _synthesis_text(state: ResearchState) -> str:
    """For each unanswered part that asks for a comparison or a reason, the passages that cover
    it, to be combined into one claim in the writer's own words: no quoted sentence of one
    passage compares or explains (nothing when there is no such part)."""
    lines = []
    passages = writer_passages(state)
    keys = [" ".join(p.text.split()) for p in passages]
    aids = part_aids(part_texts(state), state.sub_questions)
    for index in _unanswered_parts(state):
        part = state.parts[index]
        if not asks_synthesis(part.text):
            continue
        entries = [state.coverage[j] for j in aids[index] if j < len(state.coverage)]
        texts = [" ".join(p.text.split()) for e in entries for p in e.passages]
        numbers = sorted(
            {n for n, key in enumerate(keys, start=1) if any(t in key or key in t for t in texts)}
        )
        cite = f" (combine passages {', '.join(f'[{n}]' for n in numbers)})" if numbers else ""
        lines.append(f"- {part.text}{cite}")
    if not lines:
        return ""
    return (
        "\n\nThese parts ask for a comparison or a reason. Answer each in your own words in one "
        "or two sentences that combine what the passages say, citing every passage you combine; "
        "a quoted sentence that only mentions the topic does not answer them:\n" + "\n".join(lines)
    )


def _remark_text(state: ResearchState) -> str:
    """The reviewer's remark, as the model reads it (nothing without one)."""
    if not state.review_remark:
        return ""
    return f"\n\nA reviewer read this and asked for a change:\n{state.review_remark}"


def _revision(state: ResearchState) -> dict[str, Any]:
    """The update of a node that wrote again because a reviewer's remark asked for it: one more
    revision, and the remark is used up (nothing without a remark)."""
    if state.review_remark:
        return {"revision_count": state.revision_count + 1, "review_remark": None}
    return {}


def _counted(state: ResearchState, counter: str) -> dict[str, Any]:
    """The counter update of a node that wrote again: a revision when a reviewer's remark asked
    for it, else one more of `counter`."""
    current: int = getattr(state, counter)
    return _revision(state) or {counter: current + 1}


def _gaps(state: ResearchState, missing: list[int]) -> str:
    """What the replan prompt names: the question's parts with no evidence (`missing`, 0-based)
    and the ungrounded claims."""
    parts = []
    if missing:
        texts = part_texts(state)
        listed = "\n".join(f"- {texts[i]}" for i in missing)
        parts.append(f"Parts of the question with no evidence yet:\n{listed}")
    if any(not c.grounded for c in state.claims) or not missing:
        parts.append(f"Unsupported claims:\n{unsupported_claims(state)}")
    return "\n\n".join(parts)


# -- writing the report ---------------------------------------------------------------------------


async def _write_report(
    spec: ResearchSpec, model: Model, messages: list[Message], passages: list[str]
) -> dict[str, Any]:
    """Ask for the report (`_written_report`), then drop every inline `[n]` the writer cited
    beyond `passages`, the references of the numbered passages its prompt gave, and every
    pointer into a document the reader does not have (`see section 4.2`) and repeated sentence
    (`report.clean_text`): a claim is judged without them."""
    update = await _written_report(spec, model, messages)
    count = len(passages)
    update["summary"] = clean_text(drop_invented_citations(update["summary"], count))
    structured = update["structured_output"]
    if structured is not None and spec.output_schema is not None:
        cleaned = clean_value(drop_invented_in(structured, count))
        # A schema that constrains the text itself keeps the writer's own strings.
        with contextlib.suppress(ValidationError):
            update["structured_output"] = spec.output_schema.model_validate(cleaned).model_dump(
                mode="json"
            )
    update["passage_references"] = passages
    update["removed_claims"] = []
    return update


async def _written_report(
    spec: ResearchSpec, model: Model, messages: list[Message]
) -> dict[str, Any]:
    """Ask for the report; with an output schema, validate it (one repair turn, then give up)."""
    schema = spec.output_json_schema()
    response = await model.request(
        messages, output_schema=schema, max_output_tokens=spec.max_output_tokens
    )
    if spec.output_schema is None:
        return {"summary": response.text.strip(), "structured_output": None, "output_error": None}
    parsed, error = _validate(spec.output_schema, response)
    first = response
    if error is not None:
        repair = _repair_request(messages, response, error)
        response = await model.request(
            repair, output_schema=schema, max_output_tokens=spec.max_output_tokens
        )
        parsed, error = _validate(spec.output_schema, response)
    if parsed is None:
        prose = _unvalidated_prose(first) or _unvalidated_prose(response) or response.text
        return {"summary": prose.strip(), "structured_output": None, "output_error": error}
    summary = parsed.get("summary")
    return {
        "summary": summary if isinstance(summary, str) else report_text(parsed),
        "structured_output": parsed,
        "output_error": None,
    }


CUT_NOTE = (
    "(A first answer {reason} and was cut off before it ended. Write a shorter report: state "
    "each fact once, in one sentence, and do not repeat yourself.)"
)
"""What a writer asked again after a cut answer reads after its task."""
CUT_REASONS = {"length": "ran past the length limit", "repetition": "began repeating itself"}
"""The finish reasons of an answer cut off before its end, and how the writer is told."""


def _repair_request(messages: list[Message], response: ModelResponse, error: str) -> list[Message]:
    """The request for a report that did not validate. A complete answer goes back with the
    error to fix. An answer cut off (at the output cap, or a loop the local model stopped) does
    not: shown its runaway text, a small writer writes it again. The task is asked again with a
    note to say each fact once (the request's prefix is unchanged, so a local model reuses it)."""
    reason = CUT_REASONS.get(response.finish_reason or "")
    if reason is None:
        return [
            *messages,
            Message(role="assistant", content=response.text),
            Message(
                role="user",
                content=f"That does not match the required schema: {error}. Reply with only a JSON "
                "object that matches it, with the same report: fix only what the error names.",
            ),
        ]
    last = messages[-1]
    note = CUT_NOTE.format(reason=reason)
    return [*messages[:-1], last.model_copy(update={"content": f"{last.content}\n\n{note}"})]


def _unvalidated_prose(response: ModelResponse) -> str:
    """The prose of an answer whose JSON object did not validate (`report_text`), or "" when it
    holds none. After a failed repair the first answer's prose is the report: a small writer
    asked to repair a report (a confidence of 100 where at most 1 is allowed) can answer about
    the error instead, and neither answer's raw JSON is prose to judge."""
    data = _answer_data(response)
    return report_text(data) if isinstance(data, dict) else ""


def _answer_data(response: ModelResponse) -> Any:
    """The JSON an answer holds: its structured output, else the first object in its text, else
    what an object its output cap cut off completed (a small writer can repeat a finding until
    the cap; the complete findings are still its report)."""
    if response.structured is not None:
        return response.structured
    found = json_from_text(response.text, kind="object")
    return found if found is not None else truncated_json_object(response.text)


def _validate(
    schema: type[BaseModel], response: ModelResponse
) -> tuple[dict[str, Any] | None, str | None]:
    """The answer as schema-valid JSON data, with lists of text deduplicated when the schema
    still accepts them that way; or the reason it does not validate."""
    data = _answer_data(response)
    if not isinstance(data, dict):
        return None, "the answer contained no JSON object"
    try:
        valid: dict[str, Any] = schema.model_validate(data).model_dump(mode="json")
    except ValidationError as exc:
        return None, validation_problems(exc, whole="the answer", given=True)
    try:
        deduped: dict[str, Any] = schema.model_validate(dedupe_text_lists(valid)).model_dump(
            mode="json"
        )
    except ValidationError:
        return valid, None  # e.g. a list with a minimum length: keep the model's own list
    return deduped, None


def grounded_text(state: ResearchState) -> str:
    """What grounding eval judges: the whole structured report if there is one, else the summary."""
    if state.structured_output:
        return report_text(state.structured_output)
    return state.summary


def _writer_messages(
    state: ResearchState, task: str, *, include_chain: bool, extra: str = ""
) -> list[Message]:
    """A writer node's request: `WRITER_PROMPT`, then the question, its parts (`_asked`, so the
    report answers each; the 1.5B otherwise left the last part out), the
    research notes and the passages (the same text for every writer of a round), then the causal chain, `extra` and the
    node's `task` last, so the writers share the longest prefix."""
    parts = [f"Question:\n{state.prompt}"]
    asked = _asked(state)
    if len(asked) > 1:
        listed = "\n".join(f"{n}. {q}" for n, q in enumerate(asked, start=1))
        parts.append(f"Its parts (answer each one the passages answer):\n{listed}")
    if state.findings:
        parts.append(f"Research notes:\n{state.findings}")
    parts.append(f"Passages:\n{render_passages(writer_passages(state))}")
    if include_chain and state.causal_chain:
        parts.append(f"Causal chain:\n{state.causal_chain}")
    parts.extend(p for p in (extra, task) if p)
    return [
        Message(role="system", content=WRITER_PROMPT),
        Message(role="user", content="\n\n".join(parts)),
    ]


def _asked(state: ResearchState) -> list[str]:
    """What the writers are asked to answer, in order: for each part of the question, the
    sub-questions that research it (self-contained, as the planner wrote them), else the part
    itself. A sub-question the planner added that researches no part is left out: the writer
    answers what the user asked."""
    texts = part_texts(state)
    aids = part_aids(texts, state.sub_questions)
    asked: list[str] = []
    for part, researched in zip(texts, aids, strict=True):
        asked.extend([state.sub_questions[j] for j in researched] or [part])
    return asked


def _numbered(state: ResearchState) -> list[str]:
    """The references of the numbered passages `_writer_messages` gives the writers."""
    return passage_references(writer_passages(state))


def unsupported_claims(state: ResearchState) -> str:
    """The claims the last grounding eval did not find grounded, one a line, each with why (the
    checks that failed, or the judge's doubt) and the closest quote of the evidence."""
    lines = []
    for claim in state.claims:
        if claim.grounded:
            continue
        line = f"- {claim.claim}\n  failed: {failure_reason(claim.rationale)}"
        if claim.citations:
            closest = claim.citations[0]
            line += f'\n  the passages say ({closest.source}): "{" ".join(closest.quote.split())}"'
        lines.append(line)
    return "\n".join(lines) or "- (none listed)"


# -- scripted models for tests and benchmarks -----------------------------------------------------


def node_of_request(messages: Sequence[Message]) -> Node:
    """Which research node sent a model request (for `ScriptedModel(responder=...)` in tests):
    one of `NODES`; requests of the execute agent return `Node.EXECUTE`. Both of the judge's
    questions (the passages, then the quoted sentence) are `grounding_eval`'s."""
    system = next((m.content for m in messages if m.role == "system"), "")
    if system == QUOTE_SYSTEM:
        return Node.GROUNDING_EVAL
    if system == WRITER_PROMPT:
        # The writer's own message (a schema repair turn comes after it; a cut answer's retry
        # adds CUT_NOTE to it).
        task = next((m.content for m in messages if m.role == "user"), "")
        task = task.split("\n\n" + CUT_NOTE[: CUT_NOTE.index("{")], 1)[0]
        for node in WRITERS:
            if task.endswith(NODE_PROMPTS[node]):
                return node
    for node, prompt in NODE_PROMPTS.items():
        if system == prompt and node not in WRITERS:
            return node
    return Node.EXECUTE
