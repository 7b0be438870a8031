"""Wire payloads of `DecomposeWorkflow` and its activities, and their timeout/retry config.

Only names and small texts cross the wire: the agent is named (`app.agent("deep", factory)`), the
ReAct loop's checkpoints go to a journal in the artifact store.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from sleuth._util.strict import StrictInput
from sleuth.activities.heartbeat import HEARTBEAT_SECONDS
from sleuth.activities.policy import ActivitySettings
from sleuth.flows.decompose import Budget, Spend, TaskNode
from sleuth.runtime.errors import InvalidSettingError

MAX_DEPTH = 10
"""Deepest decomposition an input may ask for: every level multiplies the child workflows."""
MAX_FAN_OUT = 64
"""Most subtasks of one task that run at once."""


def _react_defaults() -> ActivitySettings:
    return ActivitySettings(start_to_close_seconds=3600.0, heartbeat_seconds=HEARTBEAT_SECONDS)


class DecomposeConfig(StrictInput):
    """Timeouts and retry policy of the decomposition activities; override per run with
    `DecomposeInput.config` (subtasks inherit the root's)."""

    settings: ActivitySettings = Field(
        default_factory=lambda: ActivitySettings(start_to_close_seconds=60)
    )
    """Reading the agent's depth, fan-out and budget (no model call)."""
    decide: ActivitySettings = Field(
        default_factory=lambda: ActivitySettings(heartbeat_seconds=HEARTBEAT_SECONDS)
    )
    """The one decision model call of a task below max depth."""
    solve: ActivitySettings = Field(default_factory=_react_defaults)
    """A leaf's ReAct loop: long, so it checkpoints every step and a retry resumes from there."""
    synthesize: ActivitySettings = Field(default_factory=_react_defaults)
    """The synthesis ReAct loop over the digest (checkpoints like `solve`)."""


class DecomposeInput(StrictInput):
    """Start a decomposition: `{"agent": "deep-researcher", "task": "..."}`."""

    agent: str
    """The registered agent (a `DeepDecomposer`, e.g. `type: deep` in YAML, or a plain Agent)."""
    task: str
    max_depth: int | None = Field(default=None, ge=0, le=MAX_DEPTH)
    """Recursion limit, 0 to 10; None uses the agent's (default 3); 0 means 3."""
    budget: Budget | None = None
    """The whole tree's budget (every limit 0 or more); None uses the agent's."""
    config: DecomposeConfig | None = None
    depth: int = Field(default=0, ge=0, le=MAX_DEPTH)
    """Set by a parent for its subtasks: this task's depth."""
    allowance: Budget | None = None
    """Set by a parent for its subtasks: the share of the tree's budget this subtree may use."""
    max_fan_out: int | None = Field(default=None, ge=1, le=MAX_FAN_OUT)
    """Set by a parent for its subtasks: the agent's fan-out (1 to 64), so children need not
    look it up."""

    @field_validator("budget", "allowance")
    @classmethod
    def _limits_not_negative(cls, budget: Budget | None) -> Budget | None:
        if budget is not None:
            for name, limit in budget.model_dump().items():
                if limit is not None and limit < 0:
                    raise InvalidSettingError(
                        f"{name} must be 0 or more (or null for no limit), not {limit}"
                    )
        return budget


class DecomposeOutput(BaseModel):
    """The answer, whether the budget ran out, what the tree used, and the tree itself."""

    answer: str
    outcome: Literal["completed", "budget_exhausted"]
    spent: Spend
    tree: TaskNode


class AgentSettingsInput(BaseModel):
    agent: str


class AgentSettings(BaseModel):
    """What the workflow needs to know about the agent to plan the tree."""

    max_depth: int
    max_fan_out: int
    budget: Budget | None = None


class DecideInput(BaseModel):
    agent: str
    task: str
    allowance: Budget


class SolveInput(BaseModel):
    agent: str
    task: str
    allowance: Budget


class SubtaskResult(BaseModel):
    task: str
    result: str


class SynthesizeInput(BaseModel):
    agent: str
    task: str
    results: list[SubtaskResult]
    allowance: Budget
