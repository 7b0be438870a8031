"""Activities of knowledge scans: list a page of items, research one item, record a failure.

An item runs a research config or, when the scan names an agent, one run of a fresh agent from
the App (a `sleuth.Agent` journals its loop's checkpoints the same way as a research execute).

All three heartbeat on a timer. An item researched with a `ResearchSpec` runs its graph node by
node with its execute rounds in the activity's checkpoint journal (`sleuth.activities.checkpoints`): the
loop's checkpoint after every model turn and tool call, and the state after the round. A retried
item resumes there, so its completed tool calls are not run again. Any other research
config runs whole, and a retry starts it over (its row upsert makes that harmless to the sink).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sleuth.activities.errors import ConfigError, mapped_errors, to_application_error
from sleuth.activities.heartbeat import checkpointing, heartbeating, journaled
from sleuth.activities.scan_models import (
    ListPageInput,
    ListPageOutput,
    RecordFailureInput,
    ResearchItemInput,
    ResearchItemOutput,
)
from sleuth.agent import Agent
from sleuth.apps.app import App, ResearchConfig, UnknownNameError
from sleuth.research import ResearchSpec
from sleuth.runtime.artifacts import ArtifactStore, default_artifact_store
from sleuth.runtime.log import get_logger
from sleuth.runtime.redact import redact
from sleuth.scans.knowledge import (
    ItemRef,
    KnowledgeProvider,
    KnowledgeRow,
    agent_item,
    agent_row_input,
    research_item,
    row_for,
)
from sleuth.scans.sinks import RowSink, failed_record, ok_record, sink_for_name

log = get_logger(__name__)


class ScanActivities:
    """Scan steps bound to an App: providers, research configs and sinks are looked up by name."""

    def __init__(self, app: App, store: ArtifactStore | None = None):
        self.app = app
        self._store = store
        self._sinks: dict[str, RowSink] = {}

    @property
    def store(self) -> ArtifactStore:
        return self._store or default_artifact_store()

    def all(self) -> list[Callable[..., Any]]:
        return [self.list_page, self.research_item, self.record_failure]

    def _provider(self, name: str) -> KnowledgeProvider:
        provider = self.app.get_provider(name)
        if not isinstance(provider, KnowledgeProvider):
            raise ConfigError(
                f"provider {name!r} is a {type(provider).__name__}; register a "
                "sleuth.KnowledgeProvider with app.provider(name, provider)"
            )
        return provider

    def _sink(self, name: str | None) -> RowSink:
        """The sink a scan names, as this worker configured it (see `sleuth.scans.sinks`). One object
        per name and worker: the SQLite sink keeps its connection open."""
        key = name or ""
        sink = self._sinks.get(key)
        if sink is None:
            registered = {n: self.app.get_sink(n) for n in self.app.sink_names}
            try:
                sink = sink_for_name(name, registered=registered)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            self._sinks[key] = sink
        return sink

    @activity.defn(name="scan.list_page")
    @mapped_errors
    async def list_page(self, request: ListPageInput) -> ListPageOutput:
        """List one page and drop the items that already have a row under the scan id."""
        provider = self._provider(request.provider)
        # Fail the whole scan at once on an unknown name, not once per item (checked by name:
        # building the config or agent here would load its model in the listing step).
        if request.agent is not None:
            if request.agent not in self.app.agent_names:
                raise UnknownNameError("agent", request.agent, self.app.agent_names)
        elif request.research not in self.app.research_names:
            raise UnknownNameError(
                "research config", str(request.research), self.app.research_names
            )
        async with heartbeating():
            items, next_cursor = await asyncio.to_thread(
                provider.list_page, request.cursor, request.page_size
            )
        for item in items:
            item.provider = item.provider or request.provider
        sink = self._sink(request.sink)
        done = await asyncio.to_thread(sink.done_ids, request.scan_id, [item.id for item in items])
        todo = [item for item in items if item.id not in done]
        return ListPageOutput(
            items=todo,
            skipped=len(items) - len(todo),
            next_cursor=next_cursor,
            sink_location=sink.location,
        )

    @activity.defn(name="scan.research_item")
    @mapped_errors
    async def research_item(self, request: ResearchItemInput) -> ResearchItemOutput:
        """Run the item's research (or agent) in this worker and upsert its row (a retry
        replaces it)."""
        provider = self._provider(request.provider)
        try:
            if request.agent is not None:
                row = await self._run_agent(provider, request.agent, request.item)
            else:
                research = self.app.get_research(str(request.research))
                row = await self._research(provider, research, request.item)
        except Exception as exc:
            # `from None`: the original exception (and its message) must not reach the history.
            raise redacted_failure(exc) from None
        sink = self._sink(request.sink)
        record = ok_record(request.scan_id, request.item.id, request.item.display, row.data)
        await asyncio.to_thread(sink.put, record)
        return ResearchItemOutput(item_id=request.item.id, row_fields=len(row.data))

    @activity.defn(name="scan.record_failure")
    @mapped_errors
    async def record_failure(self, request: RecordFailureInput) -> None:
        """Record an item that failed every attempt, so the sink accounts for every item."""
        sink = self._sink(request.sink)
        # An attempt can write its row and still count as failed (it timed out just after): the
        # row is the better record, so a failure never replaces it.
        if await asyncio.to_thread(sink.done_ids, request.scan_id, [request.item.id]):
            return
        error = redact(request.error)
        record = failed_record(request.scan_id, request.item.id, request.item.display, error)
        async with heartbeating():
            await asyncio.to_thread(sink.put, record)
        log.warning("scan item failed", scan_id=request.scan_id, item=request.item.id, error=error)

    async def _research(
        self, provider: KnowledgeProvider, research: ResearchConfig, item: ItemRef
    ) -> KnowledgeRow:
        if not isinstance(research, ResearchSpec):
            async with heartbeating():
                return await research_item(provider, research, item)
        async with journaled(self.store) as journal:
            result = await research.execute(provider.question(item), app=self.app, journal=journal)
        return row_for(provider, item, result)

    async def _run_agent(
        self, provider: KnowledgeProvider, name: str, item: ItemRef
    ) -> KnowledgeRow:
        """One agent run for the item. A `sleuth.Agent` keeps its loop's checkpoints in the
        journal, so a retried item resumes without repeating a completed tool call; any other
        agent-shaped object runs whole and a retry starts it over."""
        agent = self.app.new_agent(name)
        if not isinstance(agent, Agent):
            async with heartbeating():
                return await agent_item(provider, agent, item)
        async with checkpointing(self.store) as (checkpoint, save):
            result = await agent.arun(
                provider.question(item), checkpoint=checkpoint, on_checkpoint=save
            )
        return row_for(provider, item, agent_row_input(result))


def redacted_failure(exc: Exception) -> ApplicationError:
    """`exc` as the activity failure Temporal records, with the same retry semantics and its
    message passed through `redact`: a provider that echoes an API key in an error body must not
    put it in the history, the failure rows or the CLI's output."""
    mapped = to_application_error(exc)
    if mapped is None:
        return ApplicationError(redact(str(exc)) or type(exc).__name__, type=type(exc).__name__)
    return ApplicationError(
        redact(mapped.message),
        type=mapped.type,
        non_retryable=mapped.non_retryable,
        next_retry_delay=mapped.next_retry_delay,
    )
