"""The router: which node runs next, and why a finished run ended. Pure functions of the digest.

Both runners drive `next_node`: `ResearchSpec.execute` in-process and `workflows.ResearchWorkflow`
durably. The runner that calls it is the only place that decides a run is over; it then asks
`end_reason` why and hands that to the finish step, which writes the report.

`ResearchDigest`, all the router reads, is defined here with it; `ResearchState` extends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator


class Node(StrEnum):
    """A position in the research graph: `start`, one of the seven nodes, or `done`."""

    START = "start"
    PLAN = "plan"
    EXECUTE = "execute"
    CAUSAL_INFERENCE = "causal_inference"
    SUMMARIZE = "summarize"
    GROUNDING_EVAL = "grounding_eval"
    REGENERATE = "regenerate"
    REPLAN = "replan"
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
"""The nodes that run (everything but `start` and `done`), in graph order."""
DONE = Node.DONE
START = Node.START

EndReason = Literal["grounded", "max_replans", "max_regenerations"]
"""Why a run ended: its summary met the grounding threshold with every sub-question covered, or
the loops it may spend ran out."""

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
    sub_question_count: int = Field(default=0, ge=0)
    """The sub-questions the plan node wrote (0 before it ran, and in runs begun without it)."""
    pending_count: int = Field(default=0, ge=0)
    """Sub-questions the current execute round has still to research: execute runs again while
    any are left (the execute node drops them all once the round's budget is spent)."""
    next_sub_question: int = Field(default=0, ge=0)
    """The 1-based number of the sub-question the next execute step researches (0: none pending)."""
    uncovered_count: int = Field(default=0, ge=0)
    """Sub-questions no evidence passage answers yet: a reason to replan, like an ungrounded claim."""

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


def is_covered(state: ResearchDigest | Mapping[str, Any]) -> bool:
    """Whether evidence answers every sub-question of the plan (vacuously true without one)."""
    return _as_digest(state).uncovered_count == 0


def next_node(state: ResearchDigest | Mapping[str, Any]) -> Node:
    """The node to run after `state.node`, or `Node.DONE`. Pure: both runners route with it.

    Start → plan → execute, once per sub-question of the round (while `pending_count` > 0).
    After grounding eval: grounded (score ≥ threshold) and every sub-question covered → done;
    not grounded and regenerations left → regenerate; else replans left → replan (an uncovered
    sub-question needs new evidence, which only a replan's execute round gathers); else done.
    """
    digest = _as_digest(state)
    match digest.node:
        case Node.START:
            return Node.PLAN
        case Node.PLAN | Node.REPLAN:
            return Node.EXECUTE
        case Node.EXECUTE if digest.pending_count > 0:
            return Node.EXECUTE
        case Node.EXECUTE:
            return Node.CAUSAL_INFERENCE if digest.causal_inference else Node.SUMMARIZE
        case Node.CAUSAL_INFERENCE:
            return Node.SUMMARIZE
        case Node.SUMMARIZE | Node.REGENERATE:
            return Node.GROUNDING_EVAL
        case Node.GROUNDING_EVAL:
            grounded = is_grounded(digest)
            if grounded and is_covered(digest):
                return Node.DONE
            if not grounded and digest.regeneration_count < digest.max_regenerations:
                return Node.REGENERATE
            if digest.replan_count < digest.max_replans:
                return Node.REPLAN
            return Node.DONE
        case Node.DONE:
            return Node.DONE


def end_reason(state: ResearchDigest | Mapping[str, Any]) -> EndReason:
    """Why a finished run ended: `grounded` (and every sub-question covered), `max_replans` or
    `max_regenerations`."""
    digest = _as_digest(state)
    grounded = is_grounded(digest)
    if grounded and is_covered(digest):
        return "grounded"
    # Replans are spent after regenerations, so whenever replans were allowed they ran out last;
    # a grounded report with an uncovered sub-question could only have gone on by replanning.
    return "max_replans" if digest.max_replans > 0 or grounded else "max_regenerations"
