"""`web.fetch`: read a page as a person would, once per URL.

The request: httpx, a timeout, a size cap, and every address the host resolves to (and every
redirect's) checked first, so a model cannot make a worker read from loopback, private,
link-local or otherwise internal addresses unless the tool is configured with
`allow_private: true`.

The reading: HTML goes through trafilatura's main-content extraction (title, author, date and the
article's text, without navigation, headers and footers); a PDF through pypdf, up to
`max_pdf_pages` pages; other text as it is. The charset comes from the `Content-Type` header, else
from the page's `<meta>`, else UTF-8.

The memory: each fetched body is kept in the content-addressed artifact store, and a named
pointer (`web.fetch <max_bytes> <url>`) records where, with the redirect chain and the response's
content type. A retried attempt, a regenerated step or another agent on a worker that shares the
store reads the page from there for `cache_seconds` instead of fetching it again; the SSRF
check still runs on every hop of the recorded chain first.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import time
from io import BytesIO
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from pydantic import BaseModel, Field, ValidationError

from sleuth._util.strict import StrictInput
from sleuth.runtime.artifacts import (
    ArtifactNotFoundError,
    ArtifactReferenceError,
    ArtifactStore,
    default_artifact_store,
    get_json,
    put_json,
)
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.log import get_logger

log = get_logger(__name__)

MAX_REDIRECTS = 5
_BINARY_TYPES = (
    "image/",
    "audio/",
    "video/",
    "font/",
    "application/octet-stream",
    "application/zip",
)
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE
)


class FetchRefused(SleuthError, PermissionError):
    """`web.fetch` would not fetch this URL (its scheme, or an internal address)."""


class PageUnreadable(SleuthError, ValueError):
    """The response came back but its content cannot be read as text (a broken or cut PDF)."""


class WebFetchOptions(StrictInput):
    """Options of `web.fetch` (the `options:` mapping of its tool entry)."""

    timeout_seconds: float = Field(default=15.0, gt=0, le=300)
    """Longest the whole request may take, redirects included (more than 0, at most 300)."""
    max_bytes: int = Field(default=2_000_000, ge=1, le=50_000_000)
    """Bytes read from the body at most; the rest is cut (and the output says so)."""
    max_chars: int = Field(default=20_000, ge=100, le=1_000_000)
    """Characters of text returned to the model at most."""
    max_pdf_pages: int = Field(default=30, ge=1, le=2_000)
    """Pages of a PDF read at most (the output says when there were more)."""
    cache_seconds: float = Field(default=3600.0, ge=0, le=30 * 86400)
    """How long a fetched page is read from the artifact store instead of fetched again
    (0: always fetch)."""
    allow_private: bool = False
    """Fetch loopback, private, link-local and other internal addresses too (off: refused)."""


class FetchedPage(BaseModel):
    """One fetched response, as the artifact store keeps it (the body is a separate artifact)."""

    url: str
    """The URL asked for."""
    hops: list[str]
    """Every URL requested, the first one and each redirect's target, in order."""
    content_type: str
    """The response's `Content-Type` header ("" if none)."""
    body: str
    """The artifact reference of the body (as read: at most `max_bytes`)."""
    cut: bool
    """Whether the body was longer than `max_bytes`."""
    fetched_at: float
    """When it was fetched (seconds since the epoch)."""

    @property
    def final_url(self) -> str:
        return self.hops[-1]


class PageText(BaseModel):
    """What `web.fetch` tells the model about a page."""

    url: str
    title: str | None = None
    author: str | None = None
    date: str | None = None
    text: str
    cut: bool = False

    def render(self, max_chars: int) -> str:
        header = [f"URL: {self.url}"]
        header += [
            f"{label}: {value}"
            for label, value in (
                ("Title", self.title),
                ("Author", self.author),
                ("Date", self.date),
            )
            if value
        ]
        text, cut = self.text, self.cut
        if len(text) > max_chars:
            text, cut = text[:max_chars], True
        return (
            "\n".join(header) + "\n\n" + text + ("\n[... cut: the page is longer]" if cut else "")
        )


async def fetch_text(
    url: str, options: WebFetchOptions, *, store: ArtifactStore | None = None
) -> str:
    """GET `url` (following redirects, each checked, or from the artifact store) and return the
    text the model sees: a short header (URL, title, author, date) and the main text, capped."""
    page, body = await fetch_page(
        url, options, store if store is not None else default_artifact_store()
    )
    reading = await asyncio.to_thread(read_page, body, page, options)
    return reading.render(options.max_chars)


