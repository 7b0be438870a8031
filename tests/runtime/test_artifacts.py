"""The artifact store: references, deduplication, integrity, durable writes, pointers, the default store."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from sleuth.activities.errors import to_application_error
from sleuth.agent.state import EvidenceItem
from sleuth.runtime.artifacts import (
    ArtifactCorruptError,
    ArtifactNotFoundError,
    ArtifactReferenceError,
    LocalArtifactStore,
    default_artifact_store,
    get_json,
    put_json,
)


class Report(BaseModel):
    title: str
    evidence: list[EvidenceItem]


def test_bytes_round_trip_under_their_sha256(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    data = b"a long evidence trail"
    ref = store.put_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    assert ref == f"sha256:{digest}"
    assert store.get_bytes(ref) == data
    assert (tmp_path / "artifacts" / digest[:2] / digest[2:]).read_bytes() == data


def test_identical_content_is_stored_once(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    assert store.put_bytes(b"same") == store.put_bytes(b"same")
    stored = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(stored) == 1


def test_json_and_pydantic_values_round_trip(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    report = Report(title="CRM", evidence=[EvidenceItem(index=1, tool="search", output="x")])
    ref = put_json(store, report)
    assert Report.model_validate(get_json(store, ref)) == report
    nested = {"b": [1, 2], "a": report}
    assert get_json(store, put_json(store, nested))["a"]["title"] == "CRM"
    # Key order does not change the reference: equal values share one artifact.
    assert put_json(store, {"x": 1, "y": 2}) == put_json(store, {"y": 2, "x": 1})
    with pytest.raises(TypeError, match="cannot store object"):
        put_json(store, {"bad": object()})


def test_missing_corrupt_and_malformed_references_are_clear_errors(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    missing = "sha256:" + "0" * 64
    with pytest.raises(ArtifactNotFoundError, match="SLEUTH_ARTIFACTS"):
        store.get_bytes(missing)
    ref = store.put_bytes(b"original")
    digest = ref.removeprefix("sha256:")
    (tmp_path / digest[:2] / digest[2:]).write_bytes(b"tampered")
    with pytest.raises(ArtifactNotFoundError, match="corrupt"):
        store.get_bytes(ref)
    for bad in ("md5:abc", "sha256:../../etc/passwd", "sha256:" + "Z" * 64):
        with pytest.raises(ValueError, match="not an artifact reference"):
            store.get_bytes(bad)


def test_default_store_follows_the_environment(
    sleuth_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = default_artifact_store()
    assert isinstance(store, LocalArtifactStore)
    assert store.root == sleuth_home / "artifacts"
    ref = store.put_bytes(b"shared")
    monkeypatch.setenv("SLEUTH_ARTIFACTS", str(tmp_path / "shared"))
    moved = default_artifact_store()
    assert isinstance(moved, LocalArtifactStore) and moved.root == tmp_path / "shared"
    with pytest.raises(ArtifactNotFoundError):
        moved.get_bytes(ref)


def test_writes_are_fsynced_then_renamed_then_the_folder_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalArtifactStore(tmp_path)
    steps: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        steps.append("fsync folder" if stat.S_ISDIR(os.fstat(descriptor).st_mode) else "fsync file")
        real_fsync(descriptor)

    def replace(source: str, target: Path) -> None:
        steps.append("rename")
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    store.put_bytes(b"evidence")
    assert steps == ["fsync file", "rename", "fsync folder"]
    steps.clear()
    store.swap_pointer("journal", None, "value")
    assert steps == ["fsync file", "rename", "fsync folder"]


def test_a_write_that_fails_halfway_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalArtifactStore(tmp_path)
    assert store.swap_pointer("journal", None, "old")

    def crash(source: str, target: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        store.swap_pointer("journal", "old", "new")
    assert store.read_pointer("journal") == "old"
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_storing_content_again_repairs_a_corrupt_file(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    ref = store.put_bytes(b"the checkpoint")
    digest = ref.removeprefix("sha256:")
    path = tmp_path / digest[:2] / digest[2:]
    for damage in (b"the checkpoinT", b"", b"the checkpoint and more"):
        path.write_bytes(damage)
        with pytest.raises(ArtifactCorruptError, match="storing the same content again repairs"):
            store.get_bytes(ref)
        assert store.put_bytes(b"the checkpoint") == ref
        assert store.get_bytes(ref) == b"the checkpoint"
    path.unlink()
    store.put_bytes(b"the checkpoint")
    assert store.get_bytes(ref) == b"the checkpoint"


def test_files_are_private_to_the_user(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    ref = store.put_bytes(b"a prompt nobody else should read")
    store.swap_pointer("journal", None, "value")
    digest = ref.removeprefix("sha256:")
    root = tmp_path / "artifacts"
    folders = [root, root / digest[:2], root / "pointers"]
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) == 3  # the artifact, the pointer, the pointer's lock
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in folders)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)


def test_pointers_swap_only_from_the_value_they_hold(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    name = 'journal/["default", "wf/../../etc", "run", "1"]'
    assert store.read_pointer(name) is None
    assert store.swap_pointer(name, None, "first")
    assert not store.swap_pointer(name, None, "again")
    assert not store.swap_pointer(name, "stale", "second")
    assert store.swap_pointer(name, "first", "second")
    assert store.read_pointer(name) == "second"
    assert store.read_pointer(name.upper()) is None
    # Names are hashed: whatever a workflow id holds, the file stays in the pointers folder.
    assert [p.parent for p in tmp_path.rglob("*") if p.is_file()] == [tmp_path / "pointers"] * 2


def test_concurrent_swaps_never_lose_an_update(tmp_path: Path) -> None:
    def add_one(times: int) -> None:
        store = LocalArtifactStore(tmp_path)  # one store (and file handles) per thread
        for _ in range(times):
            while True:
                current = store.read_pointer("counter")
                if store.swap_pointer("counter", current, str(int(current or 0) + 1)):
                    break

    threads = [threading.Thread(target=add_one, args=(40,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert LocalArtifactStore(tmp_path).read_pointer("counter") == "160"


def test_bad_references_fail_their_activity_at_once(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    with pytest.raises(ArtifactReferenceError) as malformed:
        store.get_bytes("sha256:not-hex")
    with pytest.raises(ArtifactNotFoundError) as unknown:
        store.get_bytes("sha256:" + "a" * 64)
    for error in (malformed.value, unknown.value):
        mapped = to_application_error(error)
        assert mapped is not None and mapped.non_retryable
        assert mapped.message == str(error)
