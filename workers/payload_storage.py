"""Temporal External Storage over Sleuth's artifact store: no payload is refused for its size.

Every payload a Sleuth client or worker sends to Temporal (workflow and activity inputs and
results, signals, heartbeat details, continue-as-new inputs) of at least
`SLEUTH_PAYLOAD_OFFLOAD_BYTES` (default 256 KiB) is written to the artifact store
(`SLEUTH_ARTIFACTS`: a folder, or `s3://bucket/prefix` shared by every worker), and the workflow
history holds only a small reference. Below the threshold a payload stays inline, as before.
Temporal itself warns from 512 KiB and refuses a payload of 2 MiB, and that refusal used to fail
a workflow task on every attempt while the run stayed RUNNING.

The payload stored is the one the codec produced, so with an encryption key the store holds
ciphertext. `sleuth codec-server` resolves references, so the Web UI shows offloaded payloads.

A payload over `SLEUTH_MAX_PAYLOAD_BYTES` (default 50 MiB) is refused here, with a non-retryable
`PayloadTooLarge` error naming what produced it: the step fails at once instead of writing tens
of megabytes to the store on every attempt.

The SDK's own S3 driver (`temporalio.contrib.aws.s3driver`) keeps payloads in a bucket too; this
driver uses the artifact store instead, so one setting places all of a run's data, the local
folder works the same for one machine, and the store's checksums guard every payload.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from google.protobuf import json_format
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1.external_storage_pb2 import ExternalStorageReference
from temporalio.converter import (
    ExternalStorage,
    StorageDriver,
    StorageDriverActivityInfo,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)
from temporalio.exceptions import ApplicationError

from sleuth.runtime.artifacts import ArtifactStore, check_ref, default_artifact_store
from sleuth.runtime.settings import load_settings

DRIVER_NAME = "sleuth.runtime.artifacts"
"""The driver's name in every reference it writes: workers and the codec server look it up."""
PAYLOAD_TOO_LARGE = "PayloadTooLarge"
"""The error type of a payload over `SLEUTH_MAX_PAYLOAD_BYTES`."""
_REFERENCE_TYPE = ExternalStorageReference.DESCRIPTOR.full_name.encode()


class ArtifactStorageDriver(StorageDriver):
    """Stores each payload as an artifact (its serialized bytes); the claim is the reference."""

    def __init__(self, store: ArtifactStore | None = None, max_payload_bytes: int | None = None):
        """`store` defaults to the process's artifact store, looked up at each call (so it follows
        `SLEUTH_ARTIFACTS`); `max_payload_bytes` to `SLEUTH_MAX_PAYLOAD_BYTES`."""
        self._store = store
        self._max_payload_bytes = max_payload_bytes

    @property
    def artifacts(self) -> ArtifactStore:
        return self._store or default_artifact_store()

    def name(self) -> str:
        return DRIVER_NAME

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        limit = self._max_payload_bytes or load_settings().max_payload_bytes
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            if len(data) > limit:
                raise ApplicationError(
                    f"a payload of {len(data):,} bytes for {_describe(context)} is over "
                    f"SLEUTH_MAX_PAYLOAD_BYTES ({limit:,}): keep large data in the artifact "
                    "store or the workspace and pass references, or raise the limit",
                    type=PAYLOAD_TOO_LARGE,
                    non_retryable=True,
                )
            ref = await asyncio.to_thread(self.artifacts.put_bytes, data)
            claims.append(StorageDriverClaim(claim_data={"ref": ref, "bytes": str(len(data))}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        found = []
        for claim in claims:
            ref = check_ref(claim.claim_data.get("ref"))
            found.append(Payload.FromString(await asyncio.to_thread(self.artifacts.get_bytes, ref)))
        return found


def _describe(context: StorageDriverStoreContext) -> str:
    described = _describe_target(context)
    if activity.in_activity():
        info = activity.info()
        return f"activity {info.activity_type} ({info.activity_id}) of {described}"
    return described


def _describe_target(context: StorageDriverStoreContext) -> str:
    target = context.target
    if isinstance(target, StorageDriverActivityInfo):
        return f"activity {target.type or '?'} ({target.id or '?'})"
    if isinstance(target, StorageDriverWorkflowInfo):
        return f"workflow {target.type or '?'} {target.id or ''}".rstrip()
    return "a client call"


def configured_external_storage() -> ExternalStorage | None:
    """External Storage as the settings give it, or None with `SLEUTH_PAYLOAD_OFFLOAD=false`."""
    settings = load_settings()
    if not settings.payload_offload:
        return None
    return ExternalStorage(
        drivers=[ArtifactStorageDriver()], payload_size_threshold=settings.payload_offload_bytes
    )


def stored_reference(payload: Payload) -> str | None:
    """The artifact reference of a payload this driver offloaded, or None for any other payload."""
    if payload.metadata.get("encoding") != b"json/protobuf":
        return None
    if payload.metadata.get("messageType") != _REFERENCE_TYPE:
        return None
    reference = json_format.Parse(payload.data, ExternalStorageReference())
    if reference.driver_name != DRIVER_NAME:
        return None
    return check_ref(reference.claim_data.get("ref"))


def resolve(payload: Payload, store: ArtifactStore | None = None) -> Payload:
    """`payload`, or the payload it refers to when it is an offloaded one (for the codec server)."""
    ref = stored_reference(payload)
    if ref is None:
        return payload
    return Payload.FromString((store or default_artifact_store()).get_bytes(ref))
