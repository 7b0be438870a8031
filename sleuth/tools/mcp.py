"""Tools from MCP servers: one connection per server per worker process, restarted when it dies.

A server is configured once, by name, in the App (`app.mcp_server("kb", command="kb-server")`,
or `url="http://127.0.0.1:8000/mcp"` for streamable HTTP) or in a YAML agent's tool list
(`{name: kb, type: mcp, command: kb-server}`). A worker starts every configured server when it
starts, lists its tools once and keeps the list (`McpServers.running`); an agent factory then
gets them with `app.mcp_tools("kb")`, named `kb_<tool>` for the model.

A call whose server dies mid-call (the connection closes before the answer) is:

- retried when the tool is marked idempotent (`idempotent=True` for the whole server, or its
  name in `idempotent_tools`): the call raises `McpServerCrashed`, a retryable error, so the
  durable step is retried and the next attempt restarts the server and calls again;
- not retried otherwise: the model gets a tool error saying the call may or may not have taken
  effect, and decides what to do.

Durable runs call each MCP tool in its own Temporal activity (`agent.mcp_tool`, see
`sleuth.activities.agent`); docs/mcp.md has the timeouts and retry policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError, model_validator

from sleuth._util.strict import StrictInput
from sleuth.runtime.errors import (
    InvalidSettingError,
    MissingExtraError,
    SleuthError,
    UnknownNameError,
)
from sleuth.runtime.log import get_logger
from sleuth.tools import Tool, ToolResult, render_output, validation_problems
from sleuth.usage.limits import UsageAccount

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult
    from mcp.types import Tool as McpToolSchema

log = get_logger(__name__)

SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"
MCP_CALL_LOST = "mcp_call_lost"
"""The error of a non-idempotent call whose server (or worker) died before it answered."""
MCP_TOOL_ERROR = "mcp_tool_error"
"""The error of a call the server answered with `isError`."""
_PROBE_SECONDS = 10.0
MCP_CHILD = str(Path(__file__).with_name("mcp_child.py"))
"""Run as a script (not `-m`): it imports nothing of Sleuth, so it starts at once."""


class McpServerCrashed(SleuthError, ConnectionError):
    """An idempotent call got no answer (its server died, or it timed out): retryable, and the
    next attempt restarts a dead server."""


class McpUnavailableError(SleuthError, ConnectionError):
    """The server could not be started or reached (retryable: it may come back)."""


class McpServerConfig(StrictInput):
    """One MCP server a worker connects to: a command (stdio) or a URL (streamable HTTP)."""

    name: str = Field(pattern=SERVER_NAME_PATTERN)
    """What agents and workflow inputs call the server; its tools reach the model as
    `<name>_<tool>`."""
    command: str | None = Field(default=None, min_length=1)
    """The program that serves MCP over stdio (started by the worker, one process per worker)."""
    args: list[str] = Field(default_factory=list)
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables added to the SDK's safe default environment (PATH, HOME, ...); the
    worker's other variables (keys!) are not passed on."""
    cwd: str | None = None
    """The folder the command runs in (default: the worker's)."""
    url: str | None = Field(default=None, pattern=r"^https?://")
    """The streamable-HTTP endpoint, e.g. `http://127.0.0.1:8000/mcp`."""
    idempotent: bool = False
    """Every tool of this server may be called twice with the same effect: a call whose server
    died is retried on a restarted server."""
    idempotent_tools: list[str] = Field(default_factory=list)
    """The tools (their MCP names) that are idempotent when the whole server is not."""
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    """Longest one call may wait for its answer."""
    startup_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """Longest starting the server and listing its tools may take."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise InvalidSettingError(
                f"MCP server {self.name!r} needs exactly one of command= (stdio) or url= "
                "(streamable HTTP)"
            )
        if self.url is not None and self.args:
            raise InvalidSettingError(f"MCP server {self.name!r}: args= is for command= servers")
        return self

    @classmethod
    def checked(cls, **fields: Any) -> McpServerConfig:
        """The config of `fields`; a bad one raises `InvalidSettingError` saying what is wrong."""
        try:
            return cls.model_validate(fields)
        except ValidationError as exc:
            problems = validation_problems(exc, whole="config")
            raise InvalidSettingError(
                f"MCP server {fields.get('name')!r}: {problems.replace('Value error, ', '')}"
            ) from None

    def is_idempotent(self, tool: str) -> bool:
        return self.idempotent or tool in self.idempotent_tools

    def describe(self) -> str:
        return self.url or " ".join([self.command or "", *self.args]).strip()


class McpConnectionLost(SleuthError, ConnectionError):
    """A call got no answer: the connection closed while it waited (the server died), or the
    server's `timeout_seconds` passed."""


