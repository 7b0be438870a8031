"""`@tool`: turn a typed, documented function into a tool a model can call.

The JSON schema comes from the type hints (pydantic models are allowed as arguments); the
description is the docstring. Bad arguments and exceptions come back as a `ToolResult` with
`ok=False` so the agent loop can show them to the model and go on. A parameter annotated
`sleuth.usage.limits.UsageAccount` is not part of the schema: the agent passes the account of the run
calling the tool, for a tool that spends model tokens of its own to charge them.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from sleuth.models.base import RetryableModelError, ToolSpec
from sleuth.usage.limits import UsageAccount

if TYPE_CHECKING:
    from sleuth.tools.builtin import fs_read_tool as fs_read_tool
    from sleuth.tools.builtin import web_fetch_tool as web_fetch_tool
    from sleuth.tools.builtin import web_search_tool as web_search_tool
    from sleuth.tools.pages import WebFetchOptions as WebFetchOptions
    from sleuth.tools.search import SearchResult as SearchResult
    from sleuth.tools.search import WebSearchOptions as WebSearchOptions

_BUILTIN_EXPORTS = {
    "web_search_tool": "sleuth.tools.builtin",
    "web_fetch_tool": "sleuth.tools.builtin",
    "fs_read_tool": "sleuth.tools.builtin",
    "WebSearchOptions": "sleuth.tools.search",
    "SearchResult": "sleuth.tools.search",
    "WebFetchOptions": "sleuth.tools.pages",
}
"""The builtin tools' factories and options, loaded on first use (they import this module)."""


def __getattr__(name: str) -> Any:
    if name in _BUILTIN_EXPORTS:
        import importlib

        return getattr(importlib.import_module(_BUILTIN_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ToolResult(BaseModel):
    """What one tool call returned: its output as text for the model, or the error it raised."""

    ok: bool
    content: str
    error: str | None = None


def render_output(value: Any) -> str:
    """Serialise a tool's return value as the text the model sees."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, default=_json_default, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


class Tool:
    """A callable tool: `name`, `description`, JSON-schema `parameters`, and `invoke(arguments)`."""

    def __init__(
        self, func: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ):
        self.func = func
        self.name = name or func.__name__
        self.description = (description or inspect.getdoc(func) or "").strip()
        self.is_async = inspect.iscoroutinefunction(func)
        self._signature = inspect.signature(func)
        hints = get_type_hints(func)
        fields: dict[str, Any] = {}
        self.account_parameter: str | None = None
        """The parameter the calling run's `UsageAccount` is passed in, if the function has one."""
        for param in self._signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            annotation = hints.get(param.name, Any)
            if annotation is UsageAccount:
                self.account_parameter = param.name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, default)
        self.arguments_model: type[BaseModel] = create_model(
            f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        self.parameters = self.arguments_model.model_json_schema()
        self.parameters.pop("title", None)

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate raw JSON arguments; returns keyword arguments for the function."""
        parsed = self.arguments_model.model_validate(arguments)
        return {key: getattr(parsed, key) for key in type(parsed).model_fields}

    async def invoke(
        self, arguments: dict[str, Any], account: UsageAccount | None = None
    ) -> ToolResult:
        """Run the tool. Never raises for bad arguments or tool errors: they become `ok=False`.

        `account` is the usage account of the calling run (a fresh one when None), passed to a
        function that declares a `UsageAccount` parameter.
        """
        try:
            kwargs = self.validate(arguments)
        except ValidationError as exc:
            return ToolResult(
                ok=False,
                content=f"Invalid arguments for tool {self.name!r}: {validation_problems(exc)}",
                error="invalid_arguments",
            )
        if self.account_parameter is not None:
            kwargs[self.account_parameter] = account if account is not None else UsageAccount()
        try:
            if self.is_async:
                value = await self.func(**kwargs)
            else:
                value = await asyncio.to_thread(self.func, **kwargs)
        except RetryableModelError:
            # A provider asked to back off inside the tool (a subagent's model, an embedding
            # call). Retries belong to the runner — a durable step is retried and resumes from
            # its checkpoint — not to the model, which would only learn that the tool "failed".
            raise
        except Exception as exc:  # the model sees the failure and can change course
            return ToolResult(
                ok=False,
                content=f"Tool {self.name!r} failed: {type(exc).__name__}: {exc}",
                error=f"{type(exc).__name__}: {exc}",
            )
        return ToolResult(ok=True, content=render_output(value))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def validation_problems(
    exc: ValidationError, *, whole: str = "(arguments)", given: bool = False
) -> str:
    """A validation error as a model can act on it, one `field: problem` per failure, without
    pydantic's links. `whole` names an error of the whole value; with `given`, each problem also
    says what was given ("key_findings.0: Input should be a valid string, not [1]") and a missing
    field reads "missing"."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or whole
        if not given:
            problems.append(f"{where}: {error['msg']}")
        elif error["type"] == "missing":
            problems.append(f"{where}: missing")
        else:
            value = json.dumps(error.get("input"), default=str)
            if len(value) > 80:
                value = value[:77] + "..."
            problems.append(f"{where}: {error['msg']}, not {value}")
    return "; ".join(problems)


@overload
def tool(func: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorate a sync or async function as a `Tool` (`@tool` or `@tool(name=..., description=...)`)."""
    if func is not None:
        return Tool(func, name=name, description=description)

    def decorate(inner: Callable[..., Any]) -> Tool:
        return Tool(inner, name=name, description=description)

    return decorate


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """Accept a `Tool` or a plain function where a tool is expected."""
    return value if isinstance(value, Tool) else Tool(value)
