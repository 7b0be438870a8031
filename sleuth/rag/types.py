"""What retrieval returns, and the one method a retriever must have."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class RetrievedChunk(BaseModel):
    """A scored passage with where it came from (`source` = document, `location` = where inside)."""

    id: str
    text: str
    score: float
    source: str = ""
    location: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Retriever(Protocol):
    """Anything with `retrieve(query, top_k, min_score)` can back a `search_<name>` tool."""

    def retrieve(self, query: str, top_k: int = 5, min_score: float | None = None) -> Any: ...
