"""The builtin tools YAML agents name as `function: web.search`, `web.fetch` and `fs.read`.

`web.search` asks a search provider (SearXNG, Brave, Tavily or DuckDuckGo; see
`sleuth.tools.search`). `web.fetch` reads one page as a person would, through the SSRF guard, and
keeps it in the artifact store (see `sleuth.tools.pages`). `fs.read` reads a text file under one
folder, sandboxed as `FilesystemBackend` is (no `..`, no absolute paths, no symlinks).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sleuth._util.strict import StrictInput
from sleuth.deepagent.fs import FilesystemBackend
from sleuth.runtime.paths import sleuth_home
from sleuth.tools import Tool
from sleuth.tools.pages import FetchRefused, WebFetchOptions, fetch_text
from sleuth.tools.search import SearchResult, WebSearchOptions, render_results, search


class FsReadOptions(StrictInput):
    """Options of `fs.read`."""

    root: str | None = None
    """The folder files are read from (relative to the YAML file); default
    `$SLEUTH_HOME/files`."""


def web_fetch_tool(options: WebFetchOptions | None = None, *, name: str = "web_fetch") -> Tool:
    """The `web.fetch` builtin as a tool named `name`."""
    settings = options or WebFetchOptions()

    async def web_fetch(url: str) -> str:
        """Read a web page or PDF: its title, author, date and main text (navigation left out)."""
        return await fetch_text(url, settings)

    return Tool(web_fetch, name=name)


def web_search_tool(options: WebSearchOptions | None = None, *, name: str = "web_search") -> Tool:
    """The `web.search` builtin as a tool named `name` (its provider's key comes from the
    environment of the process that runs it, never from an argument)."""
    settings = options or WebSearchOptions()

    async def web_search(query: str) -> str:
        """Search the web; returns ranked results (title, url, snippet, date) to read with a
        fetch tool."""
        return render_results(query, await search(query, settings))

    return Tool(web_search, name=name)


def fs_read_tool(root: str | Path, *, name: str = "fs_read") -> Tool:
    """The `fs.read` builtin as a tool named `name`, reading under `root`."""
    backend = FilesystemBackend(root)

    def fs_read(path: str) -> str:
        """Read a text file by its path relative to the shared folder."""
        return backend.read(path)

    return Tool(fs_read, name=name)


BUILTINS: dict[str, Callable[..., Tool]] = {
    "web.search": web_search_tool,
    "web.fetch": web_fetch_tool,
    "fs.read": fs_read_tool,
}
"""Builtin tool names, as YAML's `function:` gives them."""


def default_files_root() -> Path:
    return sleuth_home() / "files"


__all__ = [
    "BUILTINS",
    "FetchRefused",
    "FsReadOptions",
    "SearchResult",
    "WebFetchOptions",
    "WebSearchOptions",
    "default_files_root",
    "fetch_text",
    "fs_read_tool",
    "web_fetch_tool",
    "web_search_tool",
]
