"""The artifact store on S3 (moto's server on loopback): content addressing, pointers swapped by
conditional writes, and errors that say what to set."""

from __future__ import annotations

import threading

import pytest

from sleuth.activities.checkpoints import Pointer
from sleuth.runtime.artifacts import (
    ArtifactNotFoundError,
    BackedArtifactStore,
    default_artifact_store,
    get_json,
    put_json,
)
from sleuth.runtime.artifacts_s3 import ObjectStoreError, S3Backend
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.settings import SettingsError, load_settings
from tests.helpers.s3_server import S3Server


def test_the_url_selects_the_s3_store_and_content_round_trips(
    s3_artifacts: str, s3_server: S3Server
) -> None:
    store = default_artifact_store()
    assert isinstance(store, BackedArtifactStore) and isinstance(store.backend, S3Backend)
    assert store.backend.location == s3_artifacts
    ref = put_json(store, {"evidence": ["a", "b"]})
    assert get_json(store, ref) == {"evidence": ["a", "b"]}
    assert put_json(store, {"evidence": ["a", "b"]}) == ref
    bucket = s3_artifacts.removeprefix("s3://").split("/")[0]
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]]
    digest = ref.removeprefix("sha256:")
    assert keys == [f"artifacts/{digest[:2]}/{digest[2:]}"]
    with pytest.raises(ArtifactNotFoundError, match="SLEUTH_ARTIFACTS"):
        store.get_bytes("sha256:" + "0" * 64)


def test_pointers_swap_only_from_the_value_they_hold(s3_artifacts: str) -> None:
    store = default_artifact_store()
    assert store.read_pointer("journal/x") is None
    assert store.swap_pointer("journal/x", None, "one")
    assert not store.swap_pointer("journal/x", None, "again")
    assert not store.swap_pointer("journal/x", "stale", "two")
    assert store.swap_pointer("journal/x", "one", "two")
    assert store.read_pointer("journal/x") == "two"


def test_two_concurrent_writers_of_one_pointer_cannot_both_win(s3_artifacts: str) -> None:
    store = default_artifact_store()
    assert store.swap_pointer("race", None, "0")
    writers = 8
    barrier = threading.Barrier(writers)
    won: list[str] = []

    def write(name: str) -> None:
        barrier.wait()
        if store.swap_pointer("race", "0", name):
            won.append(name)

    threads = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert store.read_pointer("race") == won[0]


def test_read_modify_swap_loops_lose_no_update(s3_artifacts: str) -> None:
    # Each writer retries on a lost swap, as the checkpoint journal does: every increment lands.
    store = default_artifact_store()
    writers, increments = 4, 5

    def add() -> None:
        for _ in range(increments):
            while True:
                raw = store.read_pointer("counter")
                if store.swap_pointer("counter", raw, str(int(raw or 0) + 1)):
                    break

    threads = [threading.Thread(target=add) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.read_pointer("counter") == str(writers * increments)


def test_a_missing_bucket_and_a_bad_url_say_what_to_set(
    s3_artifacts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_ARTIFACTS", "s3://no-such-bucket-here/x")
    with pytest.raises(ObjectStoreError, match="no-such-bucket-here.*SLEUTH_ARTIFACTS"):
        default_artifact_store().put_bytes(b"data")
    for bad, reason in (("s3:///prefix", "names no bucket"), ("gs://b/p", "not a supported")):
        monkeypatch.setenv("SLEUTH_ARTIFACTS", bad)
        with pytest.raises(SettingsError, match=f"SLEUTH_ARTIFACTS.*{reason}.*s3://bucket/prefix"):
            load_settings()
    with pytest.raises(InvalidSettingError, match="s3://bucket/prefix"):
        S3Backend.from_url("s3://")


def test_a_journal_resumes_from_a_checkpoint_another_store_object_wrote(
    s3_artifacts: str,
) -> None:
    # Two workers have two store objects (two processes) over one bucket: what one saved, the
    # other reads, pointer and checkpoint alike.
    first = BackedArtifactStore(S3Backend.from_url(s3_artifacts))
    second = BackedArtifactStore(S3Backend.from_url(s3_artifacts))
    ref = put_json(first, {"step": 3})
    assert first.swap_pointer("journal/run", None, Pointer(1, [ref]).dumps())
    pointer = Pointer.parse(second.read_pointer("journal/run") or "")
    assert get_json(second, pointer.checkpoints[0]) == {"step": 3}
