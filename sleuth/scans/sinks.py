"""Row sinks: where scans put one record per item, keyed by (scan id, item id).

Every write is an upsert, so a retried item (after a worker crash, say) replaces its record
instead of adding a second one. A record is either a row (`status="ok"`, the provider's data) or a
recorded failure (`status="failed"`, the error). Re-running a scan id skips items whose record is
a row; failed items are tried again.

A workflow input names a sink; it never gives a path, URL or host. The worker resolves the name
(`sink_for_name`), in this order:

- a sink registered in the App: `app.sink("audit", JSONLRowSink(...))`;
- a sink configured on the worker: `SLEUTH_SINKS="audit=jsonl:///srv/rows/audit.jsonl,search=
  opensearch://host:9200/rows"` or `sleuth worker --sink audit=jsonl:///...`;
- `rows` (the default): `$SLEUTH_HOME/rows.sqlite`.

File sinks configured by URL (`sqlite:///path`, `jsonl:///path`) must lie inside `$SLEUTH_HOME` or
a directory listed in `SLEUTH_SINK_DIRS`; `opensearch://host:9200/index` (and `opensearchs://`)
needs `pip install 'sleuth[opensearch]'`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlparse

from pydantic import BaseModel, Field

from sleuth.runtime.errors import MissingExtraError
from sleuth.runtime.paths import PRIVATE_FILE_MODE, private_dir, private_file, sleuth_home
from sleuth.runtime.redact import redact
from sleuth.runtime.settings import (
    DEFAULT_SINK,
    SINKS_ENV,
    UnknownSinkError,
    check_sink_name,
    load_settings,
)

Status = Literal["ok", "failed"]


class RowRecord(BaseModel):
    """What a sink holds for one item of one scan."""

    scan_id: str
    item_id: str
    label: str = ""
    status: Status
    data: dict[str, Any] = Field(default_factory=dict)
    """The provider's row data (empty for a failure)."""
    error: str | None = None
    """Why the item failed (None for a row)."""
    updated_at: float = 0.0
    """Unix time of the last write."""


@runtime_checkable
class RowSink(Protocol):
    """Storage for scan records. Implementations must make `put` an idempotent upsert."""

    @property
    def location(self) -> str:
        """Where the rows are, for people (a path or URL)."""
        ...

    def put(self, record: RowRecord) -> None:
        """Insert or replace the record for (record.scan_id, record.item_id)."""
        ...

    def done_ids(self, scan_id: str, item_ids: Iterable[str]) -> set[str]:
        """The subset of `item_ids` that already have a row (status ok) in `scan_id`."""
        ...

    def records(self, scan_id: str) -> list[RowRecord]:
        """Every record of `scan_id`, ordered by item id."""
        ...


def ok_record(scan_id: str, item_id: str, label: str, data: dict[str, Any]) -> RowRecord:
    """The row of an item the scan researched: its `data`, stamped now."""
    return RowRecord(
        scan_id=scan_id,
        item_id=item_id,
        label=label,
        status="ok",
        data=data,
        updated_at=time.time(),
    )


def failed_record(scan_id: str, item_id: str, label: str, error: str) -> RowRecord:
    """The row of an item whose research failed: its `error`, stamped now."""
    return RowRecord(
        scan_id=scan_id,
        item_id=item_id,
        label=label,
        status="failed",
        error=error,
        updated_at=time.time(),
    )


