"""`Agent`: the tool loop, with reflexion, per-turn grounding, loop detection and checkpoints.

One loop serves both runners: `run_sync` / `arun` in-process, and the durable execute activity,
which passes `checkpoint=` (a `LoopState` to resume) and `on_checkpoint=` (called after every
model turn and every tool call, so a retried attempt never redoes a completed tool call).

The loop's own messages (a schema repair, a submit nudge, a loop warning, ...) carry their
reason in `Message.kind`; the loop decides by that field, never by matching message text.
`limits=` (`sleuth.usage.limits.UsageLimits`) is checked before each model request and tool call.
`approval=` (`sleuth.flows.review.ApprovalPolicy`) makes calls of the tools it names wait for a person:
its callback in-process; durably `AgentWorkflow` records the decision in the state before the
step runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from sleuth._util.jsontext import json_from_text
from sleuth.agent.memory import AgentMemory, run_key
from sleuth.agent.policies import (
    SPEND_CAP,
    Governance,
    Guardrails,
    GuardrailViolation,
    ToolRetry,
)
from sleuth.agent.reflexion import (
    REFLEXION_MAX_OUTPUT_TOKENS,
    VERDICT_SCHEMA,
    parse_verdict,
    reflexion_messages,
    reflexion_mode,
    revision_message,
    rule_issues,
    rules_message,
)
from sleuth.agent.state import EvidenceItem, LoopState
from sleuth.agent.termination import Condition, MaxIterations
from sleuth.flows.review import (
    DENIED,
    ApprovalPolicy,
    ReviewRecord,
    ReviewSubject,
    approval_id,
    approval_subject,
    ask_approval,
)
from sleuth.grounding import GroundingReport, ground_claims, split_claims
from sleuth.grounding.judge import failure_reason
from sleuth.models import resolve
from sleuth.models.base import (
    Message,
    MessageKind,
    Model,
    ModelRequestParameters,
    ModelResponse,
    OutputSchema,
    ToolCall,
    Usage,
)
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.events import Event, capture_events, emit
from sleuth.runtime.telemetry import end_tool_span, model_request, tool_span
from sleuth.tools import Tool, ToolResult, as_tool
from sleuth.usage.limits import (
    BUDGET_EXHAUSTED,
    LimitsReached,
    UsageAccount,
    UsageLimitExceeded,
    UsageLimits,
    tool_calls_made,
    what_is_known,
)
from sleuth.usage.pricing import require_price

CheckpointHook = Callable[[LoopState], Awaitable[None] | None]
ContextManager = Callable[[list[Message], UsageAccount], Awaitable[list[Message]]]
"""Rewrites the conversation before a model request (e.g. condenses it); charges any model call
it makes to the run's `UsageAccount`."""


@runtime_checkable
class Layer(Protocol):
    """Per-run state a capability adds to an agent (files, todos): saved in every checkpoint."""

    def dump_state(self) -> dict[str, Any]:
        """The layer's state as plain JSON data."""
        ...

    def load_state(self, data: dict[str, Any]) -> None:
        """Replace the layer's state with what `dump_state()` returned earlier."""
        ...


@dataclass
class GroundingSettings:
    """Per-turn grounding: judge the final answer (and every submission) against the run's
    evidence with the claim-level judge (`sleuth.grounding.ground_claims`). An answer made with
    no evidence is not grounded: its claims are sent back for research, then dropped."""

    judge: Model | str | None = None
    """The judge model; `None` uses the agent's own model. Pass `False` to `Agent` to disable."""
    threshold: float = 0.65
    """Share of claims that must be grounded to accept the answer as is."""
    max_research_rounds: int = 1
    """How often a poorly grounded answer is sent back for more research before claims are dropped."""
    claim_threshold: float | None = None
    """The score a claim needs to count as grounded (None: the judge's calibrated threshold)."""

    def __post_init__(self) -> None:
        for name in ("threshold", "claim_threshold"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise InvalidSettingError(
                    f"GroundingSettings.{name} must be within 0..1, got {value}"
                )


@dataclass
class AgentResult:
    """What a run produced. The last item `Agent.run` yields, after the run's events."""

    event_type: ClassVar[str] = "agent.result"
    """So a loop over `agent.run(...)` can `match item.event_type` for the result too."""

    message: str
    parsed: Any
    stop_reason: str
    iterations: int
    usage: Usage
    evidence: list[EvidenceItem]
    state: LoopState
    grounding: GroundingReport | None = None
    events: list[str] = field(default_factory=list)

    @property
    def structured_output(self) -> Any:
        return self.parsed

    @property
    def repair_turns(self) -> int:
        """Turns spent asking again for an answer that did not fit the output schema."""
        return self.state.repair_attempts

    @property
    def reflexion_requests(self) -> int:
        """Self-evaluation requests made (`reflexion="model"`); their usage is in `usage`."""
        return self.state.reflexion_requests

    @property
    def final_message(self) -> str:
        return self.message

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]:
        """The result as plain data (what a scan row keeps of an agent run by default)."""
        structured = (
            self.parsed.model_dump(mode=mode) if isinstance(self.parsed, BaseModel) else self.parsed
        )
        return {
            "message": self.message,
            "structured_output": structured,
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "usage": self.usage.model_dump(mode=mode),
            "grounding_score": self.grounding.score if self.grounding else None,
        }


