"""The content-addressed artifact store: references, deduplication, integrity, the default store."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pydantic import BaseModel

from sleuth.artifacts import (
    ArtifactNotFoundError,
    LocalArtifactStore,
    default_artifact_store,
    get_json,
    put_json,
)
from sleuth.state import EvidenceItem


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
