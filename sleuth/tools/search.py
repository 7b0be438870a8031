"""`web.search`: one query to a search provider, one ranked, deduplicated list of results.

Providers (`provider:` in the tool's options) and what each reads from the environment of the
process that runs the tool — a key never comes from a workflow input or a tool argument:

| provider | needs | endpoint (overridable, e.g. for tests) |
| --- | --- | --- |
| `searxng` | `SEARXNG_URL`, the instance's base URL (its `json` format enabled) | `SEARXNG_URL` |
| `brave` | `BRAVE_API_KEY` | `SLEUTH_BRAVE_URL` |
| `tavily` | `TAVILY_API_KEY` | `SLEUTH_TAVILY_URL` |
| `duckduckgo` | nothing (its HTML page, read by the `ddgs` package) | `SLEUTH_DUCKDUCKGO_URL` |

Every provider's answer becomes `SearchResult`s (title, url, snippet, date, rank). Results whose
canonical URL (`canonical_url`) was already seen are dropped, `allowed_domains` and
`blocked_domains` are applied to every provider's results (and passed to the provider where it
can filter itself), and the ranks are renumbered from 1.

Errors follow the model adapters' rules: HTTP 408/409/429/5xx, timeouts and connection failures
raise `RetryableModelError` carrying the provider's `Retry-After` (the durable step is retried
after that delay and resumes from its checkpoint, so the call is not repeated by the model);
anything else (a refused key, a missing setting) is a `WebSearchError` the model sees as a failed
tool call.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, Field, field_validator

from sleuth._util.strict import StrictInput
from sleuth.models.base import RetryableModelError
from sleuth.models.errors import is_retryable_status, parse_retry_after
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.redact import redact

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"
DUCKDUCKGO_URL = "https://html.duckduckgo.com/html/"

TRACKING_PARAMETERS = frozenset(
    {"fbclid", "gclid", "dclid", "msclkid", "yclid", "igshid", "mc_cid", "mc_eid", "_ga", "_gl"}
)
"""Query parameters dropped from a URL before comparing it (besides every `utm_*`)."""


class WebSearchError(SleuthError, RuntimeError):
    """A search that retrying cannot fix: a missing setting, a refused key, an unreadable answer."""


class SearchResult(BaseModel):
    """One web search result, whatever the provider."""

    rank: int = Field(ge=1)
    """Its place in the list the model gets (1 = first)."""
    title: str
    url: str
    snippet: str = ""
    """The provider's excerpt of the page, as plain text."""
    date: str | None = None
    """The page's date as the provider gives it (ISO 8601 from most; Brave may say "2 days ago")."""


ProviderFunction = Callable[[str, int, "WebSearchOptions"], Awaitable[list[SearchResult]]]
"""A provider: (query, results wanted, options) -> results in the provider's order."""

PROVIDERS: dict[str, ProviderFunction] = {}
"""Search providers by the name `provider:` takes (see `register_search_provider`)."""


def register_search_provider(name: str, function: ProviderFunction) -> None:
    """Make `provider: name` available to `web.search` in this process."""
    PROVIDERS[name] = function


class WebSearchOptions(StrictInput):
    """Options of `web.search` (the `options:` mapping of its tool entry)."""

    provider: str = "duckduckgo"
    """Who answers: `searxng`, `brave`, `tavily` or `duckduckgo` (or a registered provider)."""
    max_results: int = Field(default=8, ge=1, le=20)
    """Results returned to the model at most (1 to 20)."""
    allowed_domains: list[str] = Field(default_factory=list)
    """Only results on these domains or their subdomains (empty: any domain)."""
    blocked_domains: list[str] = Field(default_factory=list)
    """Never results on these domains or their subdomains."""
    timeout_seconds: float = Field(default=15.0, gt=0, le=120)
    """Longest one request to the provider may take."""

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in PROVIDERS:
            raise ValueError(f"unknown provider {value!r}; accepted: {', '.join(PROVIDERS)}")
        return value

    @field_validator("allowed_domains", "blocked_domains")
    @classmethod
    def _bare_domains(cls, values: list[str]) -> list[str]:
        domains = []
        for value in values:
            domain = value.strip().lower().removeprefix("*.").strip(".")
            if not domain or "/" in domain or ":" in domain or " " in domain:
                raise ValueError(f"{value!r} is not a domain; write it as example.com")
            domains.append(domain)
        return domains


async def search(query: str, options: WebSearchOptions) -> list[SearchResult]:
    """Ask `options.provider`; return at most `max_results` results, deduplicated and filtered."""
    query = " ".join(query.split())
    if not query:
        raise WebSearchError("the query is empty; say what to search for")
    wanted = min(20, options.max_results * 2)  # room for duplicates and filtered domains
    found = await PROVIDERS[options.provider](query, wanted, options)
    results: list[SearchResult] = []
    seen: set[str] = set()
    for result in found:
        key = canonical_url(result.url)
        if key in seen or not _domain_allowed(result.url, options):
            continue
        seen.add(key)
        results.append(result.model_copy(update={"rank": len(results) + 1}))
        if len(results) == options.max_results:
            break
    return results


def render_results(query: str, results: list[SearchResult]) -> str:
    """The text the model gets: the results as a JSON list, or a sentence when there are none."""
    if not results:
        return f"No web results for {query!r}; try other words or a broader query."
    return json.dumps(
        [result.model_dump(exclude_none=True) for result in results], ensure_ascii=False
    )


def canonical_url(url: str) -> str:
    """`url` as compared for duplicates: scheme and host lowercased, default port, fragment,
    `utm_*` and other tracking parameters, and a trailing slash dropped."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    query = [
        (key, value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if not key.lower().startswith("utm_") and key.lower() not in TRACKING_PARAMETERS
    ]
    return urlunsplit((scheme, host, parts.path.rstrip("/"), urlencode(query), ""))


def _domain_allowed(url: str, options: WebSearchOptions) -> bool:
    host = (urlsplit(url).hostname or "").lower().rstrip(".")

    def on(domains: list[str]) -> bool:
        return any(host == domain or host.endswith("." + domain) for domain in domains)

    if options.allowed_domains and not on(options.allowed_domains):
        return False
    return not on(options.blocked_domains)


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


register_search_provider("searxng", searxng)
register_search_provider("brave", brave)
register_search_provider("tavily", tavily)
register_search_provider("duckduckgo", duckduckgo)
