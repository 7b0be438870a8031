"""Small text helpers shared by events, activity summaries and workflow trees."""

from __future__ import annotations


def preview(text: str, limit: int = 120) -> str:
    """One line of at most `limit` characters (whitespace folded, "…" where it was cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
