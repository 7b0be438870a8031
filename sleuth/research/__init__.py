"""The research graph: execute → causal inference → summarize → grounding eval → regenerate | replan.

One implementation of each node and one pure router, `next_node(state)`, serve two runners:
`await spec.execute({"prompt": ...})` runs the graph in-process, and `workflows.ResearchWorkflow`
runs every node as a Temporal activity that calls the very same node functions. Either way the
run ends with a `ResearchReport`.

The modules follow the graph: `router` (the `Node` enum, the digest it reads, `next_node`,
`end_reason`), `state`
(what a run knows), `nodes` (the node functions and their prompts), `report` (the typed report:
cite, deduplicate, order) and `spec` (`ResearchSpec`, the in-process runner).
"""

from sleuth.research.nodes import (
    CAUSAL_PROMPT,
    EXECUTE_PROMPT,
    NODE_PROMPTS,
    REGENERATE_PROMPT,
    REPLAN_PROMPT,
    SUMMARIZE_PROMPT,
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
from sleuth.research.router import (
    DONE,
    MAX_LOOPS,
    NODES,
    START,
    EndReason,
    Node,
    NodeName,
    ResearchDigest,
    end_reason,
    is_grounded,
    next_node,
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
    "REGENERATE_PROMPT",
    "REPLAN_PROMPT",
    "START",
    "SUMMARIZE_PROMPT",
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
    "regenerate_node",
    "replan_node",
    "report_text",
    "sources",
    "summarize_node",
]
