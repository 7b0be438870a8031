"""The research graph: execute → causal inference → summarize → grounding eval → regenerate | replan.

One implementation of each node and one pure router, `next_node(state)`, serve two runners:
`await spec.execute({"prompt": ...})` runs the graph in-process, and `workflows.ResearchWorkflow`
runs every node as a Temporal activity that calls the very same node functions. Either way the
run ends with a `ResearchReport`.

The modules follow the graph: `router` (the `Node` enum, the digest it reads, `next_node`,
`end_reason`, `record_review`), `state`
(what a run knows), `nodes` (the node functions and their prompts), `report` (the typed report:
cite, deduplicate, order), `review` (what a reviewer is shown) and `spec` (`ResearchSpec`, the
in-process runner).
"""

from sleuth.research.nodes import (
    CAUSAL_PROMPT,
    EXECUTE_PROMPT,
    NODE_PROMPTS,
    REGENERATE_PROMPT,
    REPLAN_PROMPT,
    SUMMARIZE_PROMPT,
    BudgetSpent,
    CheckpointHook,
    causal_inference_node,
    execute_node,
    execute_prompt,
    grounded_text,
    grounding_eval_node,
    node_of_request,
    regenerate_node,
    replan_node,
    report_text,
    summarize_node,
)
from sleuth.research.report import (
    EvidenceRecord,
    ResearchReport,
    TokenUsage,
    build_final_state,
    cite,
    dedupe_findings,
    finish,
    normalise,
    sources,
)
from sleuth.research.review import pending_review, review_subject
from sleuth.research.router import (
    DONE,
    MAX_LOOPS,
    NODES,
    PLAN_NODES,
    REVIEW,
    START,
    EndReason,
    Node,
    NodeName,
    ResearchDigest,
    budget_spent,
    end_reason,
    is_grounded,
    next_node,
    record_review,
    review_point,
    revise_refusal,
)
from sleuth.research.spec import (
    MAX_PROMPT_CHARS,
    DatastoreSource,
    ResearchInputs,
    ResearchResult,
    ResearchSpec,
    create_research_workflow,
)
from sleuth.research.state import Citation, ClaimRecord, Record, ResearchState

__all__ = [
    "CAUSAL_PROMPT",
    "DONE",
    "EXECUTE_PROMPT",
    "MAX_LOOPS",
    "MAX_PROMPT_CHARS",
    "NODES",
    "NODE_PROMPTS",
    "PLAN_NODES",
    "REGENERATE_PROMPT",
    "REPLAN_PROMPT",
    "REVIEW",
    "START",
    "SUMMARIZE_PROMPT",
    "BudgetSpent",
    "CheckpointHook",
    "Citation",
    "ClaimRecord",
    "DatastoreSource",
    "EndReason",
    "EvidenceRecord",
    "Node",
    "NodeName",
    "Record",
    "ResearchDigest",
    "ResearchInputs",
    "ResearchReport",
    "ResearchResult",
    "ResearchSpec",
    "ResearchState",
    "TokenUsage",
    "budget_spent",
    "build_final_state",
    "causal_inference_node",
    "cite",
    "create_research_workflow",
    "dedupe_findings",
    "end_reason",
    "execute_node",
    "execute_prompt",
    "finish",
    "grounded_text",
    "grounding_eval_node",
    "is_grounded",
    "next_node",
    "node_of_request",
    "normalise",
    "pending_review",
    "record_review",
    "regenerate_node",
    "replan_node",
    "report_text",
    "review_point",
    "review_subject",
    "revise_refusal",
    "sources",
    "summarize_node",
]
