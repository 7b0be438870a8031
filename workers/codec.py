"""Encryption at rest: an AES-GCM payload codec, turned on by a key.

With a key configured, every payload a Sleuth client or worker sends to Temporal (workflow inputs
and results, activity inputs and results, heartbeat details, memos, activity summaries, schedule
actions) is encrypted before it leaves the process, and so is every failure's message and stack
trace: the SDK's failure converter moves them into an encoded attribute that the codec encrypts
(`DefaultFailureConverterWithEncodedAttributes`), leaving "Encoded failure" in their place. The
server's database holds ciphertext only. The Web UI reads the plaintext through
`sleuth codec-server` (see `workers/codec_server.py`).

The keys are `SLEUTH_ENCRYPTION_KEY` / `SLEUTH_ENCRYPTION_KEY_FILE` (see `sleuth.runtime.artifact_crypto`,
which encrypts the artifact store with the same keys). The first key encrypts; every key
decrypts, so keys rotate: put the new key first and keep the old ones after it until no run that
used them remains. Each payload names its key by id (the first 8 bytes of the key's SHA-256, in
hex) in its metadata.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

# The key settings live in the SDK (the artifact store uses them too); re-exported here.
from sleuth.runtime.artifact_crypto import (
    KEY_BYTES,
    KEY_ENV,
    KEY_FILE_ENV,
    NONCE_BYTES,
    EncryptionKeyError,
    configured_keys,
    key_id,
    new_key,
    parse_key,
    write_key_file,
)

__all__ = [
    "ENCODING",
    "KEY_BYTES",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "KEY_ID_METADATA",
    "NONCE_BYTES",
    "AESGCMCodec",
    "EncryptionKeyError",
    "configured_codec",
    "configured_keys",
    "data_converter",
    "encodes_failures",
    "encrypting",
    "key_id",
    "new_key",
    "parse_key",
    "write_key_file",
]

ENCODING = b"binary/encrypted"
"""The `encoding` metadata of an encrypted payload."""
KEY_ID_METADATA = "encryption-key-id"


class AESGCMCodec(PayloadCodec):
    """AES-256-GCM over each whole serialized payload; the first key encrypts, all decrypt."""

    def __init__(self, keys: Sequence[bytes]):
        if not keys:
            raise EncryptionKeyError("the codec needs at least one key")
        self._keys = {key_id(key): AESGCM(key) for key in keys}
        self._active = key_id(keys[0])

    @property
    def active_key_id(self) -> str:
        return self._active

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        # The key id is authenticated too: a payload cannot be relabelled to another key.
        sealed = self._keys[self._active].encrypt(
            nonce, payload.SerializeToString(), self._active.encode()
        )
        return Payload(
            metadata={"encoding": ENCODING, KEY_ID_METADATA: self._active.encode()},
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        name = payload.metadata.get(KEY_ID_METADATA, b"").decode()
        cipher = self._keys.get(name)
        if cipher is None:
            raise EncryptionKeyError(
                f"payload encrypted with key {name!r}, which is not configured (configured: "
                f"{', '.join(sorted(self._keys))}); add that key after the active one in "
                f"{KEY_ENV} or {KEY_FILE_ENV}"
            )
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        try:
            return Payload.FromString(cipher.decrypt(nonce, sealed, name.encode()))
        except InvalidTag:
            raise EncryptionKeyError(
                f"payload under key {name!r} failed authentication: it was altered"
            ) from None

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(payload) for payload in payloads]


def configured_codec() -> AESGCMCodec | None:
    """The codec the configured keys make, or None when no key is configured."""
    keys = configured_keys()
    return AESGCMCodec(keys) if keys else None


def data_converter() -> DataConverter:
    """The pydantic data converter; when a key is configured it encrypts payloads and failures,
    and it offloads large payloads to the artifact store (`workers/payload_storage.py`)."""
    # Imported here: payload_storage reads the artifact settings, which codec users may not need.
    from sleuth.workers.payload_storage import configured_external_storage

    codec = configured_codec()
    converter = (
        pydantic_data_converter if codec is None else encrypting(pydantic_data_converter, codec)
    )
    storage = configured_external_storage()
    if storage is not None:
        converter = dataclasses.replace(converter, external_storage=storage)
    return converter


def encrypting(converter: DataConverter, codec: AESGCMCodec) -> DataConverter:
    """`converter` with `codec` on its payloads (unless it has a codec already) and, in place of
    the SDK's default failure converter, the one that moves failure messages and stack traces
    into an attribute the codec encrypts. Check a custom failure converter with
    `encodes_failures`."""
    failures = converter.failure_converter_class
    if failures is DefaultFailureConverter:
        failures = DefaultFailureConverterWithEncodedAttributes
    return dataclasses.replace(
        converter,
        payload_codec=converter.payload_codec or codec,
        failure_converter_class=failures,
    )


_PROBE = "sleuth-failure-probe"


def encodes_failures(converter: DataConverter) -> bool:
    """Whether `converter` keeps failure messages and stack traces out of the failure's plain
    fields (so its codec sees them), tried on a sample exception."""
    failure = Failure()
    try:
        raise RuntimeError(_PROBE)
    except RuntimeError as exc:
        converter.failure_converter.to_failure(exc, converter.payload_converter, failure)
    return _PROBE not in failure.message and not failure.stack_trace