class Agent:
    """A model with tools, run in a loop until an exit condition holds."""

    def __init__(
        self,
        model: Model | str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        system_prompt: str = "",
        *,
        output_schema: type[BaseModel] | None = None,
        termination: Condition | None = None,
        max_iterations: int = 20,
        max_output_tokens: int | None = None,
        submit_tool: str | None = None,
        reflexion: bool | Literal["model", "rules"] = False,
        grounding: GroundingSettings | bool | None = None,
        loop_detection: bool = True,
        max_loop_warnings: int = 1,
        max_repair_attempts: int = 2,
        max_submit_nudges: int = 2,
        context_manager: ContextManager | None = None,
        limits: UsageLimits | None = None,
        approval: ApprovalPolicy | None = None,
        tool_retry: ToolRetry | None = None,
        guardrails: Guardrails | None = None,
        governance: Governance | None = None,
        memory: AgentMemory | None = None,
        name: str = "agent",
    ):
        self.model = resolve(model)
        self.tools: dict[str, Tool] = {}
        for item in tools:
            t = as_tool(item)
            if t.name in self.tools:
                raise InvalidSettingError(
                    f"two tools are named {t.name!r}; tool names must be unique"
                )
            self.tools[t.name] = t
        if submit_tool is not None and submit_tool not in self.tools:
            raise InvalidSettingError(
                f"submit_tool {submit_tool!r} is not among the tools: {', '.join(self.tools) or 'none'}"
            )
        unknown = [t for t in (approval.tools if approval else []) if t not in self.tools]
        if unknown:
            raise InvalidSettingError(
                f"the approval policy names {', '.join(map(repr, unknown))}, which the agent does "
                f"not have; its tools: {', '.join(self.tools) or 'none'}"
            )
        self.approval = approval
        """Tool calls that wait for a person's decision; see `sleuth.flows.review`."""
        self.system_prompt = system_prompt
        self.output_schema = output_schema
        self.max_iterations = max_iterations
        self.limits = limits
        """Checked before each model request and each tool call; see `sleuth.usage.limits`."""
        exits = [c for c in (termination, LimitsReached(limits) if limits else None) if c]
        self.termination: Condition = MaxIterations(max_iterations)
        for condition in reversed(exits):
            self.termination = condition | self.termination
        self.max_output_tokens = max_output_tokens
        self.submit_tool = submit_tool
        self.reflexion = reflexion_mode(reflexion, self.model)
        """None (off), "model" (a self-evaluation request after each step) or "rules"; see
        `sleuth.agent.reflexion`. `reflexion=True` picks by model family."""
        if grounding is True:
            grounding = GroundingSettings()
        self.grounding: GroundingSettings | None = grounding or None
        self.loop_detection = loop_detection
        self.max_loop_warnings = max_loop_warnings
        self.max_repair_attempts = max_repair_attempts
        self.max_submit_nudges = max_submit_nudges
        self.context_manager = context_manager
        self.tool_retry = tool_retry
        """Retries of a failed tool call, with backoff (`agent.tool.retry` events)."""
        self.guardrails = guardrails
        """Checks on the task and the answer (`agent.guardrail` events)."""
        self.governance = governance
        """A tool allow-list and token and USD caps per run (`agent.governance` events)."""
        self._spend_limits = governance.spend_limits() if governance is not None else None
        if self._spend_limits is not None:
            require_price(self.model)  # a USD cap cannot be kept at an unknown price
        self.memory = memory
        """What this agent id learned in earlier runs; recalled into the system prompt."""
        if governance is not None and governance.allowed_tools is not None:
            unknown = sorted(set(governance.allowed_tools) - set(self.tools))
            if unknown:
                raise InvalidSettingError(
                    f"governance.allowed_tools names {', '.join(unknown)}, which agent {name!r} "
                    f"does not have; its tools: {', '.join(self.tools) or 'none'}"
                )
        self.name = name
        self.layers: dict[str, Layer] = {}

    def add_layer(self, name: str, layer: Layer) -> None:
        """Register per-run state whose `dump_state()` travels in `LoopState.layers` (and checkpoints)."""
        if name in self.layers:
            raise InvalidSettingError(f"agent {self.name!r} already has a layer named {name!r}")
        self.layers[name] = layer

    def capture_layers(self, state: LoopState) -> None:
        """Copy every layer's `dump_state()` into `state.layers`."""
        for name, layer in self.layers.items():
            state.layers[name] = layer.dump_state()

    def restore_layers(self, state: LoopState) -> None:
        """Load the layers from `state.layers` (a checkpoint taken by this agent's factory)."""
        for name, layer in self.layers.items():
            if name in state.layers:
                layer.load_state(state.layers[name])

    # -- public API -------------------------------------------------------------------------

    async def run(self, prompt: str, **kwargs: Any) -> AsyncIterator[Event | AgentResult]:
        """Run the loop, yielding its events (`agent.*`, `deepagent.*`, ...) as they happen and
        finally the `AgentResult`. Takes `arun`'s keyword arguments.

        Use it from async code: `async for event in agent.run(task): ...`. The events also reach
        the subscribers of an enclosing `run_context()`. Leaving the loop early cancels the run.
        """
        with capture_events() as events:
            running = asyncio.create_task(self.arun(prompt, **kwargs))
        try:
            while True:
                next_event = asyncio.ensure_future(events.get())
                await asyncio.wait({next_event, running}, return_when=asyncio.FIRST_COMPLETED)
                if next_event.done():
                    yield next_event.result()
                    continue
                next_event.cancel()
                while not events.empty():
                    yield events.get_nowait()
                yield running.result()
                return
        finally:
            if not running.done():
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running

    def run_sync(self, prompt: str, **kwargs: Any) -> AgentResult:
        """Run to completion from synchronous code (on a helper thread if a loop is running)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(prompt, **kwargs))
        box: dict[str, Any] = {}
        # Threads start with an empty context: carry the caller's (its run_context) across.
        caller_context = contextvars.copy_context()

        def runner() -> None:
            try:
                box["result"] = caller_context.run(asyncio.run, self.arun(prompt, **kwargs))
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=runner, name=f"sleuth-{self.name}")
        thread.start()
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["result"]  # type: ignore[no-any-return]

    async def arun(
        self,
        prompt: str,
        *,
        checkpoint: LoopState | None = None,
        on_checkpoint: CheckpointHook | None = None,
    ) -> AgentResult:
        """Run the loop; resume from `checkpoint` when given."""
        state = checkpoint.model_copy(deep=True) if checkpoint else self._initial_state(prompt)
        if checkpoint is not None:
            self.restore_layers(state)
        while not state.finished:
            await self.step(state, on_checkpoint)
        return await self._finish(state)

    def initial_state(self, prompt: str) -> LoopState:
        """The state a run of `prompt` starts from (for runners that drive `step` themselves)."""
        state = self._initial_state(prompt)
        self.capture_layers(state)
        return state

    async def finish(self, state: LoopState) -> AgentResult:
        """The result of a finished `state`; publishes `agent.terminate`."""
        return await self._finish(state)

    def tool_specs(self) -> list[Any]:
        return [t.spec() for t in self.tools.values()]

    # -- the loop ---------------------------------------------------------------------------

    def _initial_state(self, prompt: str) -> LoopState:
        self._guard_input(prompt)
        messages = []
        system = self.system_prompt
        if self.memory is not None and self.memory.settings.enabled:
            recalled = self.memory.recall()
            system = f"{recalled}\n\n{system}" if recalled else system
        if self.output_schema is not None and self.submit_tool is None:
            system += (
                "\n\nWhen you have finished, answer with a single JSON object matching this schema:\n"
                + json.dumps(self.output_schema.model_json_schema())
            )
        if system.strip():
            messages.append(Message(role="system", content=system.strip()))
        messages.append(Message(role="user", content=prompt))
        return LoopState(messages=messages)

    async def _save(self, state: LoopState, hook: CheckpointHook | None) -> None:
        if hook is None:
            return
        self.capture_layers(state)
        outcome = hook(state)
        if inspect.isawaitable(outcome):
            await outcome

    async def step(self, state: LoopState, on_checkpoint: CheckpointHook | None = None) -> None:
        """Advance `state` by one unit: the next pending tool call, or else one model turn.

        `arun` is this in a loop. A durable runner calls it once per activity, so each model turn
        and each tool call (a subagent dispatch included) is its own retryable step. Call
        `restore_layers(state)` first when the agent was built fresh for a saved state.
        """
        if state.finished:
            return
        pending = _pending_tool_calls(state.messages)
        if pending:
            await self._run_tool_calls(state, pending[:1], on_checkpoint)
            if not state.finished and not _pending_tool_calls(state.messages):
                await self._after_tool_batch(state, on_checkpoint)
        elif state.reflexion_due:
            await self._reflect_by_model(state, on_checkpoint)
        else:
            await self._model_turn(state, on_checkpoint)

    def next_tool_call(self, state: LoopState) -> ToolCall | None:
        """The tool call `step` would run next, or None when the next step is a model turn."""
        if state.finished:
            return None
        pending = _pending_tool_calls(state.messages)
        return pending[0] if pending else None

    async def _after_tool_batch(self, state: LoopState, hook: CheckpointHook | None) -> None:
        if self.reflexion == "rules":
            self._reflect_by_rules(state)
        finished = self._check_exit(state)
        if self.reflexion == "model" and not finished:
            # Its own step (a model request), so a durable run checkpoints the tool call first.
            state.reflexion_due = True
        await self._save(state, hook)

    async def _model_turn(self, state: LoopState, hook: CheckpointHook | None) -> None:
        if self.context_manager is not None:
            state.messages = await self.context_manager(state.messages, UsageAccount(state))
        rule = self._spend_cap_reached(state)
        if rule is not None:
            limit = getattr(self.governance, rule)
            emit("agent.governance", agent=self.name, rule=rule, limit=limit)
            state.finished, state.stop_reason = True, SPEND_CAP
            state.final_message = what_is_known(state)
            await self._save(state, hook)
            return
        try:
            output_cap = self._output_cap(state)
        except UsageLimitExceeded:
            # What the run found so far is its answer; a request that cannot fit is not made.
            state.finished, state.stop_reason = True, BUDGET_EXHAUSTED
            state.final_message = what_is_known(state)
            await self._save(state, hook)
            return
        response = await self._request(state, output_cap)
        state.iterations += 1
        state.usage = state.usage + response.usage
        state.last_text = response.text
        state.last_tool_names = [c.name for c in response.tool_calls]
        emit(
            "agent.iteration",
            agent=self.name,
            iteration=state.iterations,
            tool_calls=state.last_tool_names,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
        )
        if response.tool_calls:
            state.messages.append(
                Message(role="assistant", content=response.text, tool_calls=response.tool_calls)
            )
            if not _previous_turn_keys(state.messages) & {
                _call_key(c) for c in response.tool_calls
            }:
                # A turn that repeats nothing ends a loop: a later loop gets its own warning.
                state.loop_warnings = 0
            await self._save(state, hook)
            return

        state.messages.append(Message(role="assistant", content=response.text))
        if not self._accept_final(state, response):
            self._check_exit(state)
            await self._save(state, hook)
            return
        if self.grounding is not None:
            report = await self._ground(state)
            # An answer with no checkable claims (e.g. "done") has nothing to send back for.
            if report.claims and report.score < self.grounding.threshold:
                if (
                    state.grounding_rounds < self.grounding.max_research_rounds
                    and not self._exit_now(state)
                ):
                    state.grounding_rounds += 1
                    state.messages.append(
                        Message(
                            role="user", content=_research_more(report), kind="grounding_feedback"
                        )
                    )
                    await self._save(state, hook)
                    return
                state.final_message = _drop_claims(
                    state.final_message, {c.claim for c in report.ungrounded}
                )
        if self._answer_refused(state):
            await self._save(state, hook)
            return
        self._check_exit(state)
        if not state.finished:
            state.finished, state.stop_reason = True, "completed"
        await self._save(state, hook)

    def _spend_cap_reached(
        self, state: LoopState, messages: list[Message] | None = None
    ) -> str | None:
        """The governance cap (`max_tokens_per_run`, `max_cost_usd_per_run`) the run has reached
        or its next request (of `messages`, default the conversation) would pass; None when the
        request fits."""
        governance = self.governance
        if governance is None:
            return None
        cap = governance.max_tokens_per_run
        if cap is not None and state.usage.total_tokens >= cap:
            return "max_tokens_per_run"
        if self._spend_limits is not None:
            try:
                self._spend_limits.check_before_request(
                    state.usage,
                    state.messages if messages is None else messages,
                    require_price(self.model),
                )
            except UsageLimitExceeded:
                return "max_cost_usd_per_run"
        return None

    def _output_cap(self, state: LoopState, messages: list[Message] | None = None) -> int | None:
        """The output tokens the next answer (to `messages`, default the conversation) may use;
        raises `UsageLimitExceeded` when the limits refuse the request."""
        caps = [self.max_output_tokens]
        sent = state.messages if messages is None else messages
        if self.limits is not None:
            price = require_price(self.model) if self.limits.max_cost_usd is not None else None
            caps.append(self.limits.check_before_request(state.usage, sent, price))
        if self._spend_limits is not None:
            price = require_price(self.model)
            caps.append(self._spend_limits.check_before_request(state.usage, sent, price))
        known = [cap for cap in caps if cap is not None]
        return min(known) if known else None

    async def _request(self, state: LoopState, max_output_tokens: int | None) -> ModelResponse:
        """One model turn. The output schema goes with the tools on every turn, so a provider
        with a strict mode holds the final answer to it (OpenAI json_schema, Anthropic's output
        format or output tool, llama.cpp's grammar); only a repair turn drops the tools. (Only
        the turn answering a repair prompt is one: a later turn, research asked for by
        grounding, gets the tools back)."""
        schema = None
        if self.output_schema is not None and self.submit_tool is None:
            schema = OutputSchema(
                name=self.output_schema.__name__, json_schema=self.output_schema.model_json_schema()
            )
        repairing = schema is not None and state.messages[-1].kind == "repair"
        parameters = ModelRequestParameters(
            tools=self.tool_specs() if self.tools and not repairing else [],
            output_schema=schema,
            max_output_tokens=max_output_tokens,
        )
        return await model_request(self.model, state.messages, parameters)

    def _exit_now(self, state: LoopState) -> bool:
        stop, _ = self.termination.check(state)
        return stop

    def _check_exit(self, state: LoopState) -> bool:
        if state.finished:
            return True
        stop, reason = self.termination.check(state)
        if stop:
            state.finished, state.stop_reason = True, reason
            if not state.final_message:
                state.final_message = state.last_text
        return stop

    async def _run_tool_calls(
        self, state: LoopState, calls: list[ToolCall], hook: CheckpointHook | None
    ) -> None:
        previous_keys = _previous_turn_keys(state.messages)
        for call in calls:
            key = _call_key(call)
            if self.loop_detection and key in previous_keys:
                # Count looping turns, not calls: a repeated batch of parallel calls is one loop.
                if not _warned_this_turn(state.messages):
                    state.loop_warnings += 1
                emit(
                    "agent.loop_detected",
                    agent=self.name,
                    tool=call.name,
                    arguments=_event_arguments(call.arguments),
                    warnings=state.loop_warnings,
                )
                if state.loop_warnings > self.max_loop_warnings:
                    state.messages.append(
                        _tool_message(
                            call, "Stopped: the same call was repeated again.", kind="loop_stop"
                        )
                    )
                    state.finished, state.stop_reason = True, "loop"
                    state.final_message = state.final_message or state.last_text
                    await self._save(state, hook)
                    return
                state.messages.append(
                    _tool_message(
                        call,
                        f"Loop detected: you called {call.name} with exactly these arguments in the "
                        "previous step. Repeating it will not give new information. Change course: "
                        "use different arguments, another tool, or give your answer.",
                        kind="loop_warning",
                    )
                )
                await self._save(state, hook)
                continue
            rejection: ToolResult | None = None
            if call.name == self.submit_tool and self.grounding is not None:
                rejection, call = await self._ground_submission(state, call)
            result = rejection or await self._invoke(call, state)
            item = EvidenceItem(
                index=len(state.evidence) + 1,
                tool=call.name,
                arguments=_event_arguments(call.arguments),
                output=result.content,
                success=result.ok,
                error=result.error,
                iteration=state.iterations,
                call_id=call.id,
            )
            state.evidence.append(item)
            if result.ok and call.name == self.submit_tool:
                self._record_submission(state, call)
            emit(
                "agent.tool.called",
                agent=self.name,
                tool=call.name,
                arguments=_event_arguments(call.arguments),
                success=result.ok,
                output_preview=result.content[:200],
            )
            state.messages.append(
                _tool_message(call, result.content, kind=_SIGNALS.get(result.error or ""))
            )
            await self._save(state, hook)

    async def _invoke(self, call: ToolCall, state: LoopState) -> ToolResult:
        allowed = self.governance.allowed_tools if self.governance else None
        if allowed is not None and call.name not in allowed:
            emit("agent.governance", agent=self.name, rule="allowed_tools", tool=call.name)
            return ToolResult(
                ok=False,
                content=f"Not allowed: this run may only call {', '.join(allowed) or 'no tools'}.",
                error=NOT_ALLOWED,
            )
        result = await self._invoke_once(call, state)
        retry = self.tool_retry
        attempt = 1
        while retry is not None and _retryable(result) and attempt < retry.max_attempts:
            delay = retry.delay(attempt)
            emit(
                "agent.tool.retry",
                agent=self.name,
                tool=call.name,
                attempt=attempt + 1,
                max_attempts=retry.max_attempts,
                error=result.error,
                delay_seconds=delay,
            )
            await asyncio.sleep(delay)
            attempt += 1
            result = await self._invoke_once(call, state)
        return result

    async def _invoke_once(self, call: ToolCall, state: LoopState) -> ToolResult:
        selected = self.tools.get(call.name)
        if selected is None:
            return ToolResult(
                ok=False,
                content=f"Unknown tool {call.name!r}. Available tools: {', '.join(self.tools) or 'none'}.",
                error="unknown_tool",
            )
        if self.limits is not None:
            try:
                self.limits.check_before_tool_call(tool_calls_made(state))
            except UsageLimitExceeded as refused:
                return ToolResult(
                    ok=False,
                    content=f"Not run: {refused}. Answer now with what you know.",
                    error=BUDGET_EXHAUSTED,
                )
        if self.needs_approval(call):
            record = await self._approve(call, state)
            if record.decision != "approve":
                why = f" ({record.remark})" if record.remark else ""
                return ToolResult(
                    ok=False,
                    content=f"Not run: a reviewer denied this call{why}. Go on without it: use "
                    "another way, or answer with what you know.",
                    error=DENIED,
                )
        with tool_span(call.name, self.name) as span:
            result = await selected.invoke(call.arguments, UsageAccount(state))
            end_tool_span(span, success=result.ok, error=result.error)
        return result

    # -- tool approval ----------------------------------------------------------------------

    def needs_approval(self, call: ToolCall) -> bool:
        """Whether `call` must be approved before it runs (its tool is in the approval policy)."""
        return self.approval is not None and self.approval.covers(call.name)

    def approval_subject(self, call: ToolCall) -> ReviewSubject:
        """What a reviewer is shown for `call`: one line, and the details (tool, arguments)."""
        return approval_subject(self.name, call)

    async def _approve(self, call: ToolCall, state: LoopState) -> ReviewRecord:
        """The decision on `call`: the one recorded in the state (a durable runner records it
        before the step), else the policy's callback's, recorded for the checkpoint."""
        recorded = state.approvals.get(call.id)
        if recorded is not None:
            return recorded
        assert self.approval is not None
        emit(
            "agent.approval.awaiting",
            agent=self.name,
            tool=call.name,
            review_id=approval_id(call),
        )
        record = await ask_approval(self.approval, self.name, call)
        state.approvals[call.id] = record
        emit(
            "agent.approval",
            agent=self.name,
            tool=call.name,
            decision=record.decision,
            timed_out=record.timed_out,
        )
        return record

    async def _ground_submission(
        self, state: LoopState, call: ToolCall
    ) -> tuple[ToolResult | None, ToolCall]:
        """Judge a submission's claims against the evidence before the submit tool runs.

        Below the threshold, while research rounds are left, the submission is rejected (the
        model sees which claims lack evidence) and the tool does not run; once the rounds are
        used up the tool gets the submission with its ungrounded claims removed. Returns the
        rejection, if any, and the call to make.
        """
        assert self.grounding is not None
        submit = self.tools.get(call.name)
        claims = [c for text in _string_leaves(call.arguments) for c in split_claims(text)]
        if submit is None or not claims:
            return None, call
        try:
            submit.validate(call.arguments)
        except ValidationError:
            return None, call  # the tool itself reports what is wrong with the arguments
        # A submission made with no evidence is judged too: none of its claims is grounded.
        report = await self._judge(state, claims, submission=True)
        if report.score >= self.grounding.threshold:
            return None, call
        if state.grounding_rounds < self.grounding.max_research_rounds:
            state.grounding_rounds += 1
            rejection = ToolResult(
                ok=False,
                content="Submission rejected. " + _research_more(report),
                error="ungrounded_submission",
            )
            return rejection, call
        ungrounded = {c.claim for c in report.ungrounded}
        return None, call.model_copy(update={"arguments": _drop_claims(call.arguments, ungrounded)})

    def _record_submission(self, state: LoopState, call: ToolCall) -> None:
        arguments = call.arguments
        if len(arguments) == 1 and isinstance(next(iter(arguments.values())), dict):
            arguments = next(iter(arguments.values()))
        state.structured_output = dict(arguments)
        confidence = _find_confidence(call.arguments)
        if confidence is not None:
            state.confidence = confidence
        state.final_message = json.dumps(arguments, ensure_ascii=False, default=str)

    def _accept_final(self, state: LoopState, response: ModelResponse) -> bool:
        """Validate a text answer; on failure, queue a repair or a submit nudge and return False."""
        state.final_message = response.text
        if self.submit_tool is not None and not state.successful_calls(self.submit_tool):
            if state.nudges < self.max_submit_nudges:
                state.nudges += 1
                state.messages.append(
                    Message(
                        role="user",
                        content=f"You have not finished: call the `{self.submit_tool}` tool with your result "
                        "to submit it. If it was rejected, fix what it said and call it again.",
                        kind="submit_nudge",
                    )
                )
                return False
            return True
        if self.output_schema is None or self.submit_tool is not None:
            return True
        data = (
            response.structured
            if response.structured is not None
            else json_from_text(response.text, "object")
        )
        try:
            if data is None:
                raise ValueError("the answer contained no JSON object")
            parsed = self.output_schema.model_validate(data)
        except (ValidationError, ValueError) as exc:
            if state.repair_attempts < self.max_repair_attempts:
                state.repair_attempts += 1
                emit(
                    "agent.repair",
                    agent=self.name,
                    attempt=state.repair_attempts,
                    output_mode=response.output_mode,
                    error=str(exc)[:300],
                )
                state.messages.append(
                    Message(
                        role="user",
                        content=f"Your answer does not match the required schema: {exc}. Reply "
                        "with only a JSON object matching: "
                        f"{json.dumps(self.output_schema.model_json_schema())}",
                        kind="repair",
                    )
                )
                return False
            state.stop_reason = "invalid_output"
            state.finished = True
            return True
        state.structured_output = parsed.model_dump(mode="json")
        confidence = state.structured_output.get("confidence")
        if isinstance(confidence, int | float):
            state.confidence = float(confidence)
        return True

    async def _ground(self, state: LoopState) -> GroundingReport:
        return await self._judge(state, split_claims(state.final_message), submission=False)

    async def _judge(
        self, state: LoopState, claims: list[str], *, submission: bool
    ) -> GroundingReport:
        """Judge `claims` against the run's evidence (earlier submissions are not evidence),
        record the report in the state and publish `agent.grounding`."""
        assert self.grounding is not None
        judge_model = (
            resolve(self.grounding.judge) if self.grounding.judge is not None else self.model
        )
        evidence = [e for e in state.evidence if e.tool != self.submit_tool]
        report = await ground_claims(
            claims, evidence, judge_model, threshold=self.grounding.claim_threshold
        )
        state.grounding = report.model_dump()
        emit(
            "agent.grounding",
            agent=self.name,
            score=report.score,
            claims=len(report.claims),
            ungrounded=[c.claim for c in report.ungrounded],
            method=report.method,
            claim_threshold=report.threshold,
            evidence=len(evidence),
            **({"submission": True} if submission else {}),
        )
        return report

    def _guard_input(self, prompt: str) -> None:
        guard = self.guardrails.input if self.guardrails else None
        violations = guard.violations(prompt) if guard else []
        if violations:
            emit("agent.guardrail", agent=self.name, stage="input", violations=violations)
            raise GuardrailViolation(
                f"agent {self.name!r} refused the task: it {'; it '.join(violations)}. Change the "
                "task, or the agent's input guardrails"
            )

    def _answer_refused(self, state: LoopState) -> bool:
        """Check the answer against the output guardrails. A refused answer raises
        `GuardrailViolation`, or (`on_violation: retry`) queues feedback and returns True."""
        guardrails = self.guardrails
        guard = guardrails.output if guardrails else None
        violations = guard.violations(state.final_message) if guard else []
        if not violations:
            return False
        assert guardrails is not None
        retrying = (
            guardrails.on_violation == "retry" and state.guardrail_retries < guardrails.max_retries
        )
        emit(
            "agent.guardrail",
            agent=self.name,
            stage="output",
            violations=violations,
            action="retry" if retrying else "fail",
        )
        if not retrying:
            raise GuardrailViolation(
                f"agent {self.name!r} gave an answer its output guardrails refuse: it "
                f"{'; it '.join(violations)}"
            )
        state.guardrail_retries += 1
        state.messages.append(
            Message(
                role="user",
                content="Your answer was refused: it "
                + "; it ".join(violations)
                + ". Give your answer again without that.",
                kind="guardrail_feedback",
            )
        )
        return True

    def _reflect_by_rules(self, state: LoopState) -> None:
        issues = rule_issues(state)
        emit(
            "agent.reflexion",
            agent=self.name,
            iteration=state.iterations,
            mode="rules",
            verdict="revise" if issues else "on_track",
            issues=issues,
        )
        if issues:
            state.plan = "; ".join(issues)
            state.messages.append(rules_message(issues))

    async def _reflect_by_model(self, state: LoopState, hook: CheckpointHook | None) -> None:
        """Ask the model whether the last step helped and the plan holds; rewrite the plan when
        not. Its tokens and cost count in the run's usage; a request the limits refuse is not
        made (the next model turn then ends the run as the limits say)."""
        state.reflexion_due = False
        messages = reflexion_messages(state)
        cap = None
        try:
            cap = self._output_cap(state, messages)
            refused = self._spend_cap_reached(state, messages) is not None
        except UsageLimitExceeded:
            refused = True
        if refused:
            emit(
                "agent.reflexion",
                agent=self.name,
                iteration=state.iterations,
                mode="model",
                verdict="skipped",
                issues=["the run's limits leave no room for a self-evaluation"],
            )
            await self._save(state, hook)
            return
        parameters = ModelRequestParameters(
            output_schema=VERDICT_SCHEMA,
            max_output_tokens=min(REFLEXION_MAX_OUTPUT_TOKENS, cap or REFLEXION_MAX_OUTPUT_TOKENS),
        )
        response = await model_request(self.model, messages, parameters)
        state.usage = state.usage + response.usage
        state.reflexion_requests += 1
        verdict = parse_verdict(response)
        if verdict is None:
            # An answer without a verdict: judge the step by rule instead.
            issues = rule_issues(state)
            outcome = "revise" if issues else "unreadable"
            if issues:
                state.plan = "; ".join(issues)
                state.messages.append(rules_message(issues))
        else:
            issues = [] if verdict.on_track else [verdict.reason or "the step did not help"]
            outcome = "on_track" if verdict.on_track else "revise"
            if verdict.plan.strip() and (not verdict.on_track or not state.plan):
                state.plan = verdict.plan.strip()
            if not verdict.on_track:
                state.messages.append(revision_message(verdict))
        emit(
            "agent.reflexion",
            agent=self.name,
            iteration=state.iterations,
            mode="model",
            verdict=outcome,
            issues=issues,
            plan=state.plan,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
        )
        self._check_exit(state)
        await self._save(state, hook)

    async def _finish(self, state: LoopState) -> AgentResult:
        self.capture_layers(state)
        parsed: Any = state.structured_output
        if parsed is not None and self.output_schema is not None:
            try:
                parsed = self.output_schema.model_validate(parsed)
            except ValidationError:
                parsed = state.structured_output
        if state.stop_reason == "invalid_output":
            parsed = None
        emit(
            "agent.terminate",
            agent=self.name,
            stop_reason=state.stop_reason,
            iterations=state.iterations,
            final_message_preview=state.final_message[:200],
            total_tokens=state.usage.total_tokens,
        )
        if self.memory is not None and self.memory.settings.enabled and state.final_message:
            task = next((m.content for m in state.messages if m.role == "user"), "")
            await self.memory.aremember(
                task, state.final_message, run_key=run_key(task, state.final_message)
            )
        grounding = GroundingReport.model_validate(state.grounding) if state.grounding else None
        return AgentResult(
            message=state.final_message,
            parsed=parsed,
            stop_reason=state.stop_reason or "completed",
            iterations=state.iterations,
            usage=state.usage,
            evidence=list(state.evidence),
            state=state,
            grounding=grounding,
        )


NOT_ALLOWED = "not_allowed"
"""The error of a tool call governance refused."""
EVENT_ARGUMENT_CHARS = 500
"""Longest tool-call argument an event carries as it is; longer ones are cut to a preview."""
_NOT_RETRIED = {"invalid_arguments", "unknown_tool", BUDGET_EXHAUSTED, NOT_ALLOWED}


def _retryable(result: ToolResult) -> bool:
    """Whether `tool_retry` may try a failed call again: the tool raised (the same arguments
    may work next time), as opposed to a call the loop itself refused or bad arguments."""
    return not result.ok and result.error not in _NOT_RETRIED


_SIGNALS: dict[str, MessageKind] = {
    BUDGET_EXHAUSTED: "limit_refusal",
    "ungrounded_submission": "grounding_feedback",
    DENIED: "approval_denied",
}
"""The kind of the tool message answering a call the loop itself turned down, by its error."""


def _tool_message(call: ToolCall, content: str, kind: MessageKind | None = None) -> Message:
    return Message(role="tool", content=content, tool_call_id=call.id, name=call.name, kind=kind)


def _event_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments for an event: each value cut to a preview, so a 1 MB `write_file`
    does not travel to every event listener (and into a durable run's event stream)."""
    shown: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, str):
            shown[name] = value if len(value) <= EVENT_ARGUMENT_CHARS else _preview_text(value)
        elif isinstance(value, bool | int | float) or value is None:
            shown[name] = value
        else:
            text = json.dumps(value, ensure_ascii=False, default=str)
            shown[name] = value if len(text) <= EVENT_ARGUMENT_CHARS else _preview_text(text)
    return shown


