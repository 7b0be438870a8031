"""Agents declared in YAML, registered into an `App` (`sleuth worker --config agents.yaml`).

```yaml
agents:
  - id: deep-researcher
    type: deep                 # deep | react (default react)
    model: {provider: openai, model: gpt-4o-mini}
    deep_max_depth: 2          # deep only; 0 means 3
    max_fan_out: 4             # deep only: subtasks of one task running at once
    max_iterations: 8          # per ReAct loop (every leaf and synthesis of a deep agent)
    max_output_tokens: 2000    # per model call
    system_prompt: |
      You are a research analyst.
    tools: [web_fetch, read_file]   # names registered with app.tool(...)
    budget: {max_tool_calls: 60, max_input_tokens: 800000, max_output_tokens: 100000}
```

`model.provider` is `openai`, `anthropic`, `local` (`sleuth.models.resolve("provider:model")`) or
`app`: a model registered in the App with `app.model(NAME, model)` — how tests and custom
adapters plug in. A deep agent's budget covers its whole decomposition tree; a react agent's
covers its one loop. An unknown field, tool, provider or app model is an error naming the file
and line, and every such error in the file is reported at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.agent.memory import AgentMemory, MemorySettings
from sleuth.agent.policies import Governance, Guardrails, ToolRetry
from sleuth.apps.app import App
from sleuth.apps.yaml_tools import McpToolEntry, ToolEntry, YamlToolError, resolve_tool
from sleuth.flows.decompose import DeepDecomposer, effective_max_depth
from sleuth.flows.review import ApprovalPolicy, ReviewCallback
from sleuth.models import PROVIDERS, resolve
from sleuth.models.base import Model
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.settings import load_settings
from sleuth.tools import Tool
from sleuth.tools.mcp import McpServerConfig
from sleuth.usage.budget import Budget, budgeted_agent
from sleuth.usage.pricing import model_key, price_of

APP_PROVIDER = "app"


class YamlConfigError(SleuthError, ValueError):
    """The YAML agent config is wrong; the message names each bad line."""


class ModelSpec(BaseModel):
    """A `model:` entry: `provider` (openai, anthropic, local, …) and the `model` name."""

    model_config = ConfigDict(extra="forbid")

    provider: str
    model: str


class AgentSpec(BaseModel):
    """One entry of `agents:`."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    type: str = "react"
    model: ModelSpec | None = None
    """None: the default model (`$SLEUTH_MODEL`, else the embedded local model)."""
    deep_max_depth: int = Field(default=3, ge=0)
    max_fan_out: int = Field(default=4, ge=1)
    max_iterations: int = Field(default=10, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    system_prompt: str = ""
    description: str = ""
    tools: list[str | ToolEntry | McpToolEntry] = Field(default_factory=list)
    """Names registered with `app.tool(...)`, objects `{name, type: function, function}`, or MCP
    servers `{name, type: mcp, command | url, ...}` (all their tools)."""
    budget: Budget | None = None
    tool_retry: ToolRetry | None = None
    """Retry a tool call that raised, with backoff."""
    guardrails: Guardrails | None = None
    """Checks on the task and the answer."""
    memory: MemorySettings | bool | None = None
    """`true` or settings: the agent id's memory persists across runs in the artifact store."""
    governance: Governance | None = None
    """A tool allow-list, and token and USD caps per run."""
    approval_tools: list[str] = Field(default_factory=list)
    """Tools whose every call waits for a person's approval."""
    approval_timeout_seconds: float = Field(default=3600.0, gt=0, le=30 * 24 * 3600.0)
    """How long a call waits for the approval (more than 0, at most 30 days)."""
    approval_on_timeout: Literal["deny", "approve", "fail"] = "deny"
    """What an unanswered approval does: deny the call, allow it, or fail the run."""

    def memory_settings(self) -> MemorySettings | None:
        if self.memory is True:
            return MemorySettings()
        return self.memory or None


class _Located:
    """Line numbers of a composed YAML node tree, by field path."""

    def __init__(self, source: str, node: yaml.Node):
        self.source, self.node = source, node

    def line(self, *path: str | int) -> int:
        """1-based line of the deepest node of `path` that exists (a key's line for a field)."""
        node = self.node
        line = node.start_mark.line
        for step in path:
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if key.value == step:
                        line, node = key.start_mark.line, value
                        break
                else:
                    return line + 1
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                if step >= len(node.value):
                    return line + 1
                node = node.value[step]
                line = node.start_mark.line
            else:
                return line + 1
        return line + 1

    def at(self, message: str, *path: str | int) -> str:
        return f"{self.source}:{self.line(*path)}: {message}"


def _parse(text: str, source: str) -> tuple[list[AgentSpec], _Located]:
    """Parse and validate the `agents:` of a YAML document (names are checked later, per App)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise YamlConfigError(f"{source}: not valid YAML: {exc}") from exc
    if root is None:
        raise YamlConfigError(f"{source}: the file is empty; it needs an 'agents:' list")
    located = _Located(source, root)
    data = yaml.SafeLoader("").construct_document(root)
    if not isinstance(data, dict):
        raise YamlConfigError(located.at("the top level must be a mapping with 'agents:'"))
    errors = [
        located.at(f"unknown top-level field {key!r}; allowed: agents", key)
        for key in data
        if key != "agents"
    ]
    agents = data.get("agents")
    if not isinstance(agents, list):
        raise YamlConfigError(
            "\n".join([*errors, located.at("'agents:' must be a list of agents", "agents")])
        )
    specs: list[AgentSpec] = []
    seen: dict[str, int] = {}
    for position, entry in enumerate(agents):
        try:
            spec = AgentSpec.model_validate(entry)
        except ValidationError as exc:
            errors += [_describe(located, position, error) for error in exc.errors()]
            continue
        if spec.id in seen:
            errors.append(
                located.at(
                    f"agent id {spec.id!r} is declared twice (first on line {seen[spec.id]})",
                    "agents",
                    position,
                    "id",
                )
            )
        seen.setdefault(spec.id, located.line("agents", position, "id"))
        if spec.type not in ("deep", "react"):
            errors.append(
                located.at(
                    f"agent {spec.id!r}: unknown type {spec.type!r}; allowed: deep, react",
                    "agents",
                    position,
                    "type",
                )
            )
        specs.append(spec)
    if errors:
        raise YamlConfigError("\n".join(sorted(errors, key=_line_of)))
    return specs, located


def _line_of(message: str) -> int:
    """The line number of a `source:line: message` error (for listing errors in file order)."""
    parts = message.split(":")
    return next((int(p) for p in parts[1:] if p.isdigit()), 0)


def _describe(located: _Located, position: int, error: Any) -> str:
    path = ("agents", position, *error["loc"])
    field = ".".join(str(p) for p in error["loc"]) or "(entry)"
    if error["type"] == "extra_forbidden":
        allowed = _allowed_fields(error["loc"])
        return located.at(f"unknown field {field!r}; allowed: {allowed}", *path)
    return located.at(f"{field}: {error['msg']}", *path)


def _allowed_fields(loc: tuple[Any, ...]) -> str:
    model: type[BaseModel] = AgentSpec
    if len(loc) > 1 and loc[0] == "model":
        model = ModelSpec
    elif len(loc) > 1 and loc[0] == "budget":
        model = Budget
    return ", ".join(model.model_fields)


def _resolve_tools(
    spec: AgentSpec,
    app: App,
    base: Path,
    at: Callable[..., str],
    errors: list[str],
) -> list[Tool | McpServerConfig]:
    """The spec's tools and MCP servers; what is wrong with them goes to `errors`, placed by
    `at`: an entry that names nothing, or an approval or governance list naming a tool the agent
    does not have."""
    tools: list[Tool | McpServerConfig] = []
    for number, entry in enumerate(spec.tools):
        try:
            if isinstance(entry, McpToolEntry):
                tools.append(entry.server_config(base))
            else:
                tools.append(resolve_tool(entry, app, base))
        except YamlToolError as exc:
            errors.append(at(f"agent {spec.id!r}: {exc}", "tools", number))
    servers = [t for t in tools if isinstance(t, McpServerConfig)]
    tool_names = [t.name for t in tools if isinstance(t, Tool)]
    for field_name, named in (
        ("approval_tools", spec.approval_tools),
        ("governance", (spec.governance.allowed_tools or []) if spec.governance else []),
    ):
        unknown = sorted(
            name
            for name in set(named) - set(tool_names)
            # An MCP server's tools are listed when the worker starts, not now.
            if not any(name.startswith(f"{server.name}_") for server in servers)
        )
        if unknown:
            errors.append(
                at(
                    f"agent {spec.id!r}: {field_name} names {', '.join(unknown)}, which are not "
                    f"among its tools: {', '.join(tool_names) or 'none'}",
                    field_name,
                )
            )
    return tools


def build_agent_factory(
    spec: AgentSpec,
    app: App,
    located: _Located | None = None,
    position: int = 0,
    *,
    approval_callback: ReviewCallback | None = None,
) -> Callable[[], Any]:
    """Check the spec's names against `app` and return a factory making a fresh agent per run.
    `approval_callback` answers the `approval_tools` calls of in-process runs."""
    errors: list[str] = []

    def at(message: str, *path: str | int) -> str:
        return located.at(message, "agents", position, *path) if located else message

    base = Path(located.source).parent if located else Path.cwd()
    tools = _resolve_tools(spec, app, base, at, errors)
    options: dict[str, Any] = {
        "tool_retry": spec.tool_retry,
        "guardrails": spec.guardrails,
        "governance": spec.governance,
    }
    options["approval"] = approval_policy(spec, approval_callback)
    unpriced = _unpriced(spec, app)
    if unpriced is not None:
        field = (
            ("governance", "max_cost_usd_per_run")
            if spec.governance is not None and spec.governance.max_cost_usd_per_run is not None
            else ("budget", "max_cost_usd")
        )
        errors.append(
            at(
                f"agent {spec.id!r}: {'.'.join(field)} needs the price of model {unpriced!r}, "
                f"which no price table has: add it to a price file ($SLEUTH_PRICES, "
                f'e.g. ["{unpriced}"] input_per_million = … output_per_million = …) or call '
                "sleuth.set_prices(...)",
                *field,
            )
        )
    model_factory: Callable[[], Any] = lambda: resolve(None)  # noqa: E731
    if spec.model is not None:
        provider, name = spec.model.provider, spec.model.model
        if provider == APP_PROVIDER:
            if name in app.model_names:
                registered_model = app.get_model(name)
                model_factory = lambda: registered_model  # noqa: E731
            else:
                registered = ", ".join(app.model_names) or "none"
                errors.append(
                    at(
                        f"agent {spec.id!r}: no model {name!r} in the App; registered: {registered}",
                        "model",
                        "model",
                    )
                )
        elif provider in PROVIDERS:
            model_factory = lambda: resolve(f"{provider}:{name}")  # noqa: E731
        else:
            errors.append(
                at(
                    f"agent {spec.id!r}: unknown model provider {provider!r}; "
                    f"allowed: {', '.join((*PROVIDERS, APP_PROVIDER))}",
                    "model",
                    "provider",
                )
            )
    for server in (t for t in tools if isinstance(t, McpServerConfig)):
        try:
            app.mcp.add(server)
        except ValueError as exc:
            errors.append(at(f"agent {spec.id!r}: {exc}", "tools"))
    if errors:
        raise YamlConfigError("\n".join(errors))

    memory = spec.memory_settings()

    def current_tools() -> list[Tool]:
        """The agent's tools, an MCP server's as the worker listed them."""
        built: list[Tool] = []
        for entry in tools:
            built.extend(
                app.mcp_tools(entry.name) if isinstance(entry, McpServerConfig) else [entry]
            )
        return built

    def agent_options() -> dict[str, Any]:
        fresh = {key: value for key, value in options.items() if value is not None}
        if memory is not None:
            fresh["memory"] = AgentMemory(spec.id, memory)
        return fresh

    if spec.type == "deep":
        max_depth = effective_max_depth(spec.deep_max_depth)
        return lambda: DeepDecomposer(
            model_factory(),
            current_tools(),
            spec.system_prompt,
            max_depth=max_depth,
            max_iterations=spec.max_iterations,
            max_fan_out=spec.max_fan_out,
            budget=spec.budget,
            max_output_tokens=spec.max_output_tokens,
            agent_options=agent_options(),
            name=spec.id,
        )
    return lambda: budgeted_agent(
        model_factory(),
        current_tools(),
        spec.system_prompt,
        budget=spec.budget,
        max_iterations=spec.max_iterations,
        max_output_tokens=spec.max_output_tokens,
        agent_options=agent_options(),
        name=spec.id,
    )


def approval_policy(
    spec: AgentSpec, callback: ReviewCallback | None = None
) -> ApprovalPolicy | None:
    """The `ApprovalPolicy` of the agent's `approval_*` fields (None without `approval_tools`).

    Durably (`AgentWorkflow`) a named tool call waits for the run's `review` Update
    (`sleuth review RUN_ID`); in-process `callback` answers it."""
    if not spec.approval_tools:
        return None
    return ApprovalPolicy(
        tools=spec.approval_tools,
        timeout_seconds=spec.approval_timeout_seconds,
        on_timeout=spec.approval_on_timeout,
        callback=callback,
    )


def _unpriced(spec: AgentSpec, app: App) -> str | None:
    """The model key of the spec's model when a USD cap needs its price and no table has one."""
    governance, budget = spec.governance, spec.budget
    capped = (governance is not None and governance.max_cost_usd_per_run is not None) or (
        budget is not None and budget.max_cost_usd is not None
    )
    if not capped:
        return None
    model: Model | str
    if spec.model is None:
        model = load_settings().model
    elif spec.model.provider == APP_PROVIDER:
        if spec.model.model not in app.model_names:
            return None  # reported as an unknown app model
        model = app.get_model(spec.model.model)
    else:
        model = f"{spec.model.provider}:{spec.model.model}"
    if price_of(model) is not None:
        return None
    return model if isinstance(model, str) else model_key(model)


def load_agents_into(
    app: App, path: str | Path, *, approval_callback: ReviewCallback | None = None
) -> list[str]:
    """Register every agent of the YAML file at `path` in `app`; returns their ids.

    Nothing is registered unless the whole file is valid. A tool call an agent's `approval_tools`
    names waits for a person: durably for the run's `review` Update (`sleuth review RUN_ID`),
    in-process for `approval_callback` (`async def approve(pending) -> ReviewDecision`).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise YamlConfigError(f"cannot read agent config {path}: {exc}") from exc
    specs, located = _parse(text, str(path))
    factories: dict[str, Callable[[], Any]] = {}
    errors: list[str] = []
    for position, spec in enumerate(specs):
        if spec.id in app.agent_names:
            errors.append(
                located.at(
                    f"agent {spec.id!r} is already registered in the App", "agents", position, "id"
                )
            )
            continue
        try:
            factories[spec.id] = build_agent_factory(
                spec, app, located, position, approval_callback=approval_callback
            )
        except YamlConfigError as exc:
            errors.append(str(exc))
    if errors:
        raise YamlConfigError("\n".join(errors))
    for agent_id, factory in factories.items():
        app.agent(agent_id, factory)
    return list(factories)
