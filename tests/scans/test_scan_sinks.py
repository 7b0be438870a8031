"""Row sinks: idempotent upserts keyed by (scan id, item id), and what `done_ids` reports.

The OpenSearch sink runs against osmem-server, an in-memory OpenSearch-compatible server."""

from __future__ import annotations

import threading

import pytest

from sleuth.scans.sinks import (
    JSONLRowSink,
    OpenSearchRowSink,
    SQLiteRowSink,
    UnknownSinkError,
    failed_record,
    ok_record,
    open_sink_url,
    sink_for_name,
)


@pytest.fixture(params=["sqlite", "jsonl", "opensearch"])
def sink(request, tmp_path):
    if request.param == "sqlite":
        return SQLiteRowSink(tmp_path / "rows.sqlite")
    if request.param == "jsonl":
        return JSONLRowSink(tmp_path / "rows.jsonl")
    # osmem-server: an in-memory OpenSearch-compatible server (its pytest plugin, from PyPI).
    clone = request.getfixturevalue("osmem_clone")
    return open_sink_url(f"opensearch://{clone.url.split('://', 1)[1]}/scan-rows")


def test_a_retried_item_replaces_its_record(sink):
    sink.put(failed_record("s1", "a", "A", "timed out"))
    sink.put(ok_record("s1", "a", "A", {"answer": 1}))
    sink.put(ok_record("s1", "a", "A", {"answer": 2}))
    sink.put(ok_record("s2", "a", "A", {"answer": 3}))

    [record] = sink.records("s1")
    assert (record.item_id, record.status, record.data, record.error) == (
        "a",
        "ok",
        {"answer": 2},
        None,
    )
    assert [r.data for r in sink.records("s2")] == [{"answer": 3}]


def test_done_ids_are_the_items_with_a_row_in_that_scan(sink):
    sink.put(ok_record("s1", "a", "", {}))
    sink.put(failed_record("s1", "b", "", "boom"))
    sink.put(ok_record("s2", "c", "", {}))
    assert sink.done_ids("s1", ["a", "b", "c", "d"]) == {"a"}


def test_concurrent_writers_lose_nothing(sink):
    def write(worker: int) -> None:
        for n in range(100):
            sink.put(ok_record("s", f"{worker}-{n}", "", {"n": n}))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sink.records("s")) == 800


def test_sqlite_done_ids_handles_more_ids_than_sqlite_binds(tmp_path):
    sink = SQLiteRowSink(tmp_path / "rows.sqlite")
    for n in range(0, 1500, 3):
        sink.put(ok_record("s", f"i{n}", "", {}))
    assert sink.done_ids("s", [f"i{n}" for n in range(1500)]) == {
        f"i{n}" for n in range(0, 1500, 3)
    }


def test_jsonl_ignores_a_torn_last_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    sink = JSONLRowSink(path)
    sink.put(ok_record("s", "a", "", {}))
    with path.open("a") as handle:
        handle.write('{"scan_id": "s", "item_id": "b", "sta')
    assert [r.item_id for r in sink.records("s")] == ["a"]


def test_jsonl_write_after_a_torn_line_is_readable(tmp_path):
    path = tmp_path / "rows.jsonl"
    sink = JSONLRowSink(path)
    sink.put(ok_record("s", "a", "", {}))
    with path.open("a") as handle:
        handle.write('{"scan_id": "s", "item_id": "b", "sta')
    sink.put(ok_record("s", "b", "", {"retried": True}))  # the item is retried after the crash
    records = sink.records("s")
    assert [r.item_id for r in records] == ["a", "b"]
    assert records[1].data == {"retried": True}
    assert sink.done_ids("s", ["a", "b"]) == {"a", "b"}


def test_sink_names_resolve_on_the_worker(tmp_path, sleuth_home, monkeypatch):
    assert sink_for_name(None).location == str(sleuth_home / "rows.sqlite")
    assert sink_for_name("rows").location == str(sleuth_home / "rows.sqlite")
    monkeypatch.setenv("SLEUTH_SINK_DIRS", str(tmp_path / "exports"))
    monkeypatch.setenv(
        "SLEUTH_SINKS",
        f"a=sqlite://{sleuth_home}/a.sqlite, b=jsonl://{tmp_path}/exports/b.jsonl,"
        "c=opensearch://localhost:9200/scan-rows",
    )
    assert sink_for_name("a").location == f"{sleuth_home}/a.sqlite"
    assert sink_for_name("b").location == f"{tmp_path}/exports/b.jsonl"
    opensearch = sink_for_name("c")
    assert isinstance(opensearch, OpenSearchRowSink)
    assert opensearch.location == "http://localhost:9200/scan-rows"
    registered = JSONLRowSink(tmp_path / "mine.jsonl")
    assert sink_for_name("mine", registered={"mine": registered}) is registered
    with pytest.raises(UnknownSinkError, match="unknown sink 'd'; this worker has: a, b, c, rows"):
        sink_for_name("d")
    with pytest.raises(UnknownSinkError, match="unsupported sink URL 'ftp://x'"):
        open_sink_url("ftp://x")
