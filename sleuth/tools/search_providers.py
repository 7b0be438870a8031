"""The builtin search providers of `web.search`: SearXNG, Brave, Tavily and DuckDuckGo.

Each turns its provider's answer into `SearchResult`s in the provider's order and maps HTTP
failures as `sleuth.tools.search` describes; settings and keys come from the environment.
"""

from __future__ import annotations

import asyncio
import html
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from sleuth.models.base import RetryableModelError
from sleuth.models.errors import is_retryable_status, parse_retry_after
from sleuth.runtime.redact import redact
from sleuth.tools.search_types import (
    BUILTIN_PROVIDERS,
    ProviderFunction,
    SearchResult,
    WebSearchError,
    WebSearchOptions,
)

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"
DUCKDUCKGO_URL = "https://html.duckduckgo.com/html/"


def _with_site_operators(query: str, options: WebSearchOptions) -> str:
    """The query with `site:` operators, for providers that cannot filter domains themselves."""
    allowed = [f"site:{domain}" for domain in options.allowed_domains]
    parts = [query]
    if len(allowed) == 1:
        parts += allowed
    elif allowed:
        parts.append("(" + " OR ".join(allowed) + ")")
    parts += [f"-site:{domain}" for domain in options.blocked_domains]
    return " ".join(parts)


def _plain(text: Any) -> str:
    """Provider text as plain text (Brave marks matches with `<strong>`; entities unescaped)."""
    if not isinstance(text, str):
        return ""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


