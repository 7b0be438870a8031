"""Setting Sleuth's search attributes from a workflow (the keys: `sleuth.activities.attributes`).

A workflow first asks which are registered (the `sleuth.search_attributes` activity, recorded in
its history) and upserts only those, so a namespace without them never stalls a run; it only
makes the run unfindable by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from sleuth.activities.attributes import (
        COST_USD,
        END_REASON,
        GROUNDED,
        GROUNDING_SCORE,
        REGENERATION_COUNT,
        REPLAN_COUNT,
        RESEARCH,
        RESEARCH_STATUS,
        REVIEW_STATE,
        TOTAL_TOKENS,
        registered_search_attributes,
    )

SEARCH_ATTRIBUTES_PATCH = "sleuth-search-attributes-activity"
"""Marks runs that ask which attributes are registered with the `sleuth.search_attributes`
activity."""
LOCAL_LOOKUP_PATCH = "sleuth-search-attributes"
"""Marks runs recorded while the lookup was a local activity; they replay with one. (A local
activity's result and an Update that arrives while it runs, such as a live-event follower's
poll, can reach the workflow in a different order on replay than they did live: a
non-determinism error.) A run without either marker started before search attributes existed
and sets none."""

__all__ = [
    "COST_USD",
    "END_REASON",
    "GROUNDED",
    "GROUNDING_SCORE",
    "REGENERATION_COUNT",
    "REPLAN_COUNT",
    "RESEARCH",
    "RESEARCH_STATUS",
    "REVIEW_STATE",
    "TOTAL_TOKENS",
    "RunAttributes",
    "for_this_run",
]


class RunAttributes:
    """The search attributes one workflow run sets, upserted only when registered and changed."""

    def __init__(self, registered: list[str]):
        self._registered = set(registered)
        self._current: dict[str, Any] = {}

    def upsert(self, values: Mapping[SearchAttributeKey[Any], Any]) -> None:
        """Set the registered ones of `values` whose value changed (None values are skipped)."""
        updates: list[SearchAttributeUpdate[Any]] = []
        for key, value in values.items():
            if value is None or key.name not in self._registered:
                continue
            if self._current.get(key.name) == value:
                continue
            self._current[key.name] = value
            updates.append(key.value_set(value))
        if updates:
            workflow.upsert_search_attributes(updates)


async def for_this_run(name: str) -> RunAttributes:
    """The attributes this run may set: those the namespace has registered (asked once, by the
    `sleuth.search_attributes` activity, whose Web UI summary starts with `name`)."""
    if workflow.patched(SEARCH_ATTRIBUTES_PATCH):
        registered = await workflow.execute_activity(
            registered_search_attributes,
            start_to_close_timeout=timedelta(seconds=30),
            summary=f"{name}: which Sleuth search attributes are registered",
        )
    elif workflow.patched(LOCAL_LOOKUP_PATCH):
        registered = await workflow.execute_local_activity(
            registered_search_attributes,
            start_to_close_timeout=timedelta(seconds=30),
            summary="which Sleuth search attributes are registered",
        )
    else:
        return RunAttributes([])
    return RunAttributes(registered)
