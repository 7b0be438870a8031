"""The router: which node runs next, and why a finished run ended. Pure functions of the digest.

Both runners drive `next_node`: `ResearchSpec.execute` in-process and `workflows.ResearchWorkflow`
durably. The runner that calls it is the only place that decides a run is over; it then asks
`end_reason` why and hands that to the finish step, which writes the report.

A review is part of the route: where the run's review settings pause it, `next_node` says
`review`; the runner gets a decision (a callback in-process, the `review` Update durably),
records it with `record_review`, and `next_node` routes on it. A spent cost budget ends a run
at once (`budget_exhausted`), without a review.

`ResearchDigest`, all the router reads, is defined here with it; `ResearchState` extends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, field_validator

from sleuth.flows.review import MAX_REVISIONS, ReviewPoint, ReviewSettings, Verdict


class Node(StrEnum):
    """A position in the research graph: `start`, one of the seven nodes, `review` (a person
    decides) or `done`."""

    START = "start"
    PLAN = "plan"
    EXECUTE = "execute"
    CAUSAL_INFERENCE = "causal_inference"
    SUMMARIZE = "summarize"
    GROUNDING_EVAL = "grounding_eval"
    REGENERATE = "regenerate"
    REPLAN = "replan"
    REVIEW = "review"
    DONE = "done"


NodeName = Node
"""The former name of `Node` (a Literal of the node names); kept so old imports keep working."""

NODES: tuple[Node, ...] = (
    Node.PLAN,
    Node.EXECUTE,
    Node.CAUSAL_INFERENCE,
    Node.SUMMARIZE,
    Node.GROUNDING_EVAL,
    Node.REGENERATE,
    Node.REPLAN,
)
"""The nodes that run (everything but `start`, `review` and `done`), in graph order."""
DONE = Node.DONE
START = Node.START
REVIEW = Node.REVIEW

PLAN_NODES: frozenset[Node] = frozenset({Node.PLAN, Node.REPLAN})
"""Nodes whose output is a plan for the next execute round: the `plan` review point pauses
after them, and a revised plan is written by the same node again."""

EndReason = Literal["grounded", "max_replans", "max_regenerations", "rejected", "budget_exhausted"]
"""Why a run ended: its summary met the grounding threshold with every sub-question covered,
the loops it may spend ran out, a reviewer rejected it, or its cost budget was spent."""

MAX_LOOPS = 10
"""The most replans, and the most regenerations, one run may spend (per-run overrides included)."""

_NODE_NAMES = frozenset(node.value for node in Node)


def unknown_node(value: object) -> ValueError:
    """The error for a node name the graph does not have (names the ones it does)."""
    return ValueError(
        f"unknown research node {value!r}; nodes: {', '.join(node.value for node in Node)}"
    )


class ResearchDigest(BaseModel):
    """What the router reads: the last node, the score, the counters and the run's limits.

    Fixed in size on purpose: it crosses the wire after every durable node. Anything that grows
    with the run (scores so far, evidence, the path) lives in `ResearchState`.
    """

    node: Node = Node.START
    """The node that completed last (`start` before any)."""
    grounding_score: float | None = Field(default=None, ge=0.0, le=1.0)
    replan_count: int = Field(default=0, ge=0, le=MAX_LOOPS)
    regeneration_count: int = Field(default=0, ge=0, le=MAX_LOOPS)
    grounding_threshold: float = Field(default=0.65, ge=0.0, le=1.0)
    max_replans: int = Field(default=2, ge=0, le=MAX_LOOPS)
    max_regenerations: int = Field(default=1, ge=0, le=MAX_LOOPS)
    causal_inference: bool = True
    evidence_count: int = Field(default=0, ge=0)
    """Evidence items gathered so far (for the Web UI's activity summaries)."""
    total_tokens: int = Field(default=0, ge=0)
    """Tokens spent so far (for the memo)."""
    cost_usd: float = Field(default=0.0, ge=0.0)
    """USD spent so far at the models' prices."""
    max_cost_usd: float | None = Field(default=None, gt=0.0)
    """The run's cost budget (None: none)."""
    budget_exhausted: bool = False
    """A node found the cost budget too small for its next model request."""
    review: ReviewSettings | None = None
    """Where the run pauses for a person, and how long it waits (None: never)."""
    reviewed: Node | None = None
    """At `review`: the node whose output is under review."""
    review_decision: Verdict | None = None
    """At `review`: what was decided (by a person, or by the timeout)."""
    revision_count: int = Field(default=0, ge=0, le=MAX_REVISIONS)
    """Plans and summaries written again because a reviewer asked (not counted as replans or
    regenerations)."""

    sub_question_count: int = Field(default=0, ge=0)
    """The sub-questions the plan node wrote (0 before it ran, and in runs begun without it)."""
    pending_count: int = Field(default=0, ge=0)
    """Sub-questions the current execute round has still to research: execute runs again while
    any are left (the execute node drops them all once the round's budget is spent)."""
    next_sub_question: int = Field(default=0, ge=0)
    """The 1-based number of the sub-question the next execute step researches (0: none pending)."""
    uncovered_count: int = Field(default=0, ge=0)
    """Parts of the question itself (`sleuth.research.parts.question_parts`) no evidence passage
    answers yet: a reason to replan, like an ungrounded claim. A planner's sub-question that
    researches no part of the question never counts here."""
    unanswered_count: int = Field(default=0, ge=0)
    """Parts of the question the evidence answers and no grounded claim of the last judged report
    does: a reason to regenerate (the evidence is there; the report left it out)."""
    draft_count: int = Field(default=0, ge=0)
    """Drafts of the report judged so far."""
    best_draft: int = Field(default=0, ge=0)
    """The 1-based number of the best judged draft so far (0: none judged yet): the one the run
    ends with unless a later one is better (`sleuth.research.report.better_draft`)."""
    best_score: float | None = Field(default=None, ge=0.0, le=1.0)
    """The grounding score of the best judged draft so far."""

    @field_validator("node", mode="before")
    @classmethod
    def _known_node(cls, value: object) -> Node:
        if isinstance(value, str) and value in _NODE_NAMES:
            return Node(value)
        raise unknown_node(value)


def _as_digest(state: ResearchDigest | Mapping[str, Any]) -> ResearchDigest:
    if isinstance(state, ResearchDigest):
        return state
    return ResearchDigest.model_validate(
        {k: v for k, v in state.items() if k in ResearchDigest.model_fields}
    )


def is_grounded(state: ResearchDigest | Mapping[str, Any]) -> bool:
    """Whether the last grounding eval met the run's threshold."""
    digest = _as_digest(state)
    return (
        digest.grounding_score is not None and digest.grounding_score >= digest.grounding_threshold
    )


def budget_spent(state: ResearchDigest | Mapping[str, Any]) -> bool:
    """Whether the run's cost budget is used up (or too small for a node's next request)."""
    digest = _as_digest(state)
    if digest.budget_exhausted:
        return True
    return digest.max_cost_usd is not None and digest.cost_usd >= digest.max_cost_usd


def is_covered(state: ResearchDigest | Mapping[str, Any]) -> bool:
    """Whether evidence answers every part of the question itself (`uncovered_count` is 0)."""
    return _as_digest(state).uncovered_count == 0


def next_node(state: ResearchDigest | Mapping[str, Any]) -> Node:
    """The node to run after `state.node`, or `Node.DONE`. Pure: both runners route with it.

    Start → plan → execute, once per sub-question of the round (while `pending_count` > 0).
    After grounding eval: grounded (score ≥ threshold) and every sub-question covered → done,
    unless the report leaves a covered sub-question unanswered and regenerations are left
    (→ regenerate); not grounded and regenerations left → regenerate; else replans left → replan (an uncovered
    sub-question needs new evidence, which only a replan's execute round gathers); else done.
    Where the run's review settings pause it (after a plan, and before a run ends after grounding
    eval) the answer is `review`; after a review, `approve` goes where the run would have gone,
    `revise` writes the plan (or summary) again and `reject` ends the run. A spent cost budget
    ends the run.
    """
    digest = _as_digest(state)
    if digest.node == Node.DONE:
        return Node.DONE
    if digest.node == Node.REVIEW:
        return _after_review(digest)
    if budget_spent(digest):
        return Node.DONE
    match digest.node:
        case Node.START:
            return Node.PLAN
        case Node.EXECUTE if digest.pending_count > 0:
            return Node.EXECUTE
        case Node.EXECUTE:
            return Node.CAUSAL_INFERENCE if digest.causal_inference else Node.SUMMARIZE
        case Node.CAUSAL_INFERENCE:
            return Node.SUMMARIZE
        case Node.SUMMARIZE | Node.REGENERATE:
            return Node.GROUNDING_EVAL
        case Node.GROUNDING_EVAL:
            after = _after_grounding(digest)
            return Node.REVIEW if after == Node.DONE and _pauses(digest, "summary") else after
        case _ if digest.node in PLAN_NODES:
            return Node.REVIEW if _pauses(digest, "plan") else Node.EXECUTE
    raise unknown_node(digest.node)


def _after_grounding(digest: ResearchDigest) -> Node:
    grounded = is_grounded(digest)
    regenerations_left = digest.regeneration_count < digest.max_regenerations
    if grounded and is_covered(digest):
        return Node.REGENERATE if digest.unanswered_count and regenerations_left else Node.DONE
    if not grounded and regenerations_left:
        return Node.REGENERATE
    if digest.replan_count < digest.max_replans:
        return Node.REPLAN
    return Node.DONE


def _pauses(digest: ResearchDigest, point: ReviewPoint) -> bool:
    return digest.review is not None and digest.review.pauses_at(point)


def _after_review(digest: ResearchDigest) -> Node:
    reviewed = digest.reviewed
    if reviewed is None or digest.review_decision is None:
        raise ValueError(
            "the digest is at `review` without a decision; record one with record_review(...)"
        )
    is_plan = reviewed in PLAN_NODES
    match digest.review_decision:
        case "reject":
            return Node.DONE
        case "approve":
            return Node.EXECUTE if is_plan else Node.DONE
        case "revise":
            if budget_spent(digest):
                return Node.DONE
            return reviewed if is_plan else Node.REGENERATE


def review_point(state: ResearchDigest | Mapping[str, Any]) -> ReviewPoint:
    """What a run whose next node is `review` waits on: its `plan` or its `summary`."""
    digest = _as_digest(state)
    if next_node(digest) != Node.REVIEW:
        raise ValueError(f"the run is not due for review after {digest.node.value}")
    return "plan" if digest.node in PLAN_NODES else "summary"


def revise_refusal(state: ResearchDigest | Mapping[str, Any]) -> str | None:
    """Why the review now due cannot be answered `revise` (None when it can)."""
    digest = _as_digest(state)
    if digest.revision_count >= MAX_REVISIONS:
        return (
            f"this run was already revised {digest.revision_count} times, the most a run "
            "allows; approve or reject it"
        )
    if digest.max_cost_usd is not None and digest.cost_usd >= digest.max_cost_usd:
        return (
            f"the run's cost budget (max_cost_usd={digest.max_cost_usd}) is spent, so nothing "
            "can be written again; approve or reject it"
        )
    return None


DigestT = TypeVar("DigestT", bound=ResearchDigest)


def record_review(state: DigestT, decision: Verdict) -> DigestT:
    """`state` at `review`, with the decision taken on what the last node wrote (a runner calls
    this when `next_node` said `review`)."""
    if next_node(state) != Node.REVIEW:
        raise ValueError(f"the run is not due for review after {state.node.value}")
    return state.model_copy(
        update={"node": Node.REVIEW, "reviewed": state.node, "review_decision": decision}
    )


def end_reason(state: ResearchDigest | Mapping[str, Any]) -> EndReason:
    """Why a finished run ended: `rejected`, `grounded` (and every sub-question covered),
    `budget_exhausted`, `max_replans` or `max_regenerations`."""
    digest = _as_digest(state)
    if digest.node == Node.REVIEW and digest.review_decision == "reject":
        return "rejected"
    grounded = is_grounded(digest)
    if grounded and is_covered(digest):
        return "grounded"
    if budget_spent(digest):
        return "budget_exhausted"
    # Replans are spent after regenerations, so whenever replans were allowed they ran out last;
    # a grounded report with an uncovered sub-question could only have gone on by replanning.
    return "max_replans" if digest.max_replans > 0 or grounded else "max_regenerations"
