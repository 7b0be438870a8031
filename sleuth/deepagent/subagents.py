"""Subagents: specialists the parent dispatches through a `task(subagent_type, description)` tool.

A child is a fresh, stateless one-shot `Agent`: it sees only the task description, and only its
final answer returns to the parent. Its tokens are charged to the parent's run through the
`UsageAccount` the parent passes to the `task` tool, so the parent's limits and token budget cover
its children. Nesting is bounded by `max_depth`.

A durable runner makes children resumable: inside `resumable_children(checkpoints)` every child
loop saves its state there after each model turn and tool call, and a dispatch that finds a saved
state (a retried step) resumes it instead of starting over, so the child's finished tool calls
are not run again. A child is named by the chain of `(subagent_type, description)` dispatches
leading to it, which a retried step repeats exactly.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sleuth.agent import Agent
from sleuth.agent.state import LoopState
from sleuth.models import resolve
from sleuth.models.base import Model
from sleuth.runtime.errors import InvalidSettingError, SleuthError
from sleuth.runtime.events import emit
from sleuth.tools import Tool
from sleuth.usage.limits import UsageAccount

TASK_TOOL_NAME = "task"


class SubagentError(SleuthError, ValueError):
    """A dispatch the parent cannot make: an unknown subagent type, or nesting too deep. The
    parent model sees the message as the tool's failure and can do the task itself."""


_depth: contextvars.ContextVar[int] = contextvars.ContextVar("sleuth_subagent_depth", default=0)
_path: contextvars.ContextVar[str] = contextvars.ContextVar("sleuth_subagent_path", default="")


class ChildCheckpoints(Protocol):
    """Where a durable runner keeps the loop state of the subagents running inside one step."""

    def resume_child(self, key: str) -> LoopState | None:
        """The saved state of the child `key`, or None to start it fresh."""
        ...

    async def save_child(self, key: str, state: LoopState) -> None:
        """Make the child's state durable (called after each of its model turns and tool calls)."""
        ...

    def child_finished(self, key: str) -> None:
        """The child answered: its state may go once the parent has saved the answer."""
        ...


_checkpoints: contextvars.ContextVar[ChildCheckpoints | None] = contextvars.ContextVar(
    "sleuth_subagent_checkpoints", default=None
)


@contextlib.contextmanager
def resumable_children(checkpoints: ChildCheckpoints) -> Iterator[None]:
    """Subagents dispatched inside the block save to and resume from `checkpoints`."""
    token = _checkpoints.set(checkpoints)
    try:
        yield
    finally:
        _checkpoints.reset(token)


@dataclass
class SubAgentDef:
    """A specialist the parent can hand a self-contained task to."""

    name: str
    """What the parent passes as `subagent_type`."""
    description: str
    """When to use it; shown to the parent in the `task` tool's description."""
    system_prompt: str
    """The child's instructions."""
    tools: Sequence[Tool | Callable[..., Any]] = ()
    """The child's own tools (the parent's tools are not inherited)."""
    max_iterations: int = 8
    """Model turns the child gets before it must answer."""
    model: Model | str | None = None
    """The child's model; `None` uses the parent's."""
    subagents: Sequence[SubAgentDef] = field(default_factory=tuple)
    """Specialists this child may dispatch in turn (bounded by the parent's `max_subagent_depth`)."""


class SubagentTool(Tool):
    """The `task` tool. Durable runners recognise it and run each dispatch as its own activity."""

    def __init__(self, definitions: Sequence[SubAgentDef], parent_model: Model, max_depth: int):
        names = [d.name for d in definitions]
        if len(set(names)) != len(names):
            raise InvalidSettingError(f"subagent names must be unique, got {names}")
        self.definitions = {d.name: d for d in definitions}
        self.parent_model = parent_model
        self.max_depth = max_depth
        listing = "\n".join(f"- {d.name}: {d.description}" for d in definitions)

        async def task(subagent_type: str, description: str, account: UsageAccount) -> str:
            return await self.dispatch(subagent_type, description, account)

        super().__init__(
            task,
            name=TASK_TOOL_NAME,
            description=(
                "Hand a self-contained task to a specialist subagent and get back its final answer. "
                "Describe the task fully: the subagent sees nothing else. Available subagents:\n"
                + listing
            ),
        )

    def build_child(self, definition: SubAgentDef) -> Agent:
        """A fresh agent for one dispatch of `definition`."""
        model = resolve(definition.model) if definition.model is not None else self.parent_model
        tools: list[Tool | Callable[..., Any]] = list(definition.tools)
        if definition.subagents:
            tools.append(SubagentTool(definition.subagents, model, self.max_depth))
        return Agent(
            model=model,
            tools=tools,
            system_prompt=definition.system_prompt,
            max_iterations=definition.max_iterations,
            name=definition.name,
        )

    async def dispatch(self, subagent_type: str, description: str, account: UsageAccount) -> str:
        """Run the named subagent on `description`; returns its final answer and charges the
        child's tokens to `account` (the parent's run), also when the child fails part-way."""
        definition = self.definitions.get(subagent_type)
        if definition is None:
            raise SubagentError(
                f"unknown subagent_type {subagent_type!r}; available: "
                + ", ".join(sorted(self.definitions))
            )
        depth = _depth.get() + 1
        if depth > self.max_depth:
            raise SubagentError(
                f"subagent nesting limit reached ({self.max_depth} levels); do this task yourself"
            )
        emit(
            "deepagent.subagent.spawned",
            subagent_type=subagent_type,
            description=description[:500],
            depth=depth,
        )
        key = _child_key(subagent_type, description)
        checkpoints = _checkpoints.get()
        token, path_token = _depth.set(depth), _path.set(key)
        # The child ran with its own state; its tokens belong to whoever dispatched it, also
        # when it fails part-way (its usage as of its last completed turn).
        child_state: dict[str, LoopState] = {}

        async def track(state: LoopState) -> None:
            child_state["latest"] = state
            if checkpoints is not None:
                await checkpoints.save_child(key, state)

        try:
            result = await self.build_child(definition).arun(
                description,
                checkpoint=checkpoints.resume_child(key) if checkpoints is not None else None,
                on_checkpoint=track,
            )
        except Exception:
            if "latest" in child_state:
                account.charge(child_state["latest"].usage)
            raise
        finally:
            _depth.reset(token)
            _path.reset(path_token)
        if checkpoints is not None:
            checkpoints.child_finished(key)
        account.charge(result.usage)
        emit(
            "deepagent.subagent.completed",
            subagent_type=subagent_type,
            stop_reason=result.stop_reason,
            iterations=result.iterations,
            total_tokens=result.usage.total_tokens,
            result_preview=result.message[:200],
        )
        if not result.message.strip():
            return (
                f"subagent {subagent_type} stopped ({result.stop_reason}) without an answer; "
                "narrow the task or do it yourself"
            )
        return result.message


def _child_key(subagent_type: str, description: str) -> str:
    """The child's name: its parent's, then this dispatch (the same in a retried step)."""
    digest = hashlib.sha256(description.encode("utf-8")).hexdigest()[:16]
    parent = _path.get()
    return f"{parent}/{subagent_type}:{digest}" if parent else f"{subagent_type}:{digest}"
