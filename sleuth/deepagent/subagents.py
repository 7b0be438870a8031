"""Subagents: specialists the parent dispatches through a `task(subagent_type, description)` tool.

A child is a fresh, stateless one-shot `Agent`: it sees only the task description, and only its
final answer returns to the parent. Its tokens are charged to the parent's run through the
`UsageAccount` the parent passes to the `task` tool, so the parent's limits and token budget cover
its children. Nesting is bounded by `max_depth`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sleuth.agent import Agent
from sleuth.errors import InvalidSettingError, SleuthError
from sleuth.events import emit
from sleuth.limits import UsageAccount
from sleuth.models import resolve
from sleuth.models.base import Model
from sleuth.state import LoopState
from sleuth.tools import Tool

TASK_TOOL_NAME = "task"


class SubagentError(SleuthError, ValueError):
    """A dispatch the parent cannot make: an unknown subagent type, or nesting too deep. The
    parent model sees the message as the tool's failure and can do the task itself."""


_depth: contextvars.ContextVar[int] = contextvars.ContextVar("sleuth_subagent_depth", default=0)


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
        token = _depth.set(depth)
        # The child ran with its own state; its tokens belong to whoever dispatched it, also
        # when it fails part-way (its usage as of its last completed turn).
        child_state: dict[str, LoopState] = {}

        def track(state: LoopState) -> None:
            child_state["latest"] = state

        try:
            result = await self.build_child(definition).arun(description, on_checkpoint=track)
        except Exception:
            if "latest" in child_state:
                account.charge(child_state["latest"].usage)
            raise
        finally:
            _depth.reset(token)
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
