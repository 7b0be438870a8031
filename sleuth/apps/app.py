"""`App`: the registry of named research configs, agents, providers, datastores, pipelines and tools.

Names cross the wire, objects stay in the worker: a workflow input says `{"research": "market-report"}`
and the worker looks the name up here. Register factories where an object holds per-run state, so
every run gets a fresh one.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from sleuth.runtime.errors import InvalidSettingError, NotAvailableError, SleuthError
from sleuth.runtime.errors import UnknownNameError as UnknownNameError
from sleuth.runtime.settings import DEFAULT_TASK_QUEUE
from sleuth.tools import Tool, as_tool
from sleuth.tools.mcp import McpServerConfig, McpServers

if TYPE_CHECKING:
    from sleuth.models.base import Model
    from sleuth.rag.types import Retriever
    from sleuth.scans.knowledge import KnowledgeProvider
    from sleuth.scans.sinks import RowSink


class ResearchConfig(Protocol):
    """What `app.research` registers: a research graph run with `await config.execute(inputs)`
    (a `ResearchSpec` from `create_research_workflow`; `ResearchWorkflow` needs exactly that)."""

    def execute(self, inputs: Mapping[str, Any] | str, /) -> Awaitable[Any]: ...


class RunnableAgent(Protocol):
    """What an agent factory returns: anything run with `await agent.arun(task)` (an `Agent`,
    a `DeepDecomposer`, a pipeline)."""

    def arun(self, task: str, /) -> Awaitable[Any]: ...


class RunnablePipeline(Protocol):
    """What `app.pipeline` registers: a composition pipeline, run with `await pipeline.run(task)`."""

    def run(self, task: str, /) -> Awaitable[Any]: ...


ResearchT = TypeVar("ResearchT", bound="ResearchConfig | Callable[[], ResearchConfig]")
AgentT = TypeVar("AgentT", bound="RunnableAgent | Callable[[], RunnableAgent]")
PipelineT = TypeVar("PipelineT", bound="RunnablePipeline | Callable[[], RunnablePipeline]")
ProviderT = TypeVar("ProviderT", bound="KnowledgeProvider")
SinkT = TypeVar("SinkT", bound="RowSink")
ModelT = TypeVar("ModelT", bound="Model")
V = TypeVar("V")


class AppLoadError(SleuthError, ValueError):
    """`--app pkg.module:attr` could not be loaded."""


@dataclass
class DatastoreEntry:
    """A retriever registered under a name; agents that name it get a `search_<name>` tool."""

    name: str
    retriever: Retriever
    description: str = ""
    top_k: int = 5
    threshold: float | None = None
    max_top_k: int | None = None

    def as_config(self) -> dict[str, Any]:
        return {
            "retriever": self.retriever,
            "description": self.description,
            "top_k": self.top_k,
            "threshold": self.threshold,
            "max_top_k": self.max_top_k,
        }


class App:
    """What one worker serves. `sleuth worker --app pkg.module:app` loads it."""

    def __init__(self, task_queue: str = DEFAULT_TASK_QUEUE, *, name: str = "sleuth"):
        self.task_queue = task_queue
        self.name = name
        self._research: dict[str, ResearchConfig | Callable[[], ResearchConfig]] = {}
        self._agents: dict[str, Callable[[], RunnableAgent]] = {}
        self._providers: dict[str, KnowledgeProvider] = {}
        self._datastores: dict[str, DatastoreEntry] = {}
        self._pipelines: dict[str, RunnablePipeline | Callable[[], RunnablePipeline]] = {}
        self._tools: dict[str, Tool] = {}
        self._sinks: dict[str, RowSink] = {}
        self._models: dict[str, Model] = {}
        self.mcp = McpServers()
        """The MCP servers (`mcp_server`) and this process's connections to them."""

    # -- registration -------------------------------------------------------------------------

    def research(self, name: str, spec: ResearchT) -> ResearchT:
        """Register a research config (from `create_research_workflow`, or a factory returning one)."""
        self._research[_check_name("research config", name, self._research)] = spec
        return spec

    def agent(self, name: str, factory: AgentT) -> AgentT:
        """Register an agent factory (a callable returning a fresh agent for each run; a class
        counts as one). An agent instance is shared by every run."""
        build: Callable[[], RunnableAgent]
        if isinstance(factory, type) or (callable(factory) and not hasattr(factory, "arun")):
            build = cast("Callable[[], RunnableAgent]", factory)
        else:
            instance = cast("RunnableAgent", factory)
            build = lambda: instance  # noqa: E731
        self._agents[_check_name("agent", name, self._agents)] = build
        return factory

    def provider(self, name: str, provider: ProviderT) -> ProviderT:
        """Register a `KnowledgeProvider` for `KnowledgeScanWorkflow`."""
        self._providers[_check_name("provider", name, self._providers)] = provider
        return provider

    def datastore(
        self,
        name: str,
        retriever: Retriever,
        *,
        description: str = "",
        top_k: int = 5,
        threshold: float | None = None,
        max_top_k: int | None = None,
    ) -> DatastoreEntry:
        """Register a retriever; research configs and agents that list `name` get `search_<name>`,
        which returns `top_k` passages and at most `max_top_k` (default: `top_k`) when the model
        asks for more."""
        entry = DatastoreEntry(name, retriever, description, top_k, threshold, max_top_k)
        self._datastores[_check_name("datastore", name, self._datastores)] = entry
        return entry

    def pipeline(self, name: str, pipeline: PipelineT) -> PipelineT:
        """Register a composition pipeline (or a factory returning one) for `PipelineWorkflow`."""
        self._pipelines[_check_name("pipeline", name, self._pipelines)] = pipeline
        return pipeline

    def tool(self, value: Tool | Callable[..., Any], *, name: str | None = None) -> Tool:
        """Register a tool by name, for agents declared in YAML."""
        registered = as_tool(value)
        self._tools[_check_name("tool", name or registered.name, self._tools)] = registered
        return registered

    def sink(self, name: str, sink: SinkT) -> SinkT:
        """Register a named row sink for scans."""
        self._sinks[_check_name("sink", name, self._sinks)] = sink
        return sink

    def model(self, name: str, model: ModelT) -> ModelT:
        """Register a model instance; YAML agents use it as `model: {provider: app, model: NAME}`."""
        self._models[_check_name("model", name, self._models)] = model
        return model

    def mcp_server(
        self,
        name: str,
        *,
        command: str | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        idempotent: bool = False,
        idempotent_tools: list[str] | None = None,
        timeout_seconds: float = 120.0,
    ) -> McpServerConfig:
        """Configure an MCP server: `command=` (with `args=`, `env=`) over stdio, or `url=` over
        streamable HTTP. Agents get its tools with `app.mcp_tools(name)`; see docs/mcp.md."""
        config = McpServerConfig.checked(
            name=name,
            command=command,
            args=args or [],
            env=env or {},
            cwd=cwd,
            url=url,
            idempotent=idempotent,
            idempotent_tools=idempotent_tools or [],
            timeout_seconds=timeout_seconds,
        )
        _check_name("MCP server", name, dict.fromkeys(self.mcp.names))
        return self.mcp.add(config)

    def mcp_tools(self, name: str) -> list[Tool]:
        """The tools of MCP server `name` (`<name>_<tool>`), as listed when the worker started."""
        return self.mcp.tools(name)

    # -- lookup ---------------------------------------------------------------------------------

    def get_research(self, name: str) -> ResearchConfig:
        """The named research spec; a registered factory is built on first use, then reused
        (specs hold no per-run state)."""
        registered = _lookup("research config", name, self._research)
        if hasattr(registered, "execute"):
            return cast("ResearchConfig", registered)
        spec = registered()
        self._research[name] = spec
        return spec

    def new_agent(self, name: str) -> RunnableAgent:
        """A fresh agent from the factory registered as `name`, built with this App active
        (`use_app`), so a factory's `create_deepagent(datastores=["name"])` finds this App's
        datastores."""
        factory = _lookup("agent", name, self._agents)
        with use_app(self):
            return factory()

    def get_provider(self, name: str) -> KnowledgeProvider:
        return _lookup("provider", name, self._providers)

    def get_datastore(self, name: str) -> DatastoreEntry:
        return _lookup("datastore", name, self._datastores)

    def datastore_configs(self, names: list[str] | None) -> dict[str, dict[str, Any]]:
        """The `datastores=` mapping for the named stores (errors name what is registered)."""
        return {name: self.get_datastore(name).as_config() for name in names or []}

    def get_pipeline(self, name: str) -> RunnablePipeline:
        registered = _lookup("pipeline", name, self._pipelines)
        if hasattr(registered, "run"):
            return cast("RunnablePipeline", registered)
        return registered()

    def get_tool(self, name: str) -> Tool:
        return _lookup("tool", name, self._tools)

    def get_sink(self, name: str) -> RowSink:
        return _lookup("sink", name, self._sinks)

    def get_model(self, name: str) -> Model:
        return _lookup("model", name, self._models)

    @property
    def research_names(self) -> list[str]:
        return sorted(self._research)

    @property
    def agent_names(self) -> list[str]:
        return sorted(self._agents)

    @property
    def provider_names(self) -> list[str]:
        return sorted(self._providers)

    @property
    def datastore_names(self) -> list[str]:
        return sorted(self._datastores)

    @property
    def pipeline_names(self) -> list[str]:
        return sorted(self._pipelines)

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._tools)

    @property
    def sink_names(self) -> list[str]:
        return sorted(self._sinks)

    @property
    def model_names(self) -> list[str]:
        return sorted(self._models)


