"""The state of one agent loop: what exit conditions read and what a checkpoint carries."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from sleuth.flows.review import ReviewRecord
from sleuth.models.base import Message, Usage


class EvidenceItem(BaseModel):
    """One tool call of a run: the trail that grounding judges claims against."""

    index: int
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    output: str = ""
    success: bool = True
    error: str | None = None
    iteration: int = 0
    call_id: str = ""


class LoopState(BaseModel):
    """Everything the tool loop knows. Serialisable, so a durable run can checkpoint and resume it."""

    messages: list[Message] = Field(default_factory=list)
    iterations: int = 0
    usage: Usage = Field(default_factory=Usage)
    evidence: list[EvidenceItem] = Field(default_factory=list)
    last_text: str = ""
    last_tool_names: list[str] = Field(default_factory=list)
    confidence: float | None = None
    structured_output: dict[str, Any] | None = None
    elapsed_seconds: float = 0.0
    loop_warnings: int = 0
    """Consecutive turns that repeated the previous turn's calls (a turn repeating nothing resets it)."""
    repair_attempts: int = 0
    """Repair turns taken: answers that did not fit the output schema, asked for again."""
    reflexion_due: bool = False
    """A tool step ended and `reflexion="model"` evaluates it before the next model turn."""
    reflexion_requests: int = 0
    """Self-evaluation requests made; their tokens are in `usage`."""
    nudges: int = 0
    plan: str = ""
    started_at: float = Field(default_factory=time.time)
    finished: bool = False
    stop_reason: str | None = None
    final_message: str = ""
    grounding: dict[str, Any] | None = None
    grounding_rounds: int = 0
    guardrail_retries: int = 0
    """New answers asked for because the last one broke an output guardrail."""
    """How often a poorly grounded answer was already sent back for more research."""
    layers: dict[str, Any] = Field(default_factory=dict)
    """State of capability layers (files, todos, ...) so a checkpoint carries it across restarts."""
    approvals: dict[str, ReviewRecord] = Field(default_factory=dict)
    """Decisions on tool calls that needed approval, by call id (see `sleuth.flows.review`)."""

    def successful_calls(self, tool_name: str) -> list[EvidenceItem]:
        return [e for e in self.evidence if e.tool == tool_name and e.success]
