"""`KnowledgeProvider`: research that iterates over a discoverable surface, one run per item.

A provider lists the items of an inventory (hosts, packages, vendors, ...), says what to ask about
each one, and turns each run's result into a `KnowledgeRow`. An item's run is a research run
(`research_item`) or an agent run (`agent_item`); `KnowledgeScanWorkflow` drives either durably,
once per item, and both functions work in-process too.

    class AssetInventoryProvider(KnowledgeProvider):
        def list_items(self) -> list[ItemRef]:
            return [ItemRef(id=h, label=h, provider="assets") for h in inventory.hosts()]

        def describe_item(self, ref: ItemRef) -> str:
            return inventory.describe(ref.id)

    app.provider("assets", AssetInventoryProvider())
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, model_validator

from sleuth.runtime.errors import InvalidSettingError, UnsupportedArgumentError

if TYPE_CHECKING:
    from sleuth.apps.app import ResearchConfig, RunnableAgent

ROW_FIELDS = (
    "summary",
    "structured_output",
    "grounding_score",
    "replan_count",
    "regeneration_count",
    "sources",
    "end_reason",
)
"""What `KnowledgeProvider.to_row` keeps of a research run's final state by default."""


class ItemRef(BaseModel):
    """One item of an inventory. Small: it crosses the wire once per item.

    Both forms of the SDK pages work: `ItemRef(id="h1", label="Host 1")` and
    `ItemRef(name="h1", provider="assets")`, where `name` is the item's identity (`ref.name` is
    `ref.id`).
    """

    id: str
    """Stable identity within the provider; rows are keyed by (scan id, item id)."""
    label: str = ""
    """What a person calls the item (shown in the Web UI and in `sleuth rows`)."""
    provider: str = ""
    """The provider that listed it."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Whatever the provider wants to carry from listing to research (keep it small)."""

    @model_validator(mode="before")
    @classmethod
    def _name_is_the_id(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "name" not in data:
            return data
        data = dict(data)
        name = data.pop("name")
        if "id" in data and data["id"] != name:
            raise InvalidSettingError(
                f"ItemRef got id={data['id']!r} and name={name!r}; they are the same thing (the "
                "item's identity): give one of them, and put a display name in label"
            )
        data["id"] = name
        return data

    @property
    def name(self) -> str:
        """The item's identity, as seed 000 calls it (the same as `id`)."""
        return self.id

    @property
    def display(self) -> str:
        return self.label or self.id


class KnowledgeRow(BaseModel):
    """The typed result of researching one item."""

    id: str
    data: dict[str, Any] = Field(default_factory=dict)


class KnowledgeProvider(ABC):
    """An inventory whose items each get their own research run."""

    @abstractmethod
    def list_items(self) -> list[ItemRef]:
        """Every item of the inventory."""

    @abstractmethod
    def describe_item(self, ref: ItemRef) -> str:
        """What the research run should know about the item (becomes part of its prompt)."""

    def list_page(self, cursor: str | None, page_size: int) -> tuple[list[ItemRef], str | None]:
        """One page of items from `cursor` (None: the start) and the cursor of the next page.

        Returns `(items, None)` on the last page. The default slices `list_items()` by offset;
        override it for inventories too large to list at once (the cursor is any string you like,
        e.g. an API's page token). Items must come back in a stable order for a given cursor.
        """
        if page_size < 1:
            raise InvalidSettingError(
                f"page_size must be at least 1, got {page_size}; pass 1 or more"
            )
        try:
            offset = int(cursor) if cursor else 0
        except ValueError:
            raise InvalidSettingError(
                f"cursor {cursor!r} is not an offset; a provider with its own cursors must "
                "override list_page"
            ) from None
        items = self.list_items()
        page = items[offset : offset + page_size]
        next_offset = offset + len(page)
        return page, (str(next_offset) if next_offset < len(items) else None)

    def question(self, ref: ItemRef) -> str:
        """The prompt of the item's research run. Defaults to `describe_item(ref)`."""
        return self.describe_item(ref)

    def to_row(self, ref: ItemRef, result: Any) -> KnowledgeRow:
        """The row stored for the item; override it to shape your own rows.

        `result` has `model_dump()`. For a research run it is the run's `ResearchResult`, and the
        default row keeps its outcome (`ROW_FIELDS` of the report: summary, structured output,
        grounding score, loop counts, sources), not the evidence trail. For an agent run it is the
        agent's structured output when it has one (an instance of its `output_schema`), else
        its `AgentResult`; the default row keeps all of it.
        """
        final_state = getattr(result, "final_state", None)
        if isinstance(final_state, BaseModel):
            final_state = final_state.model_dump(mode="json")
        if isinstance(final_state, dict):
            dumped = final_state
            kept = {key: dumped[key] for key in ROW_FIELDS if key in dumped}
            return KnowledgeRow(id=ref.id, data=jsonable(kept or dumped))
        dump = getattr(result, "model_dump", None)
        data = dump(mode="json") if callable(dump) else result
        if isinstance(data, dict):
            return KnowledgeRow(id=ref.id, data=jsonable(data))
        return KnowledgeRow(id=ref.id, data={"result": jsonable(data)})


async def research_item(
    provider: KnowledgeProvider, research: ResearchConfig, ref: ItemRef
) -> KnowledgeRow:
    """Research one item with a research config (anything with `async execute(inputs)`) -> its row."""
    result = await research.execute({"prompt": provider.question(ref)})
    return row_for(provider, ref, result)


async def agent_item(
    provider: KnowledgeProvider, agent: RunnableAgent, ref: ItemRef
) -> KnowledgeRow:
    """Run one item with an agent (anything with `async arun(task)`) -> its row."""
    result = await agent.arun(provider.question(ref))
    return row_for(provider, ref, agent_row_input(result))


def agent_row_input(result: Any) -> Any:
    """What `to_row` receives for an agent run: its structured output when that is a pydantic
    model (seed 000's `to_row(ref, result: ResearchResult)`), else the run's result."""
    parsed = getattr(result, "parsed", None)
    return parsed if isinstance(parsed, BaseModel) else result


def row_for(provider: KnowledgeProvider, ref: ItemRef, result: Any) -> KnowledgeRow:
    """The provider's row for a research result, checked to be a `KnowledgeRow`."""
    row = provider.to_row(ref, result)
    if not isinstance(row, KnowledgeRow):
        raise UnsupportedArgumentError(
            f"{type(provider).__name__}.to_row returned {type(row).__name__}; it must return a "
            "KnowledgeRow"
        )
    return row


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data (pydantic models dumped, unknown objects as their repr)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)
