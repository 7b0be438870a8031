"""Agent steps as activities: one model turn, one tool call, or one subagent dispatch each.

Every step builds the agent fresh from the App's factory, loads the `LoopState` by reference
(layers such as files and todos restored from it), advances it with `Agent.step`, and stores the
new state. Each step keeps a checkpoint journal (`sleuth.activities.checkpoints`): its result is durable
before the activity returns, and a subagent's loop is durable after each of its model turns and
tool calls. A retried step that finds its result returns it without running the step again (the
worker died after the tool call but before the server heard of it); one that finds a subagent's
loop resumes it. So a tool call that returned never runs twice, in the parent or in a subagent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity

from sleuth._util.text import preview
from sleuth.activities.agent_models import (
    AgentOutcome,
    ApprovalRequest,
    NextStep,
    StepInput,
    StepKind,
    StepOutput,
    TodoView,
)
from sleuth.activities.checkpoints import Journal
from sleuth.activities.errors import ConfigError, mapped_errors
from sleuth.activities.events import streams_events
from sleuth.activities.heartbeat import journaled
from sleuth.activities.metrics import record_tool_errors
from sleuth.agent import Agent
from sleuth.agent.state import LoopState
from sleuth.apps.app import App
from sleuth.deepagent.subagents import SubagentTool
from sleuth.deepagent.todos import TodoState
from sleuth.flows.review import approval_id
from sleuth.runtime.artifacts import (
    ArtifactNotFoundError,
    ArtifactStore,
    default_artifact_store,
    get_json,
    put_json,
)
from sleuth.runtime.log import get_logger
from sleuth.tools import Tool, ToolResult
from sleuth.tools.mcp import McpTool

log = get_logger(__name__)


def next_step(agent: Agent, state: LoopState) -> NextStep:
    """What `agent.step(state)` will do next, described for the workflow and the Web UI."""
    if state.finished:
        return NextStep(kind="done", summary=f"finished: {state.stop_reason}")
    call = agent.next_tool_call(state)
    if call is None and state.reflexion_due:
        return NextStep(kind="model", summary=f"{agent.name}: reflexion on step {state.iterations}")
    if call is None:
        return NextStep(kind="model", summary=f"{agent.name}: model turn {state.iterations + 1}")
    approval = None
    if agent.needs_approval(call) and call.id not in state.approvals:
        assert agent.approval is not None
        approval = ApprovalRequest(
            review_id=approval_id(call),
            subject=agent.approval_subject(call),
            timeout_seconds=agent.approval.timeout_seconds,
            on_timeout=agent.approval.on_timeout,
        )
    if isinstance(agent.tools.get(call.name), SubagentTool):
        subagent = str(call.arguments.get("subagent_type", "?"))
        task = str(call.arguments.get("description", ""))
        return NextStep(
            kind="subagent",
            call_id=call.id,
            summary=preview(f"subagent {subagent}: {task}"),
            approval=approval,
        )
    selected = agent.tools.get(call.name)
    if isinstance(selected, McpTool):
        return NextStep(
            kind="mcp",
            call_id=call.id,
            summary=preview(selected.summary(call.arguments)),
            approval=approval,
        )
    arguments = json.dumps(call.arguments, ensure_ascii=False, default=str)
    return NextStep(
        kind="tool",
        call_id=call.id,
        summary=preview(f"tool {call.name} {arguments}"),
        approval=approval,
    )


class McpCallStarted(BaseModel):
    """Journal entry saved before an MCP call leaves the worker."""

    call_id: str


async def _guard_mcp_call(journal: Journal, agent: Agent, state: LoopState, step: NextStep) -> None:
    """Before an MCP call: if an earlier attempt of this step sent it and died (worker killed,
    server crashed) and the tool is not idempotent, answer the model with a tool error instead
    of sending it again; otherwise note in the journal that the call is about to be sent."""
    call = agent.next_tool_call(state)
    selected = agent.tools.get(call.name) if call else None
    if call is None or not isinstance(selected, McpTool):
        return
    started = journal.get(MCP_CALL_STARTED, McpCallStarted)
    if started is not None and started.call_id == call.id and not selected.idempotent:
        lost = selected.lost_result("its worker or server stopped during the call")
        agent.tools[call.name] = _Answer(selected, lost)
        log.warning("mcp.call.not_retried", tool=call.name, call_id=call.id, step=step.summary)
        return
    await journal.save(**{MCP_CALL_STARTED: McpCallStarted(call_id=call.id)})


MCP_CALL_STARTED = "mcp_call_started"


class _Answer(Tool):
    """A tool that answers one fixed result (a cut-off call that must not be sent again)."""

    def __init__(self, tool: Tool, result: ToolResult):
        super().__init__(tool.func, name=tool.name, description=tool.description)
        self.parameters = tool.parameters
        self._result = result

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(arguments)

    async def invoke(self, arguments: dict[str, Any], account: Any = None) -> ToolResult:
        return self._result


def _todos(agent: Agent) -> list[TodoView] | None:
    layer = next((x for x in agent.layers.values() if isinstance(x, TodoState)), None)
    if layer is None:
        return None
    return [TodoView(content=t.content, status=t.status) for t in layer.snapshot()]


class AgentActivities:
    """The three step activities of `AgentWorkflow`, bound to the App whose agents they run."""

    def __init__(self, app: App, store: ArtifactStore | None = None):
        self.app = app
        self._store = store

    @property
    def store(self) -> ArtifactStore:
        return self._store or default_artifact_store()

    def all(self) -> list[Callable[..., Any]]:
        return [self.model_turn, self.tool, self.subagent, self.mcp_tool]

    @activity.defn(name="agent.model_turn")
    @mapped_errors
    @streams_events
    async def model_turn(self, request: StepInput) -> StepOutput:
        """One model request (and the grounding judge or a summary when they are due)."""
        return await self._step(request, "model")

    @activity.defn(name="agent.tool")
    @mapped_errors
    @streams_events
    async def tool(self, request: StepInput) -> StepOutput:
        """One tool call of the agent."""
        return await self._step(request, "tool")

    @activity.defn(name="agent.mcp_tool")
    @mapped_errors
    @streams_events
    async def mcp_tool(self, request: StepInput) -> StepOutput:
        """One call of an MCP server's tool, over this worker's connection to the server."""
        return await self._step(request, "mcp")

    @activity.defn(name="agent.subagent")
    @mapped_errors
    @streams_events
    async def subagent(self, request: StepInput) -> StepOutput:
        """One `task` dispatch: a whole child agent run, whose answer and tokens go to the parent."""
        return await self._step(request, "subagent")

    async def _step(self, request: StepInput, kind: StepKind) -> StepOutput:
        agent = self.app.new_agent(request.agent)
        if not isinstance(agent, Agent):
            raise ConfigError(
                f"agent {request.agent!r} built a {type(agent).__name__}, not a sleuth.Agent; "
                "register a factory returning create_deepagent(...) or Agent(...)"
            )
        if request.mcp_servers is not None:
            self._keep_mcp_servers(agent, request.mcp_servers)
        state = await self._load(agent, request)
        if request.approval is not None and request.call_id:
            state.approvals[request.call_id] = request.approval
        planned = next_step(agent, state)
        if planned.kind != kind or (request.call_id and planned.call_id != request.call_id):
            raise ConfigError(
                f"agent {request.agent!r}: the workflow asked for a {kind} step "
                f"({request.call_id or 'no call'}) but the saved state wants {planned.kind} "
                f"({planned.call_id or 'no call'}); did the agent's factory change mid-run?"
            )
        async with journaled(self.store) as journal:
            finished = await self._finished_step(journal, agent)
            if finished is not None:
                state_ref, state = finished
            else:
                if kind == "mcp":
                    await _guard_mcp_call(journal, agent, state, planned)
                evidence_before = len(state.evidence)
                await agent.step(state)
                record_tool_errors(state.evidence[evidence_before:])
                agent.capture_layers(state)
                state_ref = await asyncio.to_thread(put_json, self.store, state)
                await journal.finish(state_ref)
        outcome = None
        if state.finished:
            result = await agent.finish(state)
            outcome = AgentOutcome(
                agent=request.agent,
                message=result.message,
                structured_output=state.structured_output,
                stop_reason=result.stop_reason,
                iterations=result.iterations,
                usage=result.usage,
                grounding_score=result.grounding.score if result.grounding else None,
                todos=_todos(agent),
                state_ref=state_ref,
            )
            log.info(
                "agent.finished",
                agent=request.agent,
                stop_reason=result.stop_reason,
                iterations=result.iterations,
            )
        return StepOutput(
            state_ref=state_ref,
            next=next_step(agent, state),
            iterations=state.iterations,
            usage=state.usage,
            tool_calls=len(state.evidence),
            subagent_calls=sum(
                1 for e in state.evidence if isinstance(agent.tools.get(e.tool), SubagentTool)
            ),
            todos=_todos(agent),
            outcome=outcome,
        )

    def _keep_mcp_servers(self, agent: Agent, names: list[str]) -> None:
        """Drop the MCP tools of the servers the run did not name (an unknown name fails it)."""
        for name in names:
            self.app.mcp.connection(name)
        for tool_name, selected in list(agent.tools.items()):
            if isinstance(selected, McpTool) and selected.server not in names:
                del agent.tools[tool_name]

    async def _finished_step(self, journal: Journal, agent: Agent) -> tuple[str, LoopState] | None:
        """The result an earlier attempt of this step saved, if it got that far and it reads."""
        if journal.result is None:
            return None
        try:
            state = LoopState.model_validate(
                await asyncio.to_thread(get_json, self.store, journal.result)
            )
        except (ArtifactNotFoundError, ValidationError) as exc:
            journal.warn(
                f"the step's saved result is unreadable ({exc}); the step runs again from its input"
            )
            return None
        agent.restore_layers(state)
        return journal.result, state

    async def _load(self, agent: Agent, request: StepInput) -> LoopState:
        if request.state_ref is None:
            if not request.prompt:
                raise ConfigError("the first step of an agent run needs a prompt")
            return agent.initial_state(request.prompt)
        raw = await asyncio.to_thread(get_json, self.store, request.state_ref)
        state = LoopState.model_validate(raw)
        agent.restore_layers(state)
        return state
