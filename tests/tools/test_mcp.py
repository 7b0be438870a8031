"""MCP tools against the real test server (`tests.helpers.mcp_server`), over stdio and HTTP:
the tool list, calls, tool errors, a server that dies mid-call, and the configuration forms."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from sleuth import App
from sleuth.apps.yaml_agents import load_agents_into
from sleuth.models.scripted import ScriptedModel, text
from sleuth.runtime.errors import InvalidSettingError
from sleuth.tools.mcp import MCP_CALL_LOST, McpServerCrashed, McpTool, McpUnavailableError
from tests.helpers.apps.mcp_app import ROOT, STATE_ENV, add_kb_server
from tests.helpers.ports import free_ports
from tests.helpers.worker_processes import wait_for

TOOLS = ["kb_append", "kb_fail", "kb_search", "kb_upsert", "kb_wait_for_release"]


@pytest.fixture
def http_kb(tmp_path: Path) -> Iterator[str]:
    """The MCP test server over streamable HTTP on loopback; yields its URL."""
    port = free_ports()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.mcp_server", "--http", str(port)],
        cwd=ROOT,
        env={**os.environ, STATE_ENV: str(tmp_path / "http-state")},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        yield url
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


async def _listening(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as client:
            await client.get(url, timeout=1.0)
        return True
    except httpx.HTTPError:
        return False


@pytest_asyncio.fixture
async def stdio_app(tmp_path: Path) -> AsyncIterator[App]:
    app = App()
    add_kb_server(app, tmp_path, idempotent_tools=["upsert"])
    async with app.mcp.running():
        yield app


def _tool(app: App, name: str) -> McpTool:
    tool = next(t for t in app.mcp_tools("kb") if t.name == name)
    assert isinstance(tool, McpTool)
    return tool


def _attempts(state: Path, tool: str) -> list[str]:
    log = state / "attempts"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(f"{tool} ")]


async def test_a_stdio_server_is_listed_once_and_its_tools_answer(
    stdio_app: App, tmp_path: Path
) -> None:
    tools = stdio_app.mcp_tools("kb")
    assert sorted(t.name for t in tools) == TOOLS
    search = _tool(stdio_app, "kb_search")
    assert search.spec().parameters["properties"]["query"]["type"] == "string"
    assert search.spec().parameters["required"] == ["query"]
    assert search.description == "Search the knowledge base; returns matching facts."
    assert search.summary({"query": "acme"}) == 'mcp kb.search({"query": "acme"})'

    result = await search.invoke({"query": "acme"})
    assert result.ok and "founded in 1987" in result.content
    failed = await _tool(stdio_app, "kb_fail").invoke({"reason": "no such record"})
    assert not failed.ok
    assert "the knowledge base refused: no such record" in failed.content
    assert stdio_app.mcp.connection("kb").starts == 1


async def test_a_streamable_http_server_is_listed_and_called(http_kb: str) -> None:
    await wait_for(lambda: _listening(http_kb), "the MCP HTTP server")
    app = App()
    add_kb_server(app, Path("."), url=http_kb)
    async with app.mcp.running():
        assert sorted(t.name for t in app.mcp_tools("kb")) == TOOLS
        result = await _tool(app, "kb_search").invoke({"query": "acme"})
        failed = await _tool(app, "kb_fail").invoke({"reason": "closed"})
    assert result.ok and "founded in 1987" in result.content
    assert not failed.ok and "refused: closed" in failed.content


async def test_a_non_idempotent_call_whose_server_dies_is_not_retried(
    stdio_app: App, tmp_path: Path
) -> None:
    result = await _tool(stdio_app, "kb_append").invoke({"line": "paid invoice 7"})
    assert not result.ok and result.error == MCP_CALL_LOST
    assert "not retried" in result.content and "may or may not have taken effect" in result.content
    assert len(_attempts(tmp_path, "append")) == 1
    # The next call restarts the server.
    again = await _tool(stdio_app, "kb_search").invoke({"query": "acme"})
    assert again.ok
    assert stdio_app.mcp.connection("kb").starts == 2


async def test_an_idempotent_call_whose_server_dies_raises_a_retryable_error(
    stdio_app: App, tmp_path: Path
) -> None:
    upsert = _tool(stdio_app, "kb_upsert")
    with pytest.raises(McpServerCrashed, match="closed the connection during 'upsert'"):
        await upsert.invoke({"key": "acme", "value": "1987"})
    result = await upsert.invoke({"key": "acme", "value": "1987"})
    assert result.ok and result.content == "stored acme"
    assert len(_attempts(tmp_path, "upsert")) == 2
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["acme"]


async def test_a_call_past_its_timeout_is_lost_or_retried_by_idempotency(tmp_path: Path) -> None:
    app = App()
    add_kb_server(app, tmp_path, timeout_seconds=0.5)
    async with app.mcp.running():
        result = await _tool(app, "kb_wait_for_release").invoke({"key": "k1"})
        assert not result.ok and result.error == MCP_CALL_LOST
        assert "no answer to 'wait_for_release' within 0.5 s" in result.content
    idempotent = App()
    add_kb_server(idempotent, tmp_path, timeout_seconds=0.5, idempotent=True)
    async with idempotent.mcp.running():
        with pytest.raises(McpServerCrashed, match="within 0.5 s"):
            await _tool(idempotent, "kb_wait_for_release").invoke({"key": "k2"})


async def test_a_server_that_cannot_start_says_so(tmp_path: Path) -> None:
    app = App()
    app.mcp_server("kb", command=str(tmp_path / "no-such-server"))
    with pytest.raises(McpUnavailableError, match="could not be started"):
        await app.mcp.start()
    with pytest.raises(McpUnavailableError, match="not listed yet"):
        app.mcp_tools("kb")


def test_a_server_needs_exactly_one_of_command_or_url() -> None:
    app = App()
    with pytest.raises(InvalidSettingError, match="exactly one of command"):
        app.mcp_server("kb")
    with pytest.raises(InvalidSettingError, match="exactly one of command"):
        app.mcp_server("kb", command="x", url="http://127.0.0.1:1/mcp")
    app.mcp_server("kb", command="x")
    with pytest.raises(InvalidSettingError, match="already registered"):
        app.mcp_server("kb", url="http://127.0.0.1:1/mcp")


async def test_a_yaml_agent_gets_the_tools_of_its_mcp_server(tmp_path: Path) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        f"""
agents:
  - id: librarian
    model: {{provider: app, model: echo}}
    tools:
      - name: kb
        type: mcp
        command: {sys.executable}
        args: ["-m", "tests.helpers.mcp_server"]
        cwd: {ROOT}
        env: {{{STATE_ENV}: "{tmp_path}"}}
        idempotent_tools: [search]
    approval_tools: [kb_upsert]
"""
    )
    app = App()
    app.model("echo", ScriptedModel([text("done")]))
    load_agents_into(app, agents)
    assert app.mcp.names == ["kb"]
    async with app.mcp.running():
        agent = app.new_agent("librarian")
        assert sorted(agent.tools) == TOOLS  # type: ignore[attr-defined]
        search = agent.tools["kb_search"]  # type: ignore[attr-defined]
        assert isinstance(search, McpTool) and search.idempotent
        assert not agent.tools["kb_append"].idempotent  # type: ignore[attr-defined]
        result = await search.invoke({"query": "acme"})
    assert result.ok


def test_a_yaml_mcp_entry_needs_a_command_or_a_url(tmp_path: Path) -> None:
    agents = tmp_path / "agents.yaml"
    agents.write_text(
        """
agents:
  - id: librarian
    tools:
      - {name: kb, type: mcp}
"""
    )
    with pytest.raises(ValueError, match="exactly one of command"):
        load_agents_into(App(), agents)
