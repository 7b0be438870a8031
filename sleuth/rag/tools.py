"""Datastore wiring: a `search_<name>` tool per store, and a routing block for the system prompt.

Shared by `create_deepagent(datastores=...)` and `create_research_workflow(datastores=...)`, so both
give the model the identical tool surface.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from sleuth.rag.types import RetrievedChunk
from sleuth.runtime.errors import InvalidSettingError
from sleuth.tools import Tool


def coerce_number(value: Any, name: str, kind: type = float) -> Any:
    """Accept numbers sent as strings ("0.5"), as some providers JSON-encode them."""
    if value is None or value == "":
        return None
    try:
        return kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError):
        raise InvalidSettingError(f"{name} must be a number, got {value!r}") from None


def _as_chunk(raw: Any) -> RetrievedChunk:
    if isinstance(raw, RetrievedChunk):
        return raw
    if isinstance(raw, Mapping):
        return RetrievedChunk.model_validate({"id": str(raw.get("id", "")), **raw})
    return RetrievedChunk(
        id=str(getattr(raw, "id", "")),
        text=str(getattr(raw, "text", raw)),
        score=float(getattr(raw, "score", 0.0)),
        source=str(getattr(raw, "source", "")),
        location=str(getattr(raw, "location", "")),
    )


def create_rag_tool(
    name: str,
    retriever: Any,
    *,
    description: str = "",
    top_k: int = 5,
    threshold: float | None = None,
    max_top_k: int | None = None,
) -> Tool:
    """A `search_<name>` tool over `retriever` (anything with `retrieve(query, top_k, min_score)`).

    `top_k` passages come back unless the model asks for another number, and never more than
    `max_top_k` (default: `top_k`): every passage returned is read again on each later model turn,
    so the store's owner, not the model, sets what a search may cost. A small model asked to
    search often sends `top_k: 10` whatever the question."""
    default_top_k = top_k
    default_threshold = threshold
    cap = max(max_top_k if max_top_k is not None else top_k, 1)

    async def search(
        query: str, top_k: int | str | None = None, min_score: float | str | None = None
    ) -> list[dict[str, Any]]:
        k = min(coerce_number(top_k, "top_k", int) or default_top_k, cap)
        floor = coerce_number(min_score, "min_score")
        if floor is None:
            floor = default_threshold
        # A retriever's async variant keeps blocking store/embedding calls off the event loop.
        search_method = getattr(retriever, "aretrieve", None) or retriever.retrieve
        found = search_method(query, top_k=k, min_score=floor)
        if inspect.isawaitable(found):
            found = await found
        return [
            {
                "id": c.id,
                "source": c.source,
                "location": c.location,
                "score": round(c.score, 4),
                "text": c.text,
            }
            for c in map(_as_chunk, found)
        ]

    about = description or f"the {name} datastore"
    return Tool(
        search,
        name=f"search_{name}",
        description=f"Search {about}. Returns up to {cap} passages with their source and location; "
        "cite the source.",
    )


def routing_block(datastores: Mapping[str, Mapping[str, Any]]) -> str:
    """The system-prompt block telling the model which store answers what."""
    if not datastores:
        return ""
    lines = ["You can search these datastores; pick the one whose contents fit each question:"]
    for name, config in datastores.items():
        description = config.get("description") or "no description given"
        lines.append(f"- search_{name}: {description}")
    return "\n".join(lines)


def wire_datastores(datastores: Mapping[str, Mapping[str, Any]] | None) -> tuple[list[Tool], str]:
    """Tools and the routing block for a `datastores={name: {"retriever", "description", "top_k",
    "threshold", "max_top_k"}}` map (`create_rag_tool` says what each means)."""
    if not datastores:
        return [], ""
    tools = []
    for name, config in datastores.items():
        if "retriever" not in config:
            raise InvalidSettingError(
                f"datastore {name!r} has no 'retriever'; give one with retrieve(query, top_k, min_score)"
            )
        tools.append(
            create_rag_tool(
                name,
                config["retriever"],
                description=config.get("description", ""),
                top_k=int(coerce_number(config.get("top_k"), "top_k", int) or 5),
                threshold=coerce_number(config.get("threshold"), "threshold"),
                max_top_k=coerce_number(config.get("max_top_k"), "max_top_k", int),
            )
        )
    return tools, routing_block(datastores)
