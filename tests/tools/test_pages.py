"""`web.fetch` reads pages as people do: saved pages served from loopback (so every test sets
`allow_private`, the SSRF guard's one switch), and assertions on the text the model receives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth.runtime.artifacts import LocalArtifactStore
from sleuth.tools import WebFetchOptions, web_fetch_tool
from sleuth.tools.pages import FetchRefused, PageUnreadable, fetch_text
from tests.helpers.web_server import LocalWebServer

DATA = Path(__file__).parent / "data"
HTML = "text/html; charset=utf-8"
LOOPBACK = WebFetchOptions(allow_private=True)


@pytest.fixture
def server() -> Iterator[LocalWebServer]:
    with LocalWebServer() as web:
        yield web


@pytest.fixture
def store(tmp_path: Path) -> LocalArtifactStore:
    return LocalArtifactStore(tmp_path / "artifacts")


def serve(server: LocalWebServer, path: str, fixture: str, content_type: str) -> str:
    server.reply(path, body=(DATA / fixture).read_bytes(), content_type=content_type)
    return server.url + path


async def test_an_article_comes_back_without_navigation_or_boilerplate(
    server: LocalWebServer, store: LocalArtifactStore
) -> None:
    url = serve(server, "/tech/crm-prices", "article.html", HTML)
    page = await fetch_text(url, LOOPBACK, store=store)
    header, _, body = page.partition("\n\n")
    assert header.splitlines() == [
        f"URL: {url}",
        "Title: CRM prices in 2026: what a seat costs",
        "Author: Jane Roe",
        "Date: 2026-03-02",
    ]
    assert "Acme costs $40 a seat per month on its standard plan" in body
    assert "Initech's enterprise tier costs $72 a seat" in body
    assert "Analysts expect prices to rise again next year" in body
    for boilerplate in (
        "Subscribe for $1 a week",  # navigation
        "Sign in",
        "We use cookies",  # cookie banner
        "Ten gadgets you need",  # related links
        "Sign up for our newsletter",
        "All rights reserved",  # footer
        "Privacy policy",
        "dataLayer",  # scripts
    ):
        assert boilerplate not in page, boilerplate


async def test_a_redirect_chain_is_followed_and_the_final_url_reported(
    server: LocalWebServer, store: LocalArtifactStore
) -> None:
    serve(server, "/2026/crm-prices", "article.html", HTML)
    server.redirect("/old/crm", "/moved/crm", status=301)
    server.redirect("/moved/crm", f"{server.url}/2026/crm-prices", status=302)
    page = await fetch_text(f"{server.url}/old/crm", LOOPBACK, store=store)
    assert page.startswith(f"URL: {server.url}/2026/crm-prices\nTitle: CRM prices in 2026")
    assert "Acme costs $40 a seat" in page
    assert [server.hits(p) for p in ("/old/crm", "/moved/crm", "/2026/crm-prices")] == [1, 1, 1]


HTTP_EQUIV = b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'


@pytest.mark.parametrize(
    ("fixture", "content_type", "meta"),
    [
        ("latin1-header.html", "text/html; charset=ISO-8859-1", None),  # no <meta charset>
        ("latin1-meta.html", "text/html", None),  # no charset in the header
        ("latin1-meta.html", "text/html", HTTP_EQUIV),  # the older form of the meta tag
    ],
)
async def test_latin1_pages_decode_from_the_header_or_the_meta_tag(
    server: LocalWebServer,
    store: LocalArtifactStore,
    fixture: str,
    content_type: str,
    meta: bytes | None,
) -> None:
    body = (DATA / fixture).read_bytes()
    if meta is not None:
        body = body.replace(b'<meta charset="iso-8859-1">', meta)
        assert meta in body
    server.reply("/preise", body=body, content_type=content_type)
    url = server.url + "/preise"
    page = await fetch_text(url, LOOPBACK, store=store)
    assert "Title: Preisliste für München" in page
    assert "Author: Jürgen Müller" in page
    assert "Date:" not in page  # no date markup; the footer's "© 2026" is not a date
    assert "Grüße aus München: Die Standardlizenz kostet 40 £ pro Platz" in page
    assert "\ufffd" not in page
    assert "Impressum" not in page and "Alle Rechte vorbehalten" not in page


async def test_a_pdf_is_read_page_by_page_up_to_the_cap(
    server: LocalWebServer, store: LocalArtifactStore
) -> None:
    url = serve(server, "/reports/q2.pdf", "report.pdf", "application/pdf")
    page = await fetch_text(url, LOOPBACK, store=store)
    assert page.splitlines()[:4] == [
        f"URL: {url}",
        "Title: CRM Market Report Q2 2026",
        "Author: Example Research",
        "Date: 2026-04-15",
    ]
    assert "[page 1]\nQuarterly CRM market report. Acme holds 31 percent of the market." in page
    assert "[page 3]\nAppendix: Initech pricing tables" in page
    capped = await fetch_text(
        url, WebFetchOptions(allow_private=True, max_pdf_pages=2), store=store
    )
    assert "[page 2]\nGlobex grew its seat count by 12 percent" in capped
    assert "Appendix" not in capped
    assert capped.endswith("[... 1 more pages not read: max_pdf_pages is 2]")


async def test_a_cut_pdf_says_how_to_read_it(
    server: LocalWebServer, store: LocalArtifactStore
) -> None:
    url = serve(server, "/reports/q2.pdf", "report.pdf", "application/pdf")
    with pytest.raises(PageUnreadable, match="cut at max_bytes; raise it"):
        await fetch_text(url, WebFetchOptions(allow_private=True, max_bytes=300), store=store)


async def test_a_page_is_fetched_once_and_then_read_from_the_artifact_store(
    server: LocalWebServer, tmp_path: Path
) -> None:
    url = serve(server, "/tech/crm-prices", "article.html", HTML)
    first = await fetch_text(url, LOOPBACK, store=LocalArtifactStore(tmp_path / "a"))
    # A retried attempt or a regenerated step: a new store object over the same folder.
    again = await fetch_text(url, LOOPBACK, store=LocalArtifactStore(tmp_path / "a"))
    assert again == first
    assert server.hits("/tech/crm-prices") == 1
    # No reuse when told not to, nor from another store.
    await fetch_text(
        url,
        WebFetchOptions(allow_private=True, cache_seconds=0),
        store=LocalArtifactStore(tmp_path / "a"),
    )
    await fetch_text(url, LOOPBACK, store=LocalArtifactStore(tmp_path / "b"))
    assert server.hits("/tech/crm-prices") == 3


async def test_a_stored_page_that_went_missing_is_fetched_again(
    server: LocalWebServer, tmp_path: Path
) -> None:
    url = serve(server, "/tech/crm-prices", "article.html", HTML)
    first = await fetch_text(url, LOOPBACK, store=LocalArtifactStore(tmp_path / "a"))
    for path in (tmp_path / "a").rglob("*"):
        if path.is_file() and "pointers" not in path.parts:
            path.unlink()  # the content is gone; the pointer still names it
    again = await fetch_text(url, LOOPBACK, store=LocalArtifactStore(tmp_path / "a"))
    assert again == first
    assert server.hits("/tech/crm-prices") == 2


async def test_the_tool_uses_the_default_store_and_the_ssrf_guard_covers_stored_pages(
    server: LocalWebServer, sleuth_home: Path
) -> None:
    url = serve(server, "/tech/crm-prices", "article.html", HTML)
    tool = web_fetch_tool(LOOPBACK)
    first = await tool.invoke({"url": url})
    second = await tool.invoke({"url": url})
    assert first.ok and second.content == first.content
    assert "Title: CRM prices in 2026" in first.content
    assert server.hits("/tech/crm-prices") == 1
    assert any((sleuth_home / "artifacts").rglob("*"))  # kept under $SLEUTH_HOME/artifacts
    # A tool without allow_private refuses the loopback URL even though the page is stored.
    refused = await web_fetch_tool().invoke({"url": url})
    assert not refused.ok and "an internal address" in refused.content
    with pytest.raises(FetchRefused):
        await fetch_text(url, WebFetchOptions())
    assert server.hits("/tech/crm-prices") == 1


async def test_plain_text_and_the_character_cap(
    server: LocalWebServer, store: LocalArtifactStore
) -> None:
    server.reply("/notes.txt", body="Acme renewed in May. " * 20, content_type="text/plain")
    page = await fetch_text(
        f"{server.url}/notes.txt", WebFetchOptions(allow_private=True, max_chars=100), store=store
    )
    assert page == (
        f"URL: {server.url}/notes.txt\n\n"
        + ("Acme renewed in May. " * 5)[:100]
        + "\n[... cut: the page is longer]"
    )


async def test_binary_content_is_refused_with_what_it_is(
    server: LocalWebServer, store: LocalArtifactStore
) -> None:
    server.reply("/logo.png", body=b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", content_type="image/png")
    result = await web_fetch_tool(LOOPBACK).invoke({"url": f"{server.url}/logo.png"})
    assert not result.ok
    assert "is image/png, not a page; web.fetch reads HTML, text and PDF" in result.content
