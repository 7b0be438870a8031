"""Tool entries of YAML agents: a registered name, or an object as seed 003 writes them.

```yaml
tools:
  - lookup_ticker                                           # registered with app.tool(...)
  - { name: search, type: function, function: web.search, options: {provider: brave} }  # a builtin
  - { name: web-fetch, type: function, function: web.fetch }
  - { name: read-file, type: function, function: fs.read, options: {root: ./docs} }
  - { name: score, type: function, function: myproject.tools:score }   # module:attribute
```

An MCP server's tools come in as one entry (docs/mcp.md), named `<name>_<tool>` for the model:

```yaml
  - { name: kb, type: mcp, command: kb-server, args: [--db, kb.sqlite], idempotent: true }
  - { name: tickets, type: mcp, url: "http://127.0.0.1:8000/mcp", idempotent_tools: [search] }
```

`function` is a builtin (`web.search`, `web.fetch`, `fs.read`; see `sleuth.tools.builtin`), a tool registered in
the App, or `module:attribute` naming a `@tool` or a plain function. `name` is what the model
calls it (default: the function's own name); `options` configures a builtin.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from sleuth._util.strict import StrictInput
from sleuth.runtime.errors import SleuthError
from sleuth.tools import Tool, as_tool
from sleuth.tools.builtin import (
    BUILTINS,
    FsReadOptions,
    WebFetchOptions,
    WebSearchOptions,
    default_files_root,
    fs_read_tool,
    web_fetch_tool,
    web_search_tool,
)
from sleuth.tools.mcp import SERVER_NAME_PATTERN, McpServerConfig


class YamlToolError(SleuthError, ValueError):
    """A tool entry names nothing Sleuth can find, or its options are wrong."""


class ToolEntry(StrictInput):
    """One tool as an object."""

    name: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    """What the model calls the tool (letters, digits, `_` and `-`); default: the function's name."""
    type: Literal["function"] = "function"
    """The kind of tool; `function` is the one kind."""
    function: str = Field(min_length=1)
    """A builtin (`web.search`, `web.fetch`, `fs.read`), a name registered with `app.tool`, or
    `module:attribute`."""
    description: str | None = None
    """What the model is told the tool does (default: the function's docstring)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Settings of a builtin (`web.search`: provider, max_results, allowed_domains,
    blocked_domains, timeout_seconds; `web.fetch`: timeout_seconds, max_bytes, max_chars,
    max_pdf_pages, cache_seconds, allow_private; `fs.read`: root)."""


class McpToolEntry(StrictInput):
    """All the tools of one MCP server (see `sleuth.tools.mcp.McpServerConfig` for the fields)."""

    name: str = Field(pattern=SERVER_NAME_PATTERN)
    """The server's name; its tools reach the model as `<name>_<tool>`."""
    type: Literal["mcp"]
    command: str | None = None
    """The program serving MCP over stdio."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    """The command's folder, relative to the YAML file's."""
    url: str | None = None
    """A streamable-HTTP endpoint instead of a command."""
    idempotent: bool = False
    idempotent_tools: list[str] = Field(default_factory=list)
    timeout_seconds: float = 120.0

    def server_config(self, base: Path) -> McpServerConfig:
        """The server this entry configures (a bad combination raises `YamlToolError`)."""
        fields = self.model_dump(exclude={"type"})
        if self.cwd is not None:
            fields["cwd"] = str(base / self.cwd)
        try:
            return McpServerConfig.checked(**fields)
        except ValueError as exc:
            raise YamlToolError(str(exc)) from None


def resolve_tool(entry: str | ToolEntry, registered: Any, base: Path) -> Tool:
    """The tool an entry names. `registered` is the App; `base` the YAML file's folder."""
    if isinstance(entry, str):
        if entry in registered.tool_names:
            tool: Tool = registered.get_tool(entry)
            return tool
        raise YamlToolError(
            f"unknown tool {entry!r}; registered: {', '.join(registered.tool_names) or 'none'}"
        )
    if entry.options and entry.function not in BUILTINS:
        raise YamlToolError(
            f"tool {entry.name or entry.function!r}: options are for builtins only "
            f"({', '.join(BUILTINS)}), and {entry.function!r} is not one"
        )
    if entry.function in BUILTINS:
        return _builtin(entry, base)
    if entry.function in registered.tool_names:
        return _renamed(registered.get_tool(entry.function), entry)
    if ":" in entry.function:
        return _renamed(as_tool(_import(entry.function)), entry)
    raise YamlToolError(
        f"tool function {entry.function!r} is not a builtin ({', '.join(BUILTINS)}), not a "
        f"registered tool ({', '.join(registered.tool_names) or 'none'}), and not "
        "'module:attribute'"
    )


def _builtin(entry: ToolEntry, base: Path) -> Tool:
    name = entry.name or entry.function.replace(".", "_")
    try:
        if entry.function == "web.search":
            tool = web_search_tool(WebSearchOptions.model_validate(entry.options), name=name)
        elif entry.function == "web.fetch":
            tool = web_fetch_tool(WebFetchOptions.model_validate(entry.options), name=name)
        else:
            options = FsReadOptions.model_validate(entry.options)
            root = base / options.root if options.root else default_files_root()
            tool = fs_read_tool(root, name=name)
    except ValidationError as exc:
        problems = "; ".join(
            ".".join(str(part) for part in error["loc"]) + ": " + error["msg"]
            if error["loc"]
            else error["msg"]
            for error in exc.errors()
        )
        raise YamlToolError(f"tool {name!r} ({entry.function}): bad options: {problems}") from None
    if entry.description:
        tool.description = entry.description
    return tool


def _renamed(tool: Tool, entry: ToolEntry) -> Tool:
    if entry.name is None and entry.description is None:
        return tool
    return Tool(
        tool.func, name=entry.name or tool.name, description=entry.description or tool.description
    )


def _import(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise YamlToolError(
            f"cannot import {module_name!r} for tool function {target!r}: {exc}"
        ) from None
    try:
        value = getattr(module, attribute)
    except AttributeError:
        raise YamlToolError(f"module {module_name!r} has no attribute {attribute!r}") from None
    if not callable(value):
        raise YamlToolError(f"{target!r} is a {type(value).__name__}, not a function or @tool")
    return value
