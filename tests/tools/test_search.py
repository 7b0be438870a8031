"""`web.search`: each provider against a loopback server answering in its documented shape (the
recorded responses in data/), errors and Retry-After, empty answers, YAML options, and a YAML
agent whose model gets the results."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from sleuth import App
from sleuth.activities.errors import to_application_error
from sleuth.apps.yaml_agents import YamlConfigError, load_agents_into
from sleuth.models.base import RetryableModelError
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.tools import SearchResult, WebSearchOptions, web_search_tool
from sleuth.tools.search import WebSearchError, canonical_url, search
from tests.helpers.web_server import LocalWebServer

DATA = Path(__file__).parent / "data"
JSON = "application/json"
KEY = "brv-test-key-0123456789"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalWebServer]:
    with LocalWebServer() as web:
        monkeypatch.setenv("SEARXNG_URL", web.url + "/searx/")
        monkeypatch.setenv("SLEUTH_BRAVE_URL", web.url + "/res/v1/web/search")
        monkeypatch.setenv("BRAVE_API_KEY", KEY)
        monkeypatch.setenv("SLEUTH_TAVILY_URL", web.url + "/search")
        monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-key")
        monkeypatch.setenv("SLEUTH_DUCKDUCKGO_URL", web.url + "/html/")
        yield web


ENDPOINTS = {
    "searxng": "/searx/search",
    "brave": "/res/v1/web/search",
    "tavily": "/search",
    "duckduckgo": "/html/",
}


def answer(server: LocalWebServer, provider: str, fixture: str) -> None:
    kind = "text/html; charset=utf-8" if fixture.endswith(".html") else JSON
    server.reply(ENDPOINTS[provider], body=(DATA / fixture).read_bytes(), content_type=kind)


async def test_searxng_results_are_parsed_deduplicated_and_ranked(server: LocalWebServer) -> None:
    answer(server, "searxng", "searxng.json")
    results = await search("crm  pricing per seat", WebSearchOptions(provider="searxng"))
    assert [(r.rank, r.url) for r in results] == [
        (1, "https://www.example.com/crm/pricing?utm_source=searx&utm_medium=web"),
        (2, "https://blog.vendor-news.net/2026/acme-raises-prices"),
        (3, "https://spam-coupons.example.org/acme-crm-coupon"),
    ]  # the second result is the first page again (host case, slash, fragment): dropped
    assert results[0].date == "2026-03-02T00:00:00"
    assert results[1].title == "Acme raises prices & adds AI seats"
    assert results[1].snippet == "From April, Acme's enterprise tier costs $60."
    request = server.last("/searx/search")
    assert request.query == {"q": ["crm pricing per seat"], "format": ["json"], "pageno": ["1"]}


async def test_brave_sends_its_key_and_its_results_become_plain_text(
    server: LocalWebServer,
) -> None:
    answer(server, "brave", "brave.json")
    results = await search(
        "crm pricing per seat", WebSearchOptions(provider="brave", max_results=5)
    )
    assert results == [
        SearchResult(
            rank=1,
            title="CRM pricing compared: Acme vs Globex",
            url="https://www.example.com/crm/pricing",
            snippet="Acme costs $40 a seat per month; Globex charges $55 with annual discounts.",
            date="2026-03-02T00:00:00",
        ),
        SearchResult(
            rank=2,
            title="Acme raises prices & adds AI seats",
            url="https://blog.vendor-news.net/2026/acme-raises-prices",
            snippet="From April, Acme's enterprise tier costs $60.",
            date="2 days ago",
        ),
    ]
    request = server.last("/res/v1/web/search")
    assert request.headers["x-subscription-token"] == KEY
    assert request.query == {"q": ["crm pricing per seat"], "count": ["10"]}


async def test_tavily_posts_the_query_with_its_domain_filters(server: LocalWebServer) -> None:
    answer(server, "tavily", "tavily.json")
    options = WebSearchOptions(
        provider="tavily", allowed_domains=["Example.com"], blocked_domains=["spam.example.com"]
    )
    results = await search("crm pricing per seat", options)
    assert [(r.rank, r.url, r.date) for r in results] == [
        (1, "https://www.example.com/crm/pricing", None),
        (2, "https://docs.example.com/faq#pricing", "Tue, 03 Mar 2026 10:00:00 GMT"),
    ]
    request = server.last("/search")
    assert request.method == "POST"
    assert request.headers["authorization"] == "Bearer tvly-test-key"
    assert json.loads(request.body) == {
        "query": "crm pricing per seat",
        "max_results": 16,
        "search_depth": "basic",
        "include_domains": ["example.com"],
        "exclude_domains": ["spam.example.com"],
    }


async def test_duckduckgo_needs_no_key_and_reads_its_results_page(
    server: LocalWebServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer(server, "duckduckgo", "duckduckgo.html")
    monkeypatch.delenv("BRAVE_API_KEY")
    monkeypatch.delenv("TAVILY_API_KEY")
    results = await search("crm pricing per seat", WebSearchOptions(provider="duckduckgo"))
    assert [(r.rank, r.title, r.url) for r in results] == [
        (1, "CRM pricing compared: Acme vs Globex", "https://www.example.com/crm/pricing"),
        (
            2,
            "Acme raises prices & adds AI seats",
            "https://blog.vendor-news.net/2026/acme-raises-prices",
        ),
    ]  # the redirect link is unwrapped; the third result repeats the first
    assert results[1].snippet == "From April, Acme's enterprise tier costs $60."
    request = server.last("/html/")
    assert request.method == "POST"
    assert b"q=crm+pricing+per+seat" in request.body


async def test_domains_are_filtered_whatever_the_provider_returns(server: LocalWebServer) -> None:
    answer(server, "searxng", "searxng.json")
    allowed = await search(
        "crm", WebSearchOptions(provider="searxng", allowed_domains=["example.com"])
    )
    assert [r.url for r in allowed] == [
        "https://www.example.com/crm/pricing?utm_source=searx&utm_medium=web"
    ]  # spam-coupons.example.org is not under example.com
    assert server.last("/searx/search").query["q"] == ["crm site:example.com"]
    blocked = await search(
        "crm",
        WebSearchOptions(provider="searxng", blocked_domains=["example.org", "vendor-news.net"]),
    )
    assert [r.rank for r in blocked] == [1]
    assert blocked[0].url.startswith("https://www.example.com/")
    assert server.last("/searx/search").query["q"] == [
        "crm -site:example.org -site:vendor-news.net"
    ]
    capped = await search("crm", WebSearchOptions(provider="searxng", max_results=2))
    assert [r.rank for r in capped] == [1, 2]


@pytest.mark.parametrize(
    ("provider", "fixture"),
    [
        ("searxng", "searxng_empty.json"),
        ("brave", "brave_empty.json"),
        ("duckduckgo", "duckduckgo_empty.html"),
    ],
)
async def test_an_empty_answer_tells_the_model_so(
    server: LocalWebServer, provider: str, fixture: str
) -> None:
    answer(server, provider, fixture)
    result = await web_search_tool(WebSearchOptions(provider=provider)).invoke(
        {"query": "zzqx nothing matches this"}
    )
    assert result.ok
    assert result.content == (
        "No web results for 'zzqx nothing matches this'; try other words or a broader query."
    )


@pytest.mark.parametrize("provider", ["searxng", "brave", "tavily", "duckduckgo"])
async def test_429_is_retryable_after_the_providers_retry_after(
    server: LocalWebServer, provider: str
) -> None:
    server.reply(
        ENDPOINTS[provider],
        status=429,
        body='{"error": "rate limited"}',
        content_type=JSON,
        headers={"Retry-After": "7"},
    )
    tool = web_search_tool(WebSearchOptions(provider=provider))
    with pytest.raises(RetryableModelError) as raised:  # not shown to the model: the step retries
        await tool.invoke({"query": "crm"})
    assert raised.value.status_code == 429
    assert raised.value.retry_after == 7.0
    mapped = to_application_error(raised.value)
    assert mapped is not None and not mapped.non_retryable
    assert mapped.next_retry_delay == timedelta(seconds=7)


async def test_5xx_is_retryable_and_an_unreachable_provider_too(server: LocalWebServer) -> None:
    server.reply(ENDPOINTS["brave"], status=503, body="upstream unavailable")
    with pytest.raises(RetryableModelError, match="HTTP 503 \\(transient\\)") as raised:
        await search("crm", WebSearchOptions(provider="brave"))
    assert raised.value.retry_after is None


async def test_a_refused_key_is_a_failed_call_without_the_key(
    server: LocalWebServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.reply(
        ENDPOINTS["brave"], status=401, body=f'{{"message": "bad token {KEY}"}}', content_type=JSON
    )
    result = await web_search_tool(WebSearchOptions(provider="brave")).invoke({"query": "crm"})
    assert not result.ok
    assert "HTTP 401: the key was refused; check BRAVE_API_KEY" in result.content
    assert KEY not in result.content
    monkeypatch.delenv("TAVILY_API_KEY")
    with pytest.raises(WebSearchError, match="needs TAVILY_API_KEY"):
        await search("crm", WebSearchOptions(provider="tavily"))
    assert server.hits(ENDPOINTS["tavily"]) == 0


def test_canonical_urls() -> None:
    assert canonical_url("HTTPS://WWW.Example.COM:443/a/b/?utm_source=x&id=3&fbclid=y#top") == (
        "https://www.example.com/a/b?id=3"
    )
    assert canonical_url("http://example.com:8080/") == "http://example.com:8080"
    assert canonical_url("https://example.com/a?B=1") != canonical_url("https://example.com/a?b=1")


def yaml_app(tmp_path: Path, tools: str, model: ScriptedModel) -> App:
    app = App()
    app.model("scripted", model)
    path = tmp_path / "agents.yaml"
    path.write_text(
        "agents:\n  - id: researcher\n    model: {provider: app, model: scripted}\n"
        f"    tools:\n{tools}"
    )
    load_agents_into(app, path)
    return app


async def test_a_yaml_agent_searches_and_its_model_gets_the_results(
    tmp_path: Path, server: LocalWebServer
) -> None:
    answer(server, "brave", "brave.json")
    model = ScriptedModel(
        [tool_call("search", query="crm pricing per seat"), text("Acme costs $40 a seat.")]
    )
    app = yaml_app(
        tmp_path,
        "      - { name: search, type: function, function: web.search,\n"
        "          options: {provider: brave, max_results: 3, blocked_domains: [vendor-news.net]} }\n",
        model,
    )
    result = await app.new_agent("researcher").arun("What does Acme cost per seat?")
    assert result.message == "Acme costs $40 a seat."
    [spec] = model.calls[0].tools
    assert spec.name == "search" and list(spec.parameters["properties"]) == ["query"]
    [seen] = [m.content for m in model.calls[1].messages if m.role == "tool"]
    assert json.loads(seen) == [
        {
            "rank": 1,
            "title": "CRM pricing compared: Acme vs Globex",
            "url": "https://www.example.com/crm/pricing",
            "snippet": "Acme costs $40 a seat per month; Globex charges $55 with annual discounts.",
            "date": "2026-03-02T00:00:00",
        }
    ]
    assert result.evidence[0].output == seen


def test_yaml_options_name_what_is_accepted(tmp_path: Path) -> None:
    with pytest.raises(YamlConfigError) as error:
        yaml_app(
            tmp_path,
            "      - { name: a, type: function, function: web.search, options: {provider: bing} }\n"
            "      - { name: b, type: function, function: web.search, options: {max_result: 3} }\n",
            ScriptedModel([]),
        )
    lines = str(error.value).splitlines()
    assert "tool 'a' (web.search): bad options: provider: " in lines[0]
    assert "unknown provider 'bing'; accepted: searxng, brave, tavily, duckduckgo" in lines[0]
    assert (
        "unknown field 'max_result' in WebSearchOptions; known fields: provider, max_results, "
        "allowed_domains, blocked_domains, timeout_seconds"
    ) in lines[1]