def _setting(name: str, provider: str, what: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise WebSearchError(
            f"web.search provider {provider!r} needs {name} ({what}) in the environment of the "
            "worker that runs the tool"
        )
    return value


# -- HTTP ------------------------------------------------------------------------------------


async def _request_json(
    provider: str,
    method: str,
    url: str,
    options: WebSearchOptions,
    *,
    key_env: str = "",
    secret: str = "",
    **request: Any,
) -> Any:
    secrets = [secret] if secret else []
    try:
        async with httpx.AsyncClient(timeout=options.timeout_seconds, trust_env=False) as client:
            response = await client.request(method, url, **request)
    except httpx.TransportError as exc:
        what = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
        raise RetryableModelError(
            redact(f"{provider} search request {what} ({url}): {exc}", secrets=secrets)
        ) from None
    raise_for_status(
        provider, response.status_code, response.headers, response.text, key_env, secrets
    )
    try:
        return response.json()
    except ValueError:
        raise WebSearchError(
            f"{provider} answered HTTP {response.status_code} without JSON ({url}); check that "
            "the URL points at its search API"
        ) from None


def raise_for_status(
    provider: str,
    status_code: int,
    headers: Mapping[str, str],
    body: str,
    key_env: str = "",
    secrets: list[str] | None = None,
) -> None:
    """Nothing for a 2xx; `RetryableModelError` (with `Retry-After`) for 408/409/429/5xx;
    `WebSearchError` for any other status."""
    if 200 <= status_code < 300:
        return
    said = redact(" ".join(body.split())[:300], secrets=secrets or [])
    if is_retryable_status(status_code):
        retry_after = parse_retry_after(headers)
        wait = f"; retry after {retry_after:g}s" if retry_after is not None else ""
        raise RetryableModelError(
            f"{provider} search returned HTTP {status_code} (transient): {said}{wait}",
            status_code=status_code,
            retry_after=retry_after,
        )
    hint = "the provider refused the request"
    if status_code in (401, 403) and key_env:
        hint = f"the key was refused; check {key_env}"
    elif status_code == 403 and provider == "SearXNG":
        hint = "enable the json format (search.formats) in the instance's settings.yml"
    raise WebSearchError(f"{provider} search returned HTTP {status_code}: {hint}. It said: {said}")


# -- providers -------------------------------------------------------------------------------


async def searxng(query: str, wanted: int, options: WebSearchOptions) -> list[SearchResult]:
    """A SearXNG instance's JSON API (`GET /search?format=json`)."""
    base = _setting("SEARXNG_URL", "searxng", "the base URL of a SearXNG instance")
    answer = await _request_json(
        "SearXNG",
        "GET",
        base.rstrip("/") + "/search",
        options,
        params={"q": _with_site_operators(query, options), "format": "json", "pageno": 1},
    )
    return [
        SearchResult(
            rank=rank,
            title=_plain(item.get("title")),
            url=item["url"],
            snippet=_plain(item.get("content")),
            date=item.get("publishedDate") or None,
        )
        for rank, item in enumerate(_items(answer, "results"), start=1)
    ][:wanted]


async def brave(query: str, wanted: int, options: WebSearchOptions) -> list[SearchResult]:
    """Brave's Web Search API (`GET /res/v1/web/search`, key in `X-Subscription-Token`)."""
    key = _setting("BRAVE_API_KEY", "brave", "a Brave Search API key")
    answer = await _request_json(
        "Brave",
        "GET",
        os.environ.get("SLEUTH_BRAVE_URL") or BRAVE_URL,
        options,
        key_env="BRAVE_API_KEY",
        secret=key,
        params={"q": _with_site_operators(query, options), "count": wanted},
        headers={"X-Subscription-Token": key, "Accept": "application/json"},
    )
    web = answer.get("web") if isinstance(answer, dict) else None
    return [
        SearchResult(
            rank=rank,
            title=_plain(item.get("title")),
            url=item["url"],
            snippet=_plain(item.get("description")),
            date=item.get("page_age") or item.get("age") or None,
        )
        for rank, item in enumerate(_items(web, "results"), start=1)
    ]


async def tavily(query: str, wanted: int, options: WebSearchOptions) -> list[SearchResult]:
    """Tavily's search API (`POST /search`, key as a bearer token); filters domains itself."""
    key = _setting("TAVILY_API_KEY", "tavily", "a Tavily API key")
    body: dict[str, Any] = {"query": query, "max_results": wanted, "search_depth": "basic"}
    if options.allowed_domains:
        body["include_domains"] = options.allowed_domains
    if options.blocked_domains:
        body["exclude_domains"] = options.blocked_domains
    answer = await _request_json(
        "Tavily",
        "POST",
        os.environ.get("SLEUTH_TAVILY_URL") or TAVILY_URL,
        options,
        key_env="TAVILY_API_KEY",
        secret=key,
        json=body,
        headers={"Authorization": f"Bearer {key}"},
    )
    return [
        SearchResult(
            rank=rank,
            title=_plain(item.get("title")),
            url=item["url"],
            snippet=_plain(item.get("content")),
            date=item.get("published_date") or None,
        )
        for rank, item in enumerate(_items(answer, "results"), start=1)
    ]


async def duckduckgo(query: str, wanted: int, options: WebSearchOptions) -> list[SearchResult]:
    """DuckDuckGo's HTML results page, requested and parsed by the `ddgs` package's engine."""
    url = os.environ.get("SLEUTH_DUCKDUCKGO_URL") or DUCKDUCKGO_URL
    found = await asyncio.to_thread(
        _duckduckgo_sync, _with_site_operators(query, options), url, options
    )
    return found[:wanted]


def _duckduckgo_sync(query: str, url: str, options: WebSearchOptions) -> list[SearchResult]:
    from ddgs.engines.duckduckgo import Duckduckgo
    from ddgs.exceptions import DDGSException

    class Engine(Duckduckgo):
        def request(self, *args: Any, **kwargs: Any) -> Any:
            response = self.http_client.request(*args, **kwargs)
            raise_for_status(
                "DuckDuckGo",
                response.status_code,
                dict(response._resp.headers),  # the primp response behind ddgs's wrapper
                response.text,
            )
            return response.text

    engine = Engine(timeout=max(1, round(options.timeout_seconds)))
    engine.search_url = url
    try:
        found = engine.search(query) or []
    except DDGSException as exc:  # its timeouts and connection failures
        raise RetryableModelError(f"DuckDuckGo search request failed ({url}): {exc}") from None
    return [
        SearchResult(
            rank=rank,
            title=_plain(item.title),
            url=_unwrapped(item.href),
            snippet=_plain(item.body),
        )
        for rank, item in enumerate((item for item in found if item.href), start=1)
    ]


def _unwrapped(href: str) -> str:
    """The target of a DuckDuckGo redirect link (`//duckduckgo.com/l/?uddg=…`), else `href`."""
    parts = urlsplit(href)
    if (parts.hostname or "").endswith("duckduckgo.com") and parts.path == "/l/":
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return href


def _items(answer: Any, key: str) -> list[dict[str, Any]]:
    items = answer.get(key) if isinstance(answer, dict) else None
    if items is None:
        return []
    if not isinstance(items, list):
        raise WebSearchError(f"the provider's {key!r} is a {type(items).__name__}, not a list")
    return [item for item in items if isinstance(item, dict) and item.get("url")]


def provider_functions() -> dict[str, ProviderFunction]:
    """The builtin providers by the name `provider:` takes."""
    functions: dict[str, ProviderFunction] = {
        "searxng": searxng,
        "brave": brave,
        "tavily": tavily,
        "duckduckgo": duckduckgo,
    }
    assert tuple(functions) == BUILTIN_PROVIDERS
    return functions