def _check_name(kind: str, name: str, registry: Mapping[str, object]) -> str:
    if not name or not isinstance(name, str):
        raise InvalidSettingError(f"a {kind} needs a non-empty name; give it one")
    if name in registry:
        raise InvalidSettingError(
            f"{kind} {name!r} is already registered; register it once, or pick another name"
        )
    return name


def _lookup(kind: str, name: str, registry: Mapping[str, V]) -> V:
    try:
        return registry[name]
    except KeyError:
        raise UnknownNameError(kind, name, list(registry)) from None


_ACTIVE_APP: ContextVar[App | None] = ContextVar("sleuth_active_app", default=None)
"""The App that code running in this context looks names up in, when no `app=` was passed."""


def load_app(target: str | App) -> App:
    """Load `pkg.module:attr` (an `App`, or a function returning one). The module is imported
    from the working directory first, as uvicorn and celery do. The built-in demo app is
    `sleuth.apps.demo.build_demo_app()`: the CLI picks it when no `--app` is given."""
    if isinstance(target, App):
        return target
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise AppLoadError(f"--app {target!r} must look like 'package.module:app'")
    try:
        module = _import_from_cwd(module_name)
    except ImportError as exc:
        raise AppLoadError(
            f"cannot import {module_name!r} for --app {target!r} (looked in the working "
            f"directory {os.getcwd()} first, then the import path): {exc}"
        ) from exc
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise AppLoadError(
            f"module {module_name!r} has no attribute {attribute!r} (--app {target!r})"
        ) from None
    app = value() if callable(value) and not isinstance(value, App) else value
    if not isinstance(app, App):
        raise AppLoadError(f"--app {target!r} is a {type(app).__name__}, not a sleuth.App")
    return app


def _import_from_cwd(module_name: str) -> Any:
    """`importlib.import_module`, with the working directory first on the import path, as uvicorn
    does: a console script's path starts with its own bin directory, not the cwd. It stays there,
    so a module the App's code imports later (inside a tool, at its first call) is found too."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    return importlib.import_module(module_name)


@contextlib.contextmanager
def use_app(app: App) -> Iterator[App]:
    """Makes `app` the one `current_app()` gives in this context (and the tasks started from
    it) until the block ends."""
    token = _ACTIVE_APP.set(app)
    try:
        yield app
    finally:
        _ACTIVE_APP.reset(token)


def current_app() -> App:
    """The App made active with `use_app(app)`, for code that was given no `app=`."""
    app = _ACTIVE_APP.get()
    if app is None:
        raise NotAvailableError(
            "no App is active here: pass app=... (the App that registers these names), or run "
            "the code inside `with sleuth.apps.app.use_app(app):`"
        )
    return app