def _preview_text(text: str) -> str:
    return text[: EVENT_ARGUMENT_CHARS - 1] + f"… ({len(text):,} characters)"


def _call_key(call: ToolCall) -> str:
    return call.name + ":" + json.dumps(call.arguments, sort_keys=True, default=str)


def _warned_this_turn(messages: list[Message]) -> bool:
    """Whether a call of the latest assistant turn was already answered with a loop warning."""
    for message in reversed(messages):
        if message.role == "assistant":
            return False
        if message.role == "tool" and message.kind == "loop_warning":
            return True
    return False


def _pending_tool_calls(messages: list[Message]) -> list[ToolCall]:
    """Tool calls of the last assistant message that have no result yet (a resumed checkpoint)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role == "assistant":
            if not message.tool_calls:
                return []
            answered = {m.tool_call_id for m in messages[position + 1 :] if m.role == "tool"}
            return [c for c in message.tool_calls if c.id not in answered]
    return []


def _previous_turn_keys(messages: list[Message]) -> set[str]:
    """(name, arguments) keys of the assistant turn just before the latest one.

    Only consecutive turns count: when the turn before was a plain answer (sent back by a submit
    nudge, a schema repair or grounding), a call repeated from an earlier turn is not a loop.
    """
    assistant_turns = [m for m in messages if m.role == "assistant"]
    if len(assistant_turns) < 2:
        return set()
    return {_call_key(c) for c in assistant_turns[-2].tool_calls}


def _find_confidence(value: Any) -> float | None:
    if isinstance(value, dict):
        if "confidence" in value:
            try:
                return float(value["confidence"])
            except (TypeError, ValueError):
                return None
        for inner in value.values():
            found = _find_confidence(inner)
            if found is not None:
                return found
    return None


def _research_more(report: GroundingReport) -> str:
    lines = "\n".join(f"- {c.claim} ({failure_reason(c.rationale)})" for c in report.ungrounded)
    return (
        f"Only {report.score:.0%} of your answer's claims are supported by the tool results so far. "
        f"These claims have no supporting evidence:\n{lines}\nResearch them with your tools, or drop them, "
        "then give your answer again."
    )


def _string_leaves(value: Any) -> list[str]:
    """Every string inside a JSON-like value (the prose fields of a submission)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for inner in value.values() for text in _string_leaves(inner)]
    if isinstance(value, list):
        return [text for inner in value for text in _string_leaves(inner)]
    return []


def _drop_claims(value: Any, claims: set[str]) -> Any:
    """`value` with the given claim sentences removed from its strings (and emptied list items)."""
    if isinstance(value, str):
        kept = value
        for claim in claims:
            kept = kept.replace(claim, "")
        kept = re.sub(r"\n\s*[-*•]\s*\n", "\n", kept)  # a bullet left empty
        return re.sub(r"[ \t]{2,}", " ", kept).strip()
    if isinstance(value, dict):
        return {key: _drop_claims(inner, claims) for key, inner in value.items()}
    if isinstance(value, list):
        dropped = [_drop_claims(inner, claims) for inner in value]
        return [
            inner
            for inner, original in zip(dropped, value, strict=True)
            if inner != "" or original == ""
        ]
    return value
