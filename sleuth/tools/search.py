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

import json
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sleuth.tools.search_types import BUILTIN_PROVIDERS as BUILTIN_PROVIDERS
from sleuth.tools.search_types import PROVIDERS as PROVIDERS
from sleuth.tools.search_types import ProviderFunction as ProviderFunction
from sleuth.tools.search_types import SearchResult as SearchResult
from sleuth.tools.search_types import WebSearchError as WebSearchError
from sleuth.tools.search_types import WebSearchOptions as WebSearchOptions
from sleuth.tools.search_types import register_search_provider as register_search_provider

TRACKING_PARAMETERS = frozenset(
    {"fbclid", "gclid", "dclid", "msclkid", "yclid", "igshid", "mc_cid", "mc_eid", "_ga", "_gl"}
)
"""Query parameters dropped from a URL before comparing it (besides every `utm_*`)."""


def known_providers() -> dict[str, ProviderFunction]:
    """Every provider: the builtin ones (`sleuth.tools.search_providers`, loaded on first use)
    and the registered ones."""
    from sleuth.tools.search_providers import provider_functions

    return {**provider_functions(), **PROVIDERS}


async def search(query: str, options: WebSearchOptions) -> list[SearchResult]:
    """Ask `options.provider`; return at most `max_results` results, deduplicated and filtered."""
    query = " ".join(query.split())
    if not query:
        raise WebSearchError("the query is empty; say what to search for")
    wanted = min(20, options.max_results * 2)  # room for duplicates and filtered domains
    found = await known_providers()[options.provider](query, wanted, options)
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