class McpConnection:
    """The connection to one server in this process: started on first use (or by
    `McpServers.running`), restarted when it is found dead, its tool list cached."""

    def __init__(self, config: McpServerConfig):
        self.config = config
        self.starts = 0
        """How often the server was (re)started in this process."""
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._tools: list[McpToolSchema] | None = None

    @property
    def listed(self) -> list[McpToolSchema] | None:
        """The cached tool list (None until the server was listed)."""
        return self._tools

    async def list_tools(self) -> list[McpToolSchema]:
        """The server's tools, listed once per process."""
        if self._tools is None:
            client = await self._connected()
            tools: list[McpToolSchema] = []
            cursor: str | None = None
            while True:
                page = await _with_timeout(
                    client.list_tools(cursor=cursor),
                    self.config.startup_timeout_seconds,
                    f"listing the tools of MCP server {self.config.name!r}",
                )
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            self._tools = tools
        return self._tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call `tool`; raises `McpConnectionLost` when the server dies before it answers."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = await self._connected()
        try:
            return await client.call_tool(
                tool, arguments, read_timeout_seconds=self.config.timeout_seconds
            )
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise McpConnectionLost(
                    f"MCP server {self.config.name!r} gave no answer to {tool!r} within "
                    f"{self.config.timeout_seconds:g} s"
                ) from exc
            if exc.code != CONNECTION_CLOSED:
                raise
            await self._discard(client)
            raise McpConnectionLost(
                f"MCP server {self.config.name!r} closed the connection during {tool!r}"
            ) from exc

    async def aclose(self) -> None:
        """Stop the server (a stdio process ends) and forget the connection."""
        if self._client is not None:
            await self._discard(self._client)

    async def _connected(self) -> Client:
        """A live client: the current one if it still answers, else a freshly started server.

        The probe (an uncached tool listing; MCP's ping is gone from the current protocol) tells
        a server that died between calls, which is safe to restart before any call, from one
        that dies during a call, which may have had an effect."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            client = self._client
            if client is not None and self._holder is not None and not self._holder.done():
                try:
                    await asyncio.wait_for(client.list_tools(cache_mode="bypass"), _PROBE_SECONDS)
                    return client
                except MCPError as exc:
                    if exc.code != CONNECTION_CLOSED:
                        return client  # it answered, if with an error
                    log.warning("mcp.server.lost", server=self.config.name, error=str(exc))
                except (TimeoutError, OSError) as exc:
                    log.warning("mcp.server.lost", server=self.config.name, error=repr(exc))
                await self._discard(client)
            return await self._start()

    async def _start(self) -> Client:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._stop = stop = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready, stop), name=f"mcp:{self.config.name}")
        try:
            client = await asyncio.wait_for(
                asyncio.shield(ready), self.config.startup_timeout_seconds
            )
        except BaseException as exc:
            stop.set()
            if isinstance(exc, McpUnavailableError):
                raise
            if isinstance(exc, Exception):
                raise McpUnavailableError(
                    f"MCP server {self.config.name!r} ({self.config.describe()}) did not start "
                    f"within {self.config.startup_timeout_seconds:g} s: {exc!r}"
                ) from exc
            raise
        self._client = client
        self.starts += 1
        log.info("mcp.server.started", server=self.config.name, starts=self.starts)
        return client

    async def _hold(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Keep the client open in its own task (the SDK's transports must be entered and left
        in one task) until `stop` is set."""
        try:
            async with _client(self.config) as client:
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except Exception as exc:  # a server that died leaves its transport failing on exit
            if not ready.done():
                ready.set_exception(
                    McpUnavailableError(
                        f"MCP server {self.config.name!r} ({self.config.describe()}) could not "
                        f"be started: {_describe(exc)}"
                    )
                )
            else:
                log.info("mcp.server.closed", server=self.config.name, error=_describe(exc))

    async def _discard(self, client: Client) -> None:
        if self._client is client:
            self._client = None
        if self._stop is not None:
            self._stop.set()
        holder = self._holder
        if holder is not None:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(holder), 10.0)


@contextlib.asynccontextmanager
async def _client(config: McpServerConfig) -> AsyncIterator[Client]:
    try:
        from mcp import Client, StdioServerParameters
    except ImportError as exc:
        raise MissingExtraError(
            "MCP servers need the official MCP SDK: pip install 'sleuth[mcp]'"
        ) from exc
    target: StdioServerParameters | str
    if config.command is not None:
        command, args = config.command, config.args
        if sys.platform == "linux":
            # The server dies with this worker, even one killed with SIGKILL (`mcp_child`).
            command, args = sys.executable, [MCP_CHILD, str(os.getpid()), command, *args]
        target = StdioServerParameters(
            command=command, args=args, env=config.env or None, cwd=config.cwd
        )
    else:
        assert config.url is not None
        target = config.url
    async with Client(target, read_timeout_seconds=config.timeout_seconds) as client:
        yield client


async def _with_timeout(awaitable: Any, seconds: float, what: str) -> Any:
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except TimeoutError:
        raise McpUnavailableError(f"{what} took longer than {seconds:g} s") from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def check_server_names(value: Any) -> list[str]:
    """`value` as a list of MCP server names; anything else (a command, a URL, a config object)
    is refused: a workflow input names servers the worker configured, it never defines one."""
    if not isinstance(value, list):
        value = [value]
    for item in value:
        if not isinstance(item, str) or not re.fullmatch(SERVER_NAME_PATTERN, item):
            raise InvalidSettingError(
                f"mcp_servers takes the names of MCP servers configured on the worker "
                f"(app.mcp_server or a YAML `type: mcp` tool), never a command, URL or config; "
                f"got {item!r}"
            )
    return list(value)