async def fetch_page(
    url: str, options: WebFetchOptions, store: ArtifactStore
) -> tuple[FetchedPage, bytes]:
    """The response for `url` and its body: the stored one if it is fresh enough, else a new
    fetch, stored."""
    name = f"web.fetch {options.max_bytes} {url}"
    pointer = store.read_pointer(name)
    if pointer is not None and options.cache_seconds > 0:
        try:
            kept = FetchedPage.model_validate(get_json(store, pointer))
            fresh = time.time() - kept.fetched_at <= options.cache_seconds
            body = store.get_bytes(kept.body) if fresh else None
        except (ArtifactNotFoundError, ArtifactReferenceError, ValidationError) as exc:
            log.warning(
                "web.fetch: stored page unreadable, fetching again", url=url, error=str(exc)
            )
            body = None
        if body is not None:
            for hop in kept.hops:
                await _check_target(hop, options.allow_private)
            return kept, body
    page, body = await _fetch(url, options, store)
    store.swap_pointer(name, pointer, put_json(store, page))  # lost race: the other copy is as good
    return page, body


async def _fetch(
    url: str, options: WebFetchOptions, store: ArtifactStore
) -> tuple[FetchedPage, bytes]:
    hops: list[str] = []
    async with asyncio.timeout(options.timeout_seconds):
        async with httpx.AsyncClient(
            follow_redirects=False, timeout=options.timeout_seconds, trust_env=False
        ) as client:
            target = url
            for _ in range(MAX_REDIRECTS + 1):
                await _check_target(target, options.allow_private)
                hops.append(target)
                headers = {"Accept": "text/html, application/pdf, text/*;q=0.9, */*;q=0.5"}
                async with client.stream("GET", target, headers=headers) as response:
                    if response.is_redirect and "location" in response.headers:
                        target = urljoin(target, response.headers["location"])
                        continue
                    response.raise_for_status()
                    body, cut = await _read_capped(response, options.max_bytes)
                    page = FetchedPage(
                        url=url,
                        hops=hops,
                        content_type=response.headers.get("content-type", ""),
                        body=store.put_bytes(body),
                        cut=cut,
                        fetched_at=time.time(),
                    )
                    return page, body
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


def read_page(body: bytes, page: FetchedPage, options: WebFetchOptions) -> PageText:
    """The readable content of a fetched body: a PDF's pages, an HTML page's main content, or
    the text as it is."""
    media_type = page.content_type.split(";")[0].strip().lower()
    if media_type == "application/pdf" or body.startswith(b"%PDF-"):
        return _read_pdf(body, page, options.max_pdf_pages)
    if media_type.startswith(_BINARY_TYPES) or b"\x00" in body[:1024]:
        raise PageUnreadable(
            f"{page.final_url} is {media_type or 'binary'}, not a page; web.fetch reads HTML, "
            "text and PDF"
        )
    text = body.decode(_charset(body, page.content_type), errors="replace")
    if "html" in media_type or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        return _read_html(text, page)
    return PageText(url=page.final_url, text=text, cut=page.cut)


def _charset(body: bytes, content_type: str) -> str:
    """The charset the header names, else the one the page's `<meta>` names, else UTF-8."""
    found = re.search(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", content_type, re.IGNORECASE)
    meta = _META_CHARSET.search(body[:4096])
    for candidate in (found.group(1) if found else None, meta.group(1).decode() if meta else None):
        if candidate and _known_codec(candidate):
            return candidate
    return "utf-8"


def _known_codec(name: str) -> bool:
    try:
        "".encode(name)
    except LookupError:
        return False
    return True


def _read_html(html: str, page: FetchedPage) -> PageText:
    import trafilatura  # imported on first use: lxml and its models take a moment to load

    document = trafilatura.bare_extraction(
        html,
        url=page.final_url,
        with_metadata=True,
        include_comments=False,
        include_tables=True,
        # The page's own date markup only: an extensive search guesses from any year in the
        # text (a footer's "© 2026" becomes 2026-01-01), which a model would take as a fact.
        date_extraction_params={"extensive_search": False, "original_date": True},
    )
    metadata: dict[str, Any] = {}
    if document is not None:
        metadata = document if isinstance(document, dict) else document.as_dict()
    text = (metadata.get("text") or "").strip() or trafilatura.html2txt(html).strip()
    return PageText(
        url=page.final_url,
        title=metadata.get("title") or None,
        author=metadata.get("author") or None,
        date=metadata.get("date") or None,
        text=text,
        cut=page.cut,
    )


def _read_pdf(body: bytes, page: FetchedPage, max_pages: int) -> PageText:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(BytesIO(body))
        pages = [
            f"[page {number}]\n{(pdf_page.extract_text() or '').strip()}"
            for number, pdf_page in enumerate(reader.pages[:max_pages], start=1)
        ]
        total = len(reader.pages)
        info = reader.metadata
    except (PdfReadError, ValueError, KeyError) as exc:
        hint = " (the file was cut at max_bytes; raise it)" if page.cut else ""
        raise PageUnreadable(f"{page.final_url} is a PDF pypdf cannot read{hint}: {exc}") from None
    if total > max_pages:
        pages.append(f"[... {total - max_pages} more pages not read: max_pdf_pages is {max_pages}]")
    created = info.creation_date if info is not None else None
    return PageText(
        url=page.final_url,
        title=(info.title if info is not None else None) or None,
        author=(info.author if info is not None else None) or None,
        date=created.date().isoformat() if created is not None else None,
        text="\n\n".join(pages),
    )
