"""`sleuth ingest` on hostile folders: link loops, links out of a folder, huge files, FIFOs, and
two ingests writing one store at once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sleuth.rag.ingest import ingest_paths
from sleuth.rag.stores import SQLiteStore
from sleuth.workers.cli import run as cli_run
from tests.helpers.cli_process import popen_sleuth
from tests.helpers.timeouts import scaled


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "nested").mkdir(parents=True)
    (docs / "walrus.md").write_text("The walrus operator assigns inside expressions.\n")
    (docs / "nested" / "generators.txt").write_text("Generators yield values lazily.\n")
    (tmp_path / "private.md").write_text("Outside secret about pelicans.\n")
    return docs


def sources(store: SQLiteStore) -> set[str]:
    return {Path(hit.source).name for hit in store.search("walrus generators pelicans", top_k=20)}


def test_a_link_loop_named_on_the_command_line_is_reported_and_the_rest_ingested(
    folder: Path, tmp_path: Path, sleuth_home: Path, capsys
):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code = cli_run(["ingest", str(loop), str(folder), "--store", "notes"])
    out = capsys.readouterr()
    assert code == 1
    assert f"{loop} is a symbolic link loop" in out.out
    assert "2 added" in out.out and "1 failed" in out.out
    assert sources(SQLiteStore.named("notes")) == {"walrus.md", "generators.txt"}


def test_links_out_of_a_folder_are_reported_and_not_followed(
    folder: Path, tmp_path: Path, sleuth_home: Path, capsys
):
    (folder / "private.md").symlink_to(tmp_path / "private.md")
    (folder / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    (folder / "again.md").symlink_to(folder / "walrus.md")  # inside the folder: fine
    code = cli_run(["ingest", str(folder), "--store", "notes"])
    out = capsys.readouterr()
    assert code == 0
    assert "links outside" in out.err and "pass --follow-links" in out.err
    assert f"{folder / 'elsewhere'} links to a folder" in out.err
    store = SQLiteStore.named("notes")
    assert sources(store) == {"walrus.md", "generators.txt"}
    assert store.count(where={"source": str(tmp_path / "private.md")}) == 0
    assert "2 skipped" in out.out


def test_follow_links_reads_through_links_and_skips_loops(folder: Path, tmp_path: Path):
    (folder / "private.md").symlink_to(tmp_path / "private.md")
    (folder / "nested" / "up").symlink_to(folder, target_is_directory=True)  # a loop
    store = SQLiteStore(tmp_path / "s.sqlite")
    report = ingest_paths([folder], store, follow_links=True)
    assert not report.failed
    [loop] = report.skipped
    assert "symbolic link loop" in loop.error and loop.path.endswith("up")
    assert sources(store) == {"walrus.md", "generators.txt", "private.md"}


def test_files_over_the_size_cap_fail_with_the_limit_and_how_to_raise_it(
    folder: Path, sleuth_home: Path, capsys
):
    (folder / "huge.txt").write_text("big words " * 150_000)  # 1.5 MB
    code = cli_run(["ingest", str(folder), "--store", "notes", "--max-file-mb", "1"])
    out = capsys.readouterr()
    assert code == 1
    assert "huge.txt is 1.5 MB, over the 1 MB limit for one file" in out.out
    assert "--max-file-mb" in out.out
    assert sources(SQLiteStore.named("notes")) == {"walrus.md", "generators.txt"}
    assert cli_run(["ingest", str(folder), "--store", "notes", "--max-file-mb", "2"]) == 0
    assert "1 added, 2 unchanged" in capsys.readouterr().out


def test_a_fifo_is_refused_without_waiting_for_a_writer(folder: Path, tmp_path: Path):
    fifo = folder / "pipe.txt"
    os.mkfifo(fifo)
    store = SQLiteStore(tmp_path / "s.sqlite")
    report = ingest_paths([fifo, folder], store)
    assert [(Path(f.path).name, f.error) for f in report.failed] == [
        ("pipe.txt", f"{fifo} is not a regular file")
    ]
    assert report.count("added") == 2  # the folder walk does not pick the FIFO up


def _ingest_process(folder: Path, store: str) -> subprocess.Popen[str]:
    return popen_sleuth(  # type: ignore[return-value]
        ["ingest", str(folder), "--store", store],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def _wait_for_line(process: subprocess.Popen[str], text: str) -> str:
    assert process.stderr is not None
    for line in process.stderr:
        if text in line:
            return line
    out, _ = process.communicate()
    raise AssertionError(f"the ingest ended (exit {process.returncode}) without saying {text!r}")


def test_an_ingest_waits_for_another_writers_lock_on_a_sqlite_store(
    folder: Path, sleuth_home: Path
):
    holder = SQLiteStore.named("shared")
    holder._db.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction
    process = _ingest_process(folder, "shared")
    try:
        line = _wait_for_line(process, "waiting for")
        assert "shared.sqlite: another process is writing it" in line
    finally:
        holder._db.execute("COMMIT")
    out, err = process.communicate(timeout=scaled(300))
    assert process.returncode == 0, err
    assert "shared: 2 files (2 added)" in out
    assert holder.count() == 2


def test_an_ingest_waits_for_another_process_holding_a_local_qdrant_folder(
    folder: Path, sleuth_home: Path
):
    from sleuth.rag.stores import QdrantVectorStore

    holder = QdrantVectorStore("docs")  # opens $SLEUTH_HOME/qdrant for this process
    process = _ingest_process(folder, "qdrant:docs")
    try:
        line = _wait_for_line(process, "waiting for")
        assert "another process has it open" in line
    finally:
        holder.close()
    out, err = process.communicate(timeout=scaled(300))
    assert process.returncode == 0, err
    assert "qdrant:docs: 2 files (2 added)" in out
    reopened = QdrantVectorStore("docs")
    assert reopened.count() == 2
    reopened.close()
