"""A real MCP server for the MCP tests, written with the official `mcp` SDK (`MCPServer`).

Run it over stdio (`python -m tests.helpers.mcp_server`) or streamable HTTP on loopback
(`python -m tests.helpers.mcp_server --http PORT`). Its side effects go to the folder named by
`MCP_TEST_STATE` (one per test), so a test reads what each tool did and how often it ran:

- `search(query)`: canned knowledge-base hits, no side effect.
- `fail(reason)`: always an error result (the model must see it).
- `upsert(key, value)`: writes `store/<key>` (idempotent) and logs the attempt; the first call
  writes, then kills its own server process before answering (marker `crashed-upsert`).
- `append(line)`: appends to `ledger` (not idempotent) and logs the attempt; the first call kills
  its own server process before answering (marker `crashed-append`).
- `wait_for_release(key)`: logs the attempt, then blocks until the file `release` exists (a
  test kills the worker while it waits).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("sleuth-test-kb", log_level="WARNING")


def _state() -> Path:
    folder = Path(os.environ["MCP_TEST_STATE"])
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _log_attempt(tool: str, detail: str) -> None:
    with (_state() / "attempts").open("a") as log:
        log.write(f"{tool} {detail} pid={os.getpid()}\n")


def _crash_once(tool: str) -> None:
    marker = _state() / f"crashed-{tool}"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(17)  # the server dies mid-call: no response ever reaches the client


@server.tool()
def search(query: str) -> str:
    """Search the knowledge base; returns matching facts."""
    _log_attempt("search", query)
    return f"kb hit for {query!r}: Acme Corp was founded in 1987 in Oslo."


@server.tool()
def fail(reason: str) -> str:
    """A tool that always fails."""
    raise ToolError(f"the knowledge base refused: {reason}")


@server.tool()
def upsert(key: str, value: str) -> str:
    """Store value under key (idempotent)."""
    _log_attempt("upsert", key)
    store = _state() / "store"
    store.mkdir(exist_ok=True)
    (store / key).write_text(value)
    _crash_once("upsert")
    return f"stored {key}"


@server.tool()
def append(line: str) -> str:
    """Append a line to the ledger (not idempotent)."""
    _log_attempt("append", line)
    with (_state() / "ledger").open("a") as ledger:
        ledger.write(line + "\n")
    _crash_once("append")
    return "appended"


@server.tool()
def wait_for_release(key: str) -> str:
    """Block until the test releases the call, then answer."""
    _log_attempt("wait_for_release", key)
    release = _state() / "release"
    while not release.exists():
        time.sleep(0.05)
    return f"released {key}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
