"""Encryption at rest: an AES-GCM payload codec, turned on by a key.

With a key configured, every payload a Sleuth client or worker sends to Temporal (workflow inputs
and results, activity inputs and results, heartbeat details, memos, schedule actions) is encrypted
before it leaves the process, so the server's database holds ciphertext only. The Web UI reads the
plaintext through `sleuth codec-server` (see `workers/codec_server.py`).

| variable | meaning |
| --- | --- |
| `SLEUTH_ENCRYPTION_KEY` | one or more base64-encoded 32-byte keys, comma-separated |
| `SLEUTH_ENCRYPTION_KEY_FILE` | a file (mode 0600) with one such key per line |

The first key encrypts; every key decrypts, so keys rotate: put the new key first and keep the
old ones after it until no run that used them remains. Each payload names its key by id (the
first 8 bytes of the key's SHA-256, in hex) in its metadata.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

from sleuth.runtime.errors import SleuthError
from sleuth.runtime.paths import PRIVATE_FILE_MODE, private_file
from sleuth.runtime.settings import load_settings

KEY_ENV = "SLEUTH_ENCRYPTION_KEY"
KEY_FILE_ENV = "SLEUTH_ENCRYPTION_KEY_FILE"
ENCODING = b"binary/encrypted"
"""The `encoding` metadata of an encrypted payload."""
KEY_ID_METADATA = "encryption-key-id"
KEY_BYTES = 32
NONCE_BYTES = 12


class EncryptionKeyError(SleuthError, ValueError):
    """A key setting that cannot be used, or a payload no configured key decrypts."""


def key_id(key: bytes) -> str:
    """A key's public name: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(key).hexdigest()[:16]


def new_key() -> str:
    """A fresh random key, base64-encoded, for `SLEUTH_ENCRYPTION_KEY` or a key file."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def write_key_file(path: Path) -> Path:
    """Create `path` (0600, refusing to overwrite) holding a fresh key."""
    if path.exists():
        raise EncryptionKeyError(f"{path} exists; pick a new file, or put a new key first in it")
    private_file(path)
    path.write_text(new_key() + "\n")
    return path


def parse_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise EncryptionKeyError(
            f"{where}: a key is {KEY_BYTES} random bytes in base64 (44 characters); make one "
            "with `sleuth codec-server --new-key FILE`"
        )
    return key


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


def configured_keys() -> list[bytes]:
    """The keys `SLEUTH_ENCRYPTION_KEY` and `SLEUTH_ENCRYPTION_KEY_FILE` give, active first."""
    settings = load_settings()
    listed = settings.encryption_key.get_secret_value() if settings.encryption_key else ""
    keys = [parse_key(part, KEY_ENV) for part in listed.split(",") if part.strip()]
    if settings.encryption_key_file is not None:
        keys += _keys_from_file(settings.encryption_key_file.expanduser())
    return keys


def _keys_from_file(path: Path) -> list[bytes]:
    try:
        mode = path.stat().st_mode
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise EncryptionKeyError(f"{KEY_FILE_ENV}={path}: cannot read it ({exc})") from None
    if mode & 0o077:
        raise EncryptionKeyError(
            f"{KEY_FILE_ENV}={path} is readable by others (mode {stat.filemode(mode)}); "
            f"run `chmod {PRIVATE_FILE_MODE:o} {path}`"
        )
    keys = [parse_key(line, f"{path}:{n}") for n, line in enumerate(lines, 1) if line.strip()]
    if not keys:
        raise EncryptionKeyError(f"{KEY_FILE_ENV}={path} holds no key")
    return keys


def configured_codec() -> AESGCMCodec | None:
    """The codec the configured keys make, or None when no key is configured."""
    keys = configured_keys()
    return AESGCMCodec(keys) if keys else None


def data_converter() -> DataConverter:
    """The pydantic data converter, encrypting payloads when a key is configured."""
    codec = configured_codec()
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec)
