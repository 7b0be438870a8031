"""The result model, options and provider registry of `web.search` (`sleuth.tools.search`),
apart from the providers themselves (`sleuth.tools.search_providers`), which use them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, Field, field_validator

from sleuth._util.strict import StrictInput
from sleuth.runtime.errors import SleuthError


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


BUILTIN_PROVIDERS = ("searxng", "brave", "tavily", "duckduckgo")
"""The providers `sleuth.tools.search_providers` implements."""


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
        known = [*BUILTIN_PROVIDERS, *(name for name in PROVIDERS if name not in BUILTIN_PROVIDERS)]
        if value not in known:
            raise ValueError(f"unknown provider {value!r}; accepted: {', '.join(known)}")
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
