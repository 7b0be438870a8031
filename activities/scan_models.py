"""Wire payloads of knowledge scans: the workflow's input and output, and each scan activity's."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from sleuth._util.strict import StrictInput
from sleuth.activities.heartbeat import HEARTBEAT_SECONDS
from sleuth.activities.policy import MAX_SECONDS, attempts, seconds
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.settings import check_sink_name
from sleuth.scans.knowledge import ItemRef

FAILED_LIST_LIMIT = 200
"""At most this many failures are listed in a scan's outcome (every one is in the sink)."""
MAX_PAGE_SIZE = 1000
"""Largest listing page: a page (and the pending items carried over a continue-as-new) must stay
well inside Temporal's payload size limit."""
ERROR_TEXT_LIMIT = 500
"""Longer error messages are cut to this many characters in the outcome (the sink has them whole)."""
MAX_CONCURRENCY = 1000
"""Most items one scan researches at once."""
MAX_HISTORY_EVENT_BUDGET = 40_000
"""Largest history budget: Temporal fails a run whose history passes 51,200 events."""
DEFAULT_RESEARCH = "default"
"""The research config a scan runs when it names neither a research config nor an agent."""
SCAN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}$")


def check_scan_id(value: str) -> str:
    """`value` if it is a scan id (letters, digits and `._:@+=-`, at most 200), else ValueError."""
    if SCAN_ID.match(value):
        return value
    raise InvalidSettingError(
        "a scan id is 1 to 200 letters, digits and '._:@+=-', starting with a letter or digit "
        "(e.g. 'python-packages-2026-05-01'); pick one like that"
    )


ScanId = Annotated[str, AfterValidator(check_scan_id)]
SinkName = Annotated[str, AfterValidator(check_sink_name)]


class ScanSettings(StrictInput):
    """Timeouts, retries and history budget of a scan. Every field can be overridden per run."""

    list_timeout_seconds: float = seconds(120.0)
    """Start-to-close timeout of listing one page of items (more than 0, at most 30 days)."""
    list_max_attempts: int = attempts(10)
    """Attempts at listing a page before the scan fails (a provider that cannot list is fatal);
    0 = no limit, at most 10,000."""
    list_heartbeat_seconds: float = seconds(HEARTBEAT_SECONDS)
    """Listing a page heartbeats about three times within this; a silent worker is declared dead
    after it, and the page is listed again elsewhere (more than 0, at most 30 days)."""
    item_timeout_seconds: float = seconds(900.0)
    """Start-to-close timeout of researching one item (the whole research run, all its nodes);
    more than 0, at most 30 days."""
    item_heartbeat_seconds: float = seconds(HEARTBEAT_SECONDS)
    """An item's activity heartbeats about three times within this; a silent worker is declared
    dead after it, and the item is retried elsewhere, resuming from its checkpoint (more than 0,
    at most 30 days)."""
    item_max_attempts: int = Field(default=3, ge=1, le=100)
    """Attempts per item, 1 to 100; after the last one the item is recorded as failed and the
    scan goes on (so there is no "no limit" here)."""
    item_initial_retry_seconds: float = Field(default=2.0, gt=0, le=MAX_SECONDS)
    """Wait before an item's second attempt (doubles each attempt); more than 0."""
    record_timeout_seconds: float = seconds(60.0)
    """Start-to-close timeout of recording an item's failure in the sink (more than 0)."""
    record_heartbeat_seconds: float = seconds(HEARTBEAT_SECONDS)
    """Recording a failure heartbeats about three times within this (a slow remote sink); more
    than 0, at most 30 days."""
    history_event_budget: int = Field(default=4000, ge=1, le=MAX_HISTORY_EVENT_BUDGET)
    """Continue-as-new once a run's history holds this many events (or when the server suggests
    it, whichever comes first), so every run stays small and fast to replay (1 to 40,000)."""


