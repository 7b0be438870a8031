"""`create_deepagent`: the research-shaped `Agent` factory with opt-in capability layers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from sleuth.agent import Agent, GroundingSettings
from sleuth.agent.termination import Condition, ConfidenceMet, TokenLimit, ToolCalled
from sleuth.deepagent.fs import Backend, StateBackend, filesystem_tools
from sleuth.deepagent.memory import load_memory
from sleuth.deepagent.subagents import SubAgentDef, SubagentTool
from sleuth.deepagent.summarize import SummarizingManager
from sleuth.deepagent.todos import TodoState, todo_tools
from sleuth.flows.review import ApprovalPolicy
from sleuth.models import resolve
from sleuth.models.base import Model
from sleuth.rag.tools import wire_datastores
from sleuth.runtime.errors import InvalidSettingError, NotAvailableError, UnsupportedArgumentError
from sleuth.tools import Tool
from sleuth.usage.limits import UsageLimits

FILESYSTEM_GUIDE = (
    "You have a private workspace for notes and drafts: write_file, read_file, edit_file, ls, "
    "glob and grep. Paths are relative, like 'notes/findings.md'. Save what you find there "
    "instead of keeping everything in mind."
)
TODOS_GUIDE = (
    "Plan multi-step work with write_todos (each task pending, in_progress or completed) and keep "
    "the list current; read_todos shows it."
)
SUBAGENTS_GUIDE = (
    "For a self-contained piece of research, hand it to a specialist with the task tool; you get "
    "back only its answer."
)


def exit_condition(
    submit_tool: str | None, min_confidence: float, total_token_budget: int | None
) -> Condition | None:
    """The deep agent's exit condition, before the `MaxIterations` the `Agent` always adds.

    A successful submission with enough confidence ends the run; a submit tool that raised does
    not. A token budget ends it only when one is set.
    """
    condition: Condition | None = None
    if submit_tool is not None:
        condition = ToolCalled(submit_tool, require_success=True) & ConfidenceMet(min_confidence)
    if total_token_budget is not None:
        budget = TokenLimit(total_token_budget)
        condition = budget if condition is None else condition | budget
    return condition


def _datastore_configs(
    datastores: Mapping[str, Mapping[str, Any]] | Sequence[str] | None,
) -> Mapping[str, Mapping[str, Any]] | None:
    """The `wire_datastores` mapping for either accepted form of `datastores=`."""
    if datastores is None or isinstance(datastores, Mapping):
        return datastores
    if isinstance(datastores, str | bytes) or not isinstance(datastores, Sequence):
        raise UnsupportedArgumentError(
            f"create_deepagent(datastores=...) takes a list of datastore names registered with "
            f"app.datastore(name, retriever), e.g. datastores=['reports'], or a mapping "
            f"{{name: {{'retriever': ..., 'description': ...}}}}; got {type(datastores).__name__}"
            + (" (put a single name in a list)" if isinstance(datastores, str) else "")
        )
    names = list(datastores)
    if not all(isinstance(name, str) for name in names):
        raise UnsupportedArgumentError(
            "create_deepagent(datastores=[...]) takes datastore names (strings) registered with "
            "app.datastore(name, retriever); give retrievers in the mapping form "
            "{name: {'retriever': ...}}"
        )
    from sleuth.apps.app import current_app

    try:
        app = current_app()
    except NotAvailableError as exc:
        raise NotAvailableError(
            f"create_deepagent(datastores={names!r}) names datastores, which are looked up on the "
            "App the worker serves: create the agent in a factory registered with "
            "app.agent(name, factory), or pass the mapping form {name: {'retriever': ...}}"
        ) from exc
    return app.datastore_configs(names)


def _grounding_settings(
    grounding: bool | GroundingSettings,
    judge_model: Model | str | None,
    grounding_threshold: float | None,
) -> GroundingSettings | None:
    """The agent's grounding, refusing keywords that a settings object or `False` would ignore."""
    given = [
        name
        for name, value in (
            ("judge_model", judge_model),
            ("grounding_threshold", grounding_threshold),
        )
        if value is not None
    ]
    if isinstance(grounding, GroundingSettings):
        if given:
            raise InvalidSettingError(
                f"create_deepagent() got grounding=GroundingSettings(...) and {', '.join(given)}=; "
                "set the judge and threshold in one place: GroundingSettings(judge=..., "
                "threshold=...), or grounding=True with the keywords"
            )
        return grounding
    if not grounding:
        if given:
            raise InvalidSettingError(
                f"create_deepagent() got grounding=False and {', '.join(given)}=, which only "
                "grounding uses; drop them, or turn grounding on"
            )
        return None
    return GroundingSettings(
        judge=judge_model,
        threshold=0.65 if grounding_threshold is None else grounding_threshold,
    )