class SQLiteRowSink:
    """The embedded default: one SQLite file, safe for several threads and processes (WAL)."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path).expanduser() if path else sleuth_home() / "rows.sqlite"
        private_file(self.path)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._connection:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS scan_rows ("
                " scan_id TEXT NOT NULL, item_id TEXT NOT NULL, label TEXT NOT NULL,"
                " status TEXT NOT NULL, data TEXT NOT NULL, error TEXT, updated_at REAL NOT NULL,"
                " PRIMARY KEY (scan_id, item_id))"
            )

    @property
    def location(self) -> str:
        return str(self.path)

    def put(self, record: RowRecord) -> None:
        with self._lock, self._connection:
            self._connection.execute(
                "INSERT INTO scan_rows (scan_id, item_id, label, status, data, error, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (scan_id, item_id) DO UPDATE SET label=excluded.label,"
                " status=excluded.status, data=excluded.data, error=excluded.error,"
                " updated_at=excluded.updated_at",
                (
                    record.scan_id,
                    record.item_id,
                    record.label,
                    record.status,
                    json.dumps(record.data, ensure_ascii=False),
                    record.error,
                    record.updated_at,
                ),
            )

    def done_ids(self, scan_id: str, item_ids: Iterable[str]) -> set[str]:
        wanted = list(dict.fromkeys(item_ids))
        done: set[str] = set()
        # SQLite caps the number of bound parameters; query in slices well under the cap.
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:
                found = self._connection.execute(
                    f"SELECT item_id FROM scan_rows WHERE scan_id = ? AND status = 'ok'"
                    f" AND item_id IN ({marks})",
                    (scan_id, *chunk),
                ).fetchall()
            done.update(item_id for (item_id,) in found)
        return done

    def records(self, scan_id: str) -> list[RowRecord]:
        with self._lock:
            found = self._connection.execute(
                "SELECT scan_id, item_id, label, status, data, error, updated_at FROM scan_rows"
                " WHERE scan_id = ? ORDER BY item_id",
                (scan_id,),
            ).fetchall()
        return [
            RowRecord(
                scan_id=row[0],
                item_id=row[1],
                label=row[2],
                status=row[3],
                data=json.loads(row[4]),
                error=row[5],
                updated_at=row[6],
            )
            for row in found
        ]

    def close(self) -> None:
        with self._lock:
            self._connection.close()


class JSONLRowSink:
    """Append-only JSON lines; the last line for a (scan id, item id) wins when reading.

    Good for piping into other tools. Each write appends one line in a single `write` call on a
    file opened for appending, so concurrent writers do not interleave lines.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path).expanduser()
        private_dir(self.path.parent)
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        return str(self.path)

    def put(self, record: RowRecord) -> None:
        line = (record.model_dump_json() + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
            try:
                size = os.fstat(fd).st_size
                # After a torn last line, start on a line of our own: glued to the fragment,
                # this record would be unreadable, and so would the whole file.
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line
                os.write(fd, line)
            finally:
                os.close(fd)

    def _latest(self, scan_id: str) -> dict[str, RowRecord]:
        latest: dict[str, RowRecord] = {}
        if not self.path.exists():
            return latest
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                # A writer killed mid-line leaves a torn line (the last one, or one that a later
                # write put its own line after); it never held a whole record.
                if not line.endswith("\n"):
                    continue
                try:
                    record = RowRecord.model_validate_json(line)
                except ValueError:
                    continue
                if record.scan_id == scan_id:
                    latest[record.item_id] = record
        return latest

    def done_ids(self, scan_id: str, item_ids: Iterable[str]) -> set[str]:
        latest = self._latest(scan_id)
        return {
            item_id for item_id in item_ids if item_id in latest and latest[item_id].status == "ok"
        }

    def records(self, scan_id: str) -> list[RowRecord]:
        latest = self._latest(scan_id)
        return [latest[item_id] for item_id in sorted(latest)]


INDEX_BODY = {
    "mappings": {
        "properties": {
            "scan_id": {"type": "keyword"},
            "item_id": {"type": "keyword"},
            "status": {"type": "keyword"},
            "data": {"type": "object", "enabled": False},
        }
    }
}


class OpenSearchRowSink:
    """Rows as documents in an OpenSearch index; the document id is `<scan id>/<item id>`."""

    def __init__(self, url: str, index: str, *, client: Any | None = None):
        if client is None:
            try:
                from opensearchpy import OpenSearch
            except ImportError as exc:
                raise MissingExtraError(
                    "the OpenSearch sink needs opensearch-py: pip install 'sleuth[opensearch]'"
                ) from exc
            client = OpenSearch(hosts=[url], max_retries=0)
        self.url, self.index, self.client = url, index, client
        self._index_ready = False
        self._index_lock = threading.Lock()

    @property
    def location(self) -> str:
        # Shown in memos, outcomes and CLI output: a URL's credentials stay in the worker.
        return redact(f"{self.url.rstrip('/')}/{self.index}")

    @staticmethod
    def _doc_id(scan_id: str, item_id: str) -> str:
        return f"{scan_id}/{item_id}"

    def _ensure_index(self) -> None:
        with self._index_lock:
            if self._index_ready:
                return
            if not self.client.indices.exists(index=self.index):
                try:
                    self.client.indices.create(index=self.index, body=INDEX_BODY)
                except Exception as exc:
                    # Another worker created it between our check and our create: that is fine.
                    if "resource_already_exists" not in str(exc):
                        raise
            self._index_ready = True

    def put(self, record: RowRecord) -> None:
        self._ensure_index()
        self.client.index(
            index=self.index,
            id=self._doc_id(record.scan_id, record.item_id),
            body=record.model_dump(mode="json"),
        )

    def done_ids(self, scan_id: str, item_ids: Iterable[str]) -> set[str]:
        wanted = list(dict.fromkeys(item_ids))
        if not wanted:
            return set()
        self._ensure_index()
        found = self.client.mget(
            index=self.index, body={"ids": [self._doc_id(scan_id, i) for i in wanted]}
        )
        return {
            doc["_source"]["item_id"]
            for doc in found["docs"]
            if doc.get("found") and doc["_source"].get("status") == "ok"
        }

    def records(self, scan_id: str) -> list[RowRecord]:
        self._ensure_index()
        # Writes do not wait for a refresh (that would cost up to a second per row); searches
        # need one to see them. `done_ids` reads by id, which is real-time without it.
        self.client.indices.refresh(index=self.index)
        records: list[RowRecord] = []
        search_after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": 500,
                "query": {"term": {"scan_id": scan_id}},
                "sort": [{"item_id": "asc"}],
            }
            if search_after is not None:
                body["search_after"] = search_after
            hits = self.client.search(index=self.index, body=body)["hits"]["hits"]
            if not hits:
                return records
            records.extend(RowRecord.model_validate(hit["_source"]) for hit in hits)
            search_after = hits[-1]["sort"]