class ScanRequest(StrictInput):
    """Input of `KnowledgeScanWorkflow` (also what a schedule starts)."""

    # A refused sink may be a URL with credentials: validation errors must not echo it.
    model_config = ConfigDict(hide_input_in_errors=True)

    provider: str
    """Name of a `KnowledgeProvider` registered in the worker's App."""
    research: str | None = None
    """Name of the research config each item runs (`default` when no `agent` is named)."""
    agent: str | None = None
    """Name of an agent registered with `app.agent`: each item is then one run of a fresh agent
    instead of a research run. Give `research` or `agent`, not both."""
    scan_id: ScanId | None = None
    """Rows are keyed by (scan id, item id); re-running a scan id skips items that have a row.
    1 to 200 letters, digits and `._:@+=-`. Default: the workflow id."""
    concurrency: int = Field(default=8, ge=1, le=MAX_CONCURRENCY)
    """Items researched at once (1 to 1000)."""
    page_size: int = Field(default=100, ge=1, le=MAX_PAGE_SIZE)
    """Items listed per listing activity."""
    sink: SinkName | None = None
    """The name of a sink the worker has (registered with `app.sink`, configured in
    `$SLEUTH_SINKS`, or `rows`, the default: `$SLEUTH_HOME/rows.sqlite`). Never a path or URL."""
    settings: ScanSettings = Field(default_factory=ScanSettings)
    """Timeouts, retries and history budget."""
    carry: ScanCarry | None = None
    """Set by the scan itself when it continues as new; leave it empty."""

    @model_validator(mode="after")
    def _one_runner(self) -> ScanRequest:
        if self.research is not None and self.agent is not None:
            raise InvalidSettingError(
                f"the scan names research {self.research!r} and agent {self.agent!r}; each item "
                "runs one of them: give research or agent, not both"
            )
        if self.agent is None and self.research is None:
            self.research = DEFAULT_RESEARCH
        return self

    @property
    def runner(self) -> str:
        """What each item runs, for summaries: the research config's name, or `agent NAME`."""
        return f"agent {self.agent}" if self.agent else str(self.research)


class ItemFailure(BaseModel):
    """An item that failed all its attempts."""

    item: str
    error: str


class ScanCarry(StrictInput):
    """What one run of a scan hands to the next when it continues as new."""

    scan_id: str
    cursor: str | None = None
    listing_complete: bool = False
    pending: list[ItemRef] = Field(default_factory=list)
    """Items listed but not yet started."""
    items_total: int = 0
    rows_written: int = 0
    skipped: int = 0
    failed_count: int = 0
    failed: list[ItemFailure] = Field(default_factory=list)
    sink_location: str = ""
    runs: int = 1


class ScanOutcome(BaseModel):
    """Result of `KnowledgeScanWorkflow`."""

    scan_id: str
    items_total: int
    """Items the provider listed."""
    rows_written: int
    """Items researched and written in this scan (not counting skipped ones)."""
    skipped: int = 0
    """Items that already had a row under this scan id."""
    failed_count: int = 0
    """Items that failed every attempt (each is recorded in the sink with its error)."""
    failed: list[ItemFailure] = Field(default_factory=list)
    """The first failures (at most FAILED_LIST_LIMIT; all of them are in the sink)."""
    sink: str
    """Where the rows are."""
    runs: int = 1
    """Runs in the continue-as-new chain."""


class ScanProgress(BaseModel):
    """The `progress` query of a running scan."""

    scan_id: str
    done: int
    """Items finished: written, skipped or failed."""
    total: int
    """Items listed so far (final once `listing_complete`)."""
    failed: int
    rows_written: int
    skipped: int
    in_flight: int
    listing_complete: bool
    sink: str
    runs: int


class ListPageInput(BaseModel):
    provider: str
    research: str | None
    agent: str | None = None
    scan_id: str
    sink: str | None
    cursor: str | None
    page_size: int


class ListPageOutput(BaseModel):
    items: list[ItemRef]
    """Items of the page that still need research."""
    skipped: int
    """Items of the page that already have a row under the scan id."""
    next_cursor: str | None
    sink_location: str


class ResearchItemInput(BaseModel):
    provider: str
    research: str | None
    agent: str | None = None
    """Set for a scan of agent runs (then `research` is None)."""
    scan_id: str
    sink: str | None
    item: ItemRef


class ResearchItemOutput(BaseModel):
    item_id: str
    row_fields: int
    """How many top-level fields the written row has (a cheap sanity signal for the history)."""


class RecordFailureInput(BaseModel):
    scan_id: str
    sink: str | None
    item: ItemRef
    error: str


ScanRequest.model_rebuild()
