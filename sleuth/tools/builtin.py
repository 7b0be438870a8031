"""The builtin tools YAML agents name as `function: web.fetch` and `function: fs.read`.

`web.fetch` GETs a page over HTTP(S) with httpx: a timeout, a size cap, HTML turned into text,
and every address the host resolves to (and every redirect's) checked first, so a model cannot
make a worker read from loopback, private, link-local or otherwise internal addresses unless the
tool is configured with `allow_private: true`. `fs.read` reads a text file under one folder,
sandboxed as `FilesystemBackend` is (no `..`, no absolute paths, no symlinks).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from pydantic import Field

from sleuth._util.strict import StrictInput
from sleuth.deepagent.fs import FilesystemBackend
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.paths import sleuth_home
from sleuth.tools import Tool

MAX_REDIRECTS = 5


class FetchRefused(SleuthError, PermissionError):
    """`web.fetch` would not fetch this URL (its scheme, or an internal address)."""


class WebFetchOptions(StrictInput):
    """Options of `web.fetch` (the `options:` mapping of its tool entry)."""

    timeout_seconds: float = Field(default=15.0, gt=0, le=300)
    """Longest the whole request may take, redirects included (more than 0, at most 300)."""
    max_bytes: int = Field(default=2_000_000, ge=1, le=50_000_000)
    """Bytes read from the body at most; the rest is cut (and the output says so)."""
    max_chars: int = Field(default=20_000, ge=100, le=1_000_000)
    """Characters of text returned to the model at most."""
    allow_private: bool = False
    """Fetch loopback, private, link-local and other internal addresses too (off: refused)."""


class FsReadOptions(StrictInput):
    """Options of `fs.read`."""

    root: str | None = None
    """The folder files are read from (relative to the YAML file); default
    `$SLEUTH_HOME/files`."""


def web_fetch_tool(options: WebFetchOptions | None = None, *, name: str = "web_fetch") -> Tool:
    """The `web.fetch` builtin as a tool named `name`."""
    settings = options or WebFetchOptions()

    async def web_fetch(url: str) -> str:
        """Fetch a web page over HTTP(S) and return its text."""
        return await fetch_text(url, settings)

    return Tool(web_fetch, name=name)


def fs_read_tool(root: str | Path, *, name: str = "fs_read") -> Tool:
    """The `fs.read` builtin as a tool named `name`, reading under `root`."""
    backend = FilesystemBackend(root)

    def fs_read(path: str) -> str:
        """Read a text file by its path relative to the shared folder."""
        return backend.read(path)

    return Tool(fs_read, name=name)


BUILTINS: dict[str, Callable[..., Tool]] = {"web.fetch": web_fetch_tool, "fs.read": fs_read_tool}
"""Builtin tool names, as YAML's `function:` gives them."""


def default_files_root() -> Path:
    return sleuth_home() / "files"


async def fetch_text(url: str, options: WebFetchOptions) -> str:
    """GET `url` (following redirects, each checked) and return its text, capped."""
    async with asyncio.timeout(options.timeout_seconds):
        async with httpx.AsyncClient(
            follow_redirects=False, timeout=options.timeout_seconds, trust_env=False
        ) as client:
            for _ in range(MAX_REDIRECTS + 1):
                await _check_target(url, options.allow_private)
                async with client.stream(
                    "GET", url, headers={"Accept": "text/html, text/*"}
                ) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    response.raise_for_status()
                    body, cut = await _read_capped(response, options.max_bytes)
                    text = _as_text(body, response)
                    return _capped(text, options.max_chars, cut)
    raise FetchRefused(f"{url} redirected more than {MAX_REDIRECTS} times; fetch the final URL")


async def _check_target(url: str, allow_private: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchRefused(f"only http(s) URLs with a host can be fetched, not {url!r}")
    if allow_private:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    infos = await asyncio.get_running_loop().getaddrinfo(
        parts.hostname, port, type=socket.SOCK_STREAM
    )
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global or address.is_multicast:
            raise FetchRefused(
                f"{parts.hostname} resolves to {address}, an internal address; web.fetch reads "
                "public addresses only (set allow_private: true in the tool's options to allow it)"
            )


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _as_text(body: bytes, response: httpx.Response) -> str:
    text = body.decode(response.encoding or "utf-8", errors="replace")
    content_type = response.headers.get("content-type", "")
    if "html" in content_type or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        return html_to_text(text)
    return text


def _capped(text: str, max_chars: int, cut: bool) -> str:
    if len(text) > max_chars:
        text, cut = text[:max_chars], True
    return text + ("\n[... cut: the page is longer]" if cut else "")


class _TextExtractor(HTMLParser):
    _SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._SKIPPED:
            self.skipping += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIPPED and self.skipping:
            self.skipping -= 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The visible text of an HTML page: scripts and styles dropped, one block per line."""
    extractor = _TextExtractor()
    extractor.feed(html)
    extractor.close()
    lines = (" ".join(line.split()) for line in "".join(extractor.parts).splitlines())
    return "\n".join(line for line in lines if line)
