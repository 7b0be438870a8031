"""Wire payloads of `AgentWorkflow` and its step activities, and the step config model.

The agent's conversation, evidence and layer state (files, todos) live in the artifact store as a
`LoopState`; activities pass its reference and a small digest of what happens next.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from temporalio.contrib.workflow_streams import WorkflowStreamState

from sleuth._util.strict import StrictInput
from sleuth.activities.heartbeat import HEARTBEAT_SECONDS
from sleuth.activities.policy import ActivitySettings, RetrySettings, with_overrides
from sleuth.flows.review import ApprovalTimeoutAction, ReviewRecord, ReviewSubject
from sleuth.models.base import Usage
from sleuth.tools.mcp import check_server_names

StepKind = Literal["model", "tool", "subagent", "mcp"]


def _step_defaults() -> ActivitySettings:
    return ActivitySettings(heartbeat_seconds=HEARTBEAT_SECONDS)


def _mcp_defaults() -> ActivitySettings:
    # A call whose server died is retried only for idempotent tools (others come back to the
    # model as a tool error), so these attempts go to restarted servers and other workers.
    return ActivitySettings(
        start_to_close_seconds=600.0,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        retry=RetrySettings(
            initial_interval_seconds=1.0,
            backoff_coefficient=2.0,
            maximum_interval_seconds=30.0,
            maximum_attempts=5,
        ),
    )


def _subagent_defaults() -> ActivitySettings:
    return ActivitySettings(start_to_close_seconds=3600.0, heartbeat_seconds=HEARTBEAT_SECONDS)


class AgentStepConfig(StrictInput):
    """Timeouts and retry policy of each kind of `AgentWorkflow` step. Override per run with
    `AgentRequest.steps`, e.g. `{"subagent": {"heartbeat_seconds": 10}}`."""

    model: ActivitySettings = Field(default_factory=_step_defaults)
    """One model turn (plus the grounding judge or a summarisation call when they are due)."""
    tool: ActivitySettings = Field(default_factory=_step_defaults)
    """One tool call."""
    mcp: ActivitySettings = Field(default_factory=_mcp_defaults)
    """One call of an MCP server's tool (docs/mcp.md): 600 s per attempt (a call's own timeout
    is the server's `timeout_seconds`, 120 s by default), 20 s heartbeat, 5 attempts 1 s apart
    doubling up to 30 s."""
    subagent: ActivitySettings = Field(default_factory=_subagent_defaults)
    """One subagent dispatch: a whole child agent run, so it gets longer."""

    def for_kind(self, kind: str) -> ActivitySettings:
        settings: ActivitySettings = getattr(self, kind)
        return settings

    @classmethod
    def with_overrides(cls, overrides: dict[str, Any] | None) -> AgentStepConfig:
        """The defaults with `overrides` merged in field by field (unknown step kinds are an error)."""
        return with_overrides(cls, overrides, where="steps", noun="step kind", plural="kinds")


class ApprovalRequest(BaseModel):
    """A tool call that waits for a person before it runs (the agent's `ApprovalPolicy`)."""

    review_id: str
    """`tool-<call id>`: answer the `review` Update with this id."""
    subject: ReviewSubject
    timeout_seconds: float | None = None
    on_timeout: ApprovalTimeoutAction = "deny"


class NextStep(BaseModel):
    """What the agent does next."""

    kind: StepKind | Literal["done"]
    summary: str = ""
    """One line for the Web UI: which tool or subagent, with what."""
    call_id: str | None = None
    """The tool call a `tool` or `subagent` step runs."""
    approval: ApprovalRequest | None = None
    """Set when the call must be approved first: the workflow waits for the decision."""


class StepInput(BaseModel):
    """Input of every step activity."""

    agent: str
    """The registered agent."""
    kind: StepKind
    """The step the workflow expects; the activity refuses a state that wants another one."""
    state_ref: str | None = None
    """The artifact reference of the `LoopState`; None for the first model turn."""
    prompt: str | None = None
    """The task (first step only)."""
    call_id: str | None = None
    """The tool call to run (`tool` and `subagent` steps)."""
    approval: ReviewRecord | None = None
    """The decision on the call, when it needed approval (the workflow waited for it)."""
    mcp_servers: list[str] | None = None
    """`AgentRequest.mcp_servers`: the only MCP servers whose tools the agent keeps."""


class TodoView(BaseModel):
    content: str
    status: str


class AgentOutcome(BaseModel):
    """Output of `AgentWorkflow`."""

    agent: str
    message: str
    """The final message."""
    structured_output: dict[str, Any] | None = None
    """The submitted or parsed structured result, if any."""
    stop_reason: str
    iterations: int
    usage: Usage
    """Tokens of the whole run, subagents included."""
    grounding_score: float | None = None
    todos: list[TodoView] | None = None
    """The todo list at the end (agents with the todo layer)."""
    state_ref: str = ""
    """The artifact reference of the final `LoopState` (conversation, evidence, files)."""
    workflow_id: str = ""
    run_id: str = ""


class StepOutput(BaseModel):
    """Output of every step activity."""

    state_ref: str
    next: NextStep
    iterations: int
    usage: Usage
    tool_calls: int
    """Tool calls run so far (subagent dispatches included)."""
    subagent_calls: int
    todos: list[TodoView] | None = None
    outcome: AgentOutcome | None = None
    """Set when the run is finished."""


class AgentProgress(BaseModel):
    """What the `progress` query returns."""

    agent: str = ""
    status: str = "running"
    """`running`, `awaiting review` or `done`."""
    step: str = "model"
    """The kind of step running now."""
    step_summary: str = ""
    steps_run: int = Field(default=0, ge=0)
    iterations: int = Field(default=0, ge=0)
    tool_calls: int = Field(default=0, ge=0)
    subagent_calls: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)
    cost_usd: float = Field(default=0.0, ge=0.0)
    """USD spent so far at the models' prices."""
    todos: list[TodoView] | None = None
    stop_reason: str | None = None
    approvals: list[ReviewRecord] = Field(default_factory=list)
    """The tool calls decided by a person (or a timeout) so far."""


class AgentResume(StrictInput):
    """What a run carries over `continue_as_new`."""

    state_ref: str
    next: NextStep
    progress: AgentProgress
    stream: WorkflowStreamState | None = None
    """The event stream's offset and latest events."""


class AgentRequest(StrictInput):
    """Input of `AgentWorkflow`. Plain JSON: `{"agent": "analyst", "prompt": "…"}`."""

    agent: str
    """The name of an agent factory registered on the worker's App (`app.agent(name, factory)`)."""
    prompt: str
    """The task."""
    steps: dict[str, Any] | None = None
    """Per-kind overrides of `AgentStepConfig`, e.g. `{"subagent": {"heartbeat_seconds": 10}}`."""
    mcp_servers: list[str] | None = None
    """The MCP servers whose tools this run may use, by the names the worker configured
    (`app.mcp_server` or a YAML `type: mcp` tool); None: every one the agent has. Names only: an
    input can never give a server's command or URL."""
    resume: AgentResume | None = None
    """Set by the workflow itself when it continues as new; leave empty."""

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _names_only(cls, value: Any) -> Any:
        return None if value is None else check_server_names(value)