def tool_name(server: str, tool: str) -> str:
    """What the model calls `tool` of `server` (letters, digits, `_` and `-`; 64 at most)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}_{tool}")[:64]


async def _never(**_: Any) -> None:
    raise NotImplementedError  # McpTool overrides invoke; Tool's signature needs a function


class McpTool(Tool):
    """One tool of an MCP server, called over the worker's connection to it."""

    def __init__(self, connection: McpConnection, schema: McpToolSchema):
        super().__init__(_never, name=tool_name(connection.config.name, schema.name))
        self.connection = connection
        self.server = connection.config.name
        self.mcp_name = schema.name
        self.description = (schema.description or schema.title or schema.name).strip()
        self.parameters = dict(schema.input_schema or {"type": "object", "properties": {}})
        self.idempotent = connection.config.is_idempotent(schema.name)

    def summary(self, arguments: dict[str, Any]) -> str:
        """One line for the Web UI: `mcp kb.search({"query": "acme"})`."""
        shown = json.dumps(arguments, ensure_ascii=False, default=str)
        return f"mcp {self.server}.{self.mcp_name}({shown})"

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return dict(arguments)  # the server validates against its own schema

    async def invoke(
        self, arguments: dict[str, Any], account: UsageAccount | None = None
    ) -> ToolResult:
        from mcp import MCPError

        try:
            result = await self.connection.call(self.mcp_name, arguments)
        except McpConnectionLost as lost:
            if self.idempotent:
                raise McpServerCrashed(
                    f"{lost}; {self.server}.{self.mcp_name} is idempotent, so the call is "
                    "retried (on a restarted server if it died)"
                ) from lost
            return self.lost_result(str(lost))
        except MCPError as exc:
            return ToolResult(
                ok=False,
                content=f"Tool {self.name!r} failed: MCP error {exc.code}: {exc.message}",
                error=f"{MCP_TOOL_ERROR}: {exc.message}",
            )
        text = _result_text(result)
        if result.is_error:
            return ToolResult(
                ok=False,
                content=f"Tool {self.name!r} failed: {text}",
                error=f"{MCP_TOOL_ERROR}: {text[:200]}",
            )
        return ToolResult(ok=True, content=text)

    def lost_result(self, why: str) -> ToolResult:
        """The tool error of a non-idempotent call that was cut off: not retried, since it may
        or may not have taken effect."""
        return ToolResult(
            ok=False,
            content=(
                f"Tool {self.name!r} did not answer ({why}). {self.server}."
                f"{self.mcp_name} is not marked idempotent, so the call was not retried; it may "
                "or may not have taken effect. Check before calling it again."
            ),
            error=MCP_CALL_LOST,
        )


def _result_text(result: CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else block.model_dump_json(exclude_none=True))
    if not parts and result.structured_content is not None:
        return render_output(result.structured_content)
    return "\n".join(parts)


class McpServers:
    """The MCP servers of one App and this process's connections to them."""

    def __init__(self) -> None:
        self._connections: dict[str, McpConnection] = {}
        self._running = 0

    def add(self, config: McpServerConfig) -> McpServerConfig:
        existing = self._connections.get(config.name)
        if existing is not None:
            if existing.config == config:
                return config  # the same server declared twice (two YAML agents share it)
            raise InvalidSettingError(
                f"MCP server {config.name!r} is already configured differently "
                f"({existing.config.describe()}); give this one another name"
            )
        self._connections[config.name] = McpConnection(config)
        return config

    @property
    def names(self) -> list[str]:
        return sorted(self._connections)

    def connection(self, name: str) -> McpConnection:
        try:
            return self._connections[name]
        except KeyError:
            raise UnknownNameError("MCP server", name, list(self._connections)) from None

    def tools(self, name: str) -> list[Tool]:
        """The tools of server `name`, from the list taken when the worker started."""
        connection = self.connection(name)
        listed = connection.listed
        if listed is None:
            raise McpUnavailableError(
                f"the tools of MCP server {name!r} are not listed yet: a worker with "
                "SleuthPlugin lists them when it starts; elsewhere, run the agent inside "
                "`async with app.mcp.running():`"
            )
        return [McpTool(connection, schema) for schema in listed]

    async def start(self, names: Sequence[str] | None = None) -> None:
        """Start the servers (all by default) and list their tools."""
        await asyncio.gather(*(self.connection(name).list_tools() for name in names or self.names))

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._connections.values()))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[McpServers]:
        """Start every server and list its tools; stop them all when the last of the blocks
        that share them (several workers of one App in a process) ends."""
        self._running += 1
        try:
            await self.start()
            yield self
        finally:
            self._running -= 1
            if self._running == 0:
                await self.aclose()