SINK_DIRS_ENV = "SLEUTH_SINK_DIRS"
"""Directories (separated by `os.pathsep`) where file sinks may live besides `$SLEUTH_HOME`."""
_RESERVED = ("temporal.sqlite", "stores", "artifacts", "models", "keys")
"""Entries of `$SLEUTH_HOME` that belong to other parts of Sleuth: no sink may write into them."""


def configured_sink_urls() -> dict[str, str]:
    """The sinks `$SLEUTH_SINKS` configures on this worker, by name."""
    return dict(load_settings().sinks)


def allowed_sink_dirs() -> list[Path]:
    """Where file sinks may live: `$SLEUTH_HOME` and the directories in `$SLEUTH_SINK_DIRS`."""
    extra = [directory.expanduser() for directory in load_settings().sink_dirs]
    return [directory.resolve() for directory in (sleuth_home(), *extra)]


def confined_file(path_text: str, url: str) -> Path:
    """The absolute path of a file sink, if it lies inside an allowed directory."""
    path = Path(path_text)
    if not path.is_absolute():
        raise UnknownSinkError(
            f"sink {redact(url)!r}: the file must be an absolute path (three slashes: "
            "jsonl:///srv/rows/x.jsonl)"
        )
    real = path.resolve()
    allowed = allowed_sink_dirs()
    home = allowed[0]
    inside = [root for root in allowed if real.is_relative_to(root)]
    reserved = real.is_relative_to(home) and real.relative_to(home).parts[:1] in {
        (entry,) for entry in _RESERVED
    }
    if not inside or (reserved and inside == [home]):
        raise UnknownSinkError(
            f"sink {redact(url)!r}: file sinks must lie inside $SLEUTH_HOME ({home}, except "
            f"{', '.join(_RESERVED)}) or a directory listed in ${SINK_DIRS_ENV}; "
            f"{real} is not"
        )
    return real


def open_sink_url(url: str) -> RowSink:
    """The sink a worker-side URL configures (never called with a workflow input)."""
    parsed = urlparse(url)
    if parsed.scheme in {"sqlite", "jsonl"}:
        if parsed.netloc or not parsed.path:
            raise UnknownSinkError(
                f"sink {redact(url)!r}: use {parsed.scheme}:///absolute/path (three slashes)"
            )
        path = confined_file(parsed.path, url)
        return SQLiteRowSink(path) if parsed.scheme == "sqlite" else JSONLRowSink(path)
    if parsed.scheme in {"opensearch", "opensearchs"} and parsed.netloc:
        index = parsed.path.strip("/") or "sleuth-rows"
        http = "https" if parsed.scheme == "opensearchs" else "http"
        return OpenSearchRowSink(f"{http}://{parsed.netloc}", index)
    raise UnknownSinkError(
        f"unsupported sink URL {redact(url)!r}: use sqlite:///path, jsonl:///path or "
        "opensearch://host:9200/index"
    )


def sink_for_name(name: str | None, *, registered: Mapping[str, RowSink] | None = None) -> RowSink:
    """The sink `name` means on this worker: registered in the App, configured in
    `$SLEUTH_SINKS`, or the default `rows`. Anything else is an `UnknownSinkError` listing the
    names there are."""
    name = check_sink_name(name or DEFAULT_SINK)
    registered = registered or {}
    if name in registered:
        return registered[name]
    configured = configured_sink_urls()
    if name in configured:
        return open_sink_url(configured[name])
    if name == DEFAULT_SINK:
        return SQLiteRowSink()
    known = sorted({DEFAULT_SINK, *registered, *configured})
    raise UnknownSinkError(
        f"unknown sink {name!r}; this worker has: {', '.join(known)}. Configure it on the "
        f"worker ({SINKS_ENV}=name=URL or `sleuth worker --sink name=URL`) or register it "
        "with app.sink(name, sink)"
    )