def create_deepagent(
    model: Model | str | None = None,
    tools: Sequence[Tool | Callable[..., Any]] = (),
    system_prompt: str = "",
    *,
    output_schema: type[BaseModel] | None = None,
    submit_tool: str | None = None,
    min_confidence: float = 0.85,
    max_iterations: int = 20,
    total_token_budget: int | None = None,
    max_output_tokens: int | None = None,
    limits: UsageLimits | None = None,
    max_cost_usd: float | None = None,
    approval: ApprovalPolicy | None = None,
    reflexion: bool | Literal["model", "rules"] = True,
    grounding: bool | GroundingSettings = True,
    grounding_threshold: float | None = None,
    judge_model: Model | str | None = None,
    enable_filesystem: bool = False,
    backend: Backend | None = None,
    enable_todos: bool = False,
    todo_state: TodoState | None = None,
    subagents: Sequence[SubAgentDef] | None = None,
    max_subagent_depth: int = 2,
    memory_files: Sequence[str | Path] | None = None,
    summarize_after_messages: int | None = None,
    summarize_keep_recent: int = 10,
    datastores: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None,
    name: str = "deepagent",
    **unexpected: Any,
) -> Agent:
    """A plain `sleuth.Agent` configured for deep research.

    The run ends when `submit_tool` succeeded with confidence ≥ `min_confidence`, when
    `total_token_budget` (if set) is spent, or after `max_iterations` model turns. `limits` (a
    `UsageLimits`) is checked before each model request and tool call; `max_cost_usd` is the
    run's cost budget in USD (the same as `limits=UsageLimits(max_cost_usd=...)`). `approval` (an
    `ApprovalPolicy`) makes calls of the tools it names wait for a person. Layers are
    opt-in: `enable_filesystem` (or `backend=`), `enable_todos` (or `todo_state=`), `subagents`,
    `memory_files`, `summarize_after_messages`, `datastores`. Their state (files of a
    `StateBackend`, todos) is part of every checkpoint. `datastores` is a mapping
    `{name: {"retriever": ..., "description": ...}}`, or a list of names registered with
    `app.datastore(...)` on the App the worker serves (as in research configs).

    Grounding is set either by `grounding=GroundingSettings(...)` or by `grounding=True` with
    `judge_model=` and `grounding_threshold=` (default 0.65), never both: a settings object
    together with either keyword, or either keyword with `grounding=False`, is an error.
    """
    if "max_tokens" in unexpected:
        raise UnsupportedArgumentError(
            "create_deepagent() does not take max_tokens: use max_output_tokens= to cap each "
            "model completion, or total_token_budget= to end the run after that many tokens"
        )
    if unexpected:
        raise UnsupportedArgumentError(
            f"create_deepagent() got unexpected keyword argument(s): {', '.join(sorted(unexpected))}"
        )
    if max_cost_usd is not None:
        if limits is not None and limits.max_cost_usd is not None:
            raise UnsupportedArgumentError(
                "create_deepagent() got max_cost_usd twice (as an argument and in limits=); "
                "set it in one place"
            )
        limits = (limits or UsageLimits()).model_copy(update={"max_cost_usd": max_cost_usd})
    resolved_model = resolve(model)
    all_tools: list[Tool | Callable[..., Any]] = list(tools)
    guides: list[str] = []

    store_tools, routing = wire_datastores(_datastore_configs(datastores))
    all_tools.extend(store_tools)

    if backend is not None or enable_filesystem:
        backend = backend if backend is not None else StateBackend()
        all_tools.extend(filesystem_tools(backend))
        guides.append(FILESYSTEM_GUIDE)
    if todo_state is not None or enable_todos:
        todo_state = todo_state if todo_state is not None else TodoState()
        all_tools.extend(todo_tools(todo_state))
        guides.append(TODOS_GUIDE)
    if subagents:
        all_tools.append(SubagentTool(subagents, resolved_model, max_subagent_depth))
        guides.append(SUBAGENTS_GUIDE)

    memory = load_memory(memory_files or [])
    prompt = "\n\n".join(part for part in (memory, routing, system_prompt, *guides) if part.strip())

    settings = _grounding_settings(grounding, judge_model, grounding_threshold)

    context_manager = (
        SummarizingManager(
            resolved_model,
            after_messages=summarize_after_messages,
            keep_recent=summarize_keep_recent,
        )
        if summarize_after_messages is not None
        else None
    )

    agent = Agent(
        model=resolved_model,
        tools=all_tools,
        system_prompt=prompt,
        output_schema=output_schema,
        termination=exit_condition(submit_tool, min_confidence, total_token_budget),
        max_iterations=max_iterations,
        max_output_tokens=max_output_tokens,
        limits=limits,
        approval=approval,
        submit_tool=submit_tool,
        reflexion=reflexion,
        grounding=settings,
        context_manager=context_manager,
        name=name,
    )
    if backend is not None:
        agent.add_layer("filesystem", backend)
    if todo_state is not None:
        agent.add_layer("todos", todo_state)
    return agent
