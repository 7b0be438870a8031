"""Sleuth's search attributes, and `sleuth.search_attributes`: which of them a namespace has.

```
temporal workflow list --query 'SleuthGroundingScore < 0.6'
temporal workflow list --query 'SleuthReviewState = "awaiting"'
```

They must be registered on the namespace before a workflow may set them: the embedded server
registers them at start, `sleuth setup` registers them on a cluster. Workflows run the
`sleuth.search_attributes` activity once (so the answer is in their history) before they upsert
any (`sleuth.workflows.attributes`), so a namespace where `sleuth setup` never ran does not
fail workflow tasks: the attributes are just not set, and the worker logs how to fix that. The
answer is cached per server and namespace for a minute, so it costs one RPC per worker and
minute.
"""

from __future__ import annotations

import time
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey
from temporalio.service import RPCError

from sleuth.runtime.log import get_logger

log = get_logger(__name__)

RESEARCH = SearchAttributeKey.for_keyword("SleuthResearch")
"""The research config a run executes."""
END_REASON = SearchAttributeKey.for_keyword("SleuthEndReason")
"""Why a research run ended (`grounded`, `max_replans`, …) or an agent run stopped."""
REVIEW_STATE = SearchAttributeKey.for_keyword("SleuthReviewState")
"""`awaiting` while a person's decision is pending, then `approved`, `revised`, `rejected` or
`timed_out` (the last review's outcome)."""
GROUNDING_SCORE = SearchAttributeKey.for_float("SleuthGroundingScore")
"""The share of grounded claims at the last grounding eval, 0 to 1."""
COST_USD = SearchAttributeKey.for_float("SleuthCostUsd")
"""What the run's model calls cost so far, in USD."""
REPLAN_COUNT = SearchAttributeKey.for_int("SleuthReplanCount")
REGENERATION_COUNT = SearchAttributeKey.for_int("SleuthRegenerationCount")
TOTAL_TOKENS = SearchAttributeKey.for_int("SleuthTotalTokens")
GROUNDED = SearchAttributeKey.for_bool("SleuthGrounded")
"""Set when a research run ends: whether its final report is grounded (status `grounded`)."""
RESEARCH_STATUS = SearchAttributeKey.for_keyword("SleuthResearchStatus")
"""Set when a research run ends: how its final report answers the question, `grounded`,
`partial` or `not_found` (`temporal workflow list --query 'SleuthResearchStatus = "partial"'`)."""

SLEUTH_ATTRIBUTES: tuple[SearchAttributeKey[Any], ...] = (
    RESEARCH,
    END_REASON,
    REVIEW_STATE,
    GROUNDING_SCORE,
    COST_USD,
    REPLAN_COUNT,
    REGENERATION_COUNT,
    TOTAL_TOKENS,
    GROUNDED,
    RESEARCH_STATUS,
)
"""Every search attribute Sleuth sets. A SQL-backed cluster allows 3 custom Int, 3 Double, 3 Bool
and 10 Keyword attributes per namespace; Sleuth uses 3 Int, 2 Double, 1 Bool and 4 Keyword."""

CACHE_SECONDS = 60.0
_cache: dict[str, tuple[float, list[str]]] = {}
_warned: set[str] = set()


def expected_types() -> dict[str, int]:
    """Each Sleuth attribute's name and the indexed value type it must be registered with."""
    return {key.name: int(key.indexed_value_type) for key in SLEUTH_ATTRIBUTES}


def type_name(value_type: int) -> str:
    """`Keyword`, `Double`, … for an indexed value type (as the Temporal CLI names them)."""
    return SearchAttributeIndexedValueType(value_type).name.title().replace("_", "")


@activity.defn(name="sleuth.search_attributes")
async def registered_search_attributes() -> list[str]:
    """The Sleuth attributes registered on this worker's namespace with the right type."""
    namespace = activity.info().namespace
    client = activity.client()
    # One process may serve several clusters (tests do): the answer is per server and namespace.
    where = f"{client.service_client.config.target_host}/{namespace}"
    cached = _cache.get(where)
    if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
        return cached[1]
    try:
        response = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        registered = dict(response.custom_attributes)
    except RPCError as exc:
        # A server without the operator service (the time-skipping test server) has none.
        registered = {}
        reason = str(exc)
    else:
        reason = ""
    usable = sorted(
        name for name, value_type in expected_types().items() if registered.get(name) == value_type
    )
    _cache[where] = (time.monotonic(), usable)
    missing = sorted(set(expected_types()) - set(usable))
    if missing and where not in _warned:
        _warned.add(where)
        wrong = {
            name: type_name(registered[name])
            for name in missing
            if name in registered
            and registered[name] != IndexedValueType.INDEXED_VALUE_TYPE_UNSPECIFIED
        }
        log.warning(
            "search_attributes.missing",
            namespace=namespace,
            missing=missing,
            registered_with_other_type=wrong or None,
            reason=reason or None,
            hint="runs are not findable by these until you run `sleuth setup` on this namespace",
        )
    return usable
