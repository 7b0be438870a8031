"""Encryption keys, and artifacts encrypted at rest with them (AES-256-GCM).

The keys are Sleuth's one encryption setting, shared by the payload codec (`workers/codec.py`)
and the artifact store:

| variable | meaning |
| --- | --- |
| `SLEUTH_ENCRYPTION_KEY` | one or more base64-encoded 32-byte keys, comma-separated |
| `SLEUTH_ENCRYPTION_KEY_FILE` | a file (mode 0600) with one such key per line |

The first key encrypts; every key decrypts, so keys rotate: put the new key first and keep the
old ones after it until nothing written with them remains. A key's id is the first 8 bytes of
its SHA-256, in hex: public, it names the key without revealing it.

An encrypted artifact is `MAGIC`, the 16-character key id, a 12-byte nonce, then the AES-GCM
ciphertext and tag of the content; the magic and key id are authenticated too, so a file cannot
be relabelled to another key. Stores address artifacts by the digest of the *plaintext*, so
references and deduplication do not change when a key is set, and content stored before a key
was set still reads. A store writes `seal(data)` and reads back through `open_sealed`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sleuth.runtime.errors import SleuthError
from sleuth.runtime.paths import PRIVATE_FILE_MODE, private_file
from sleuth.runtime.settings import load_settings

KEY_ENV = "SLEUTH_ENCRYPTION_KEY"
KEY_FILE_ENV = "SLEUTH_ENCRYPTION_KEY_FILE"
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_ID_CHARS = 16
MAGIC = b"\x00sleuth-aesgcm\x01"
"""The first bytes of an encrypted artifact: a format marker (with its version, `\\x01`)."""
HEADER_BYTES = len(MAGIC) + KEY_ID_CHARS + NONCE_BYTES


class EncryptionKeyError(SleuthError, ValueError):
    """A key setting that cannot be used, or a payload no configured key decrypts."""


class ArtifactKeyError(SleuthError, PermissionError):
    """An encrypted artifact that no configured key opens: the message names the key and the
    variable to set. Not a damaged artifact: a worker that has the key reads it."""


def key_id(key: bytes) -> str:
    """A key's public name: the first 8 bytes of its SHA-256, in hex."""
    return hashlib.sha256(key).hexdigest()[:KEY_ID_CHARS]


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


class Keyring:
    """AES-GCM ciphers by key id; the first key is the active one (None: no key configured)."""

    def __init__(self, keys: Sequence[bytes]):
        self.ciphers = {key_id(key): AESGCM(key) for key in keys}
        self.active: str | None = key_id(keys[0]) if keys else None


def configured_keyring() -> Keyring:
    """The keyring of the configured keys, built again only when a setting or the key file
    changes (artifacts are read and written many times a step)."""
    settings = load_settings()
    file_state: tuple[int, int, int] | None = None
    if settings.encryption_key_file is not None:
        try:
            info = settings.encryption_key_file.expanduser().stat()
            file_state = (info.st_ino, info.st_mtime_ns, info.st_size)
        except OSError:
            file_state = None  # configured_keys() reports it
    return _keyring(settings.encryption_key, settings.encryption_key_file, file_state)


@functools.lru_cache(maxsize=8)
def _keyring(*_settings: object) -> Keyring:
    return Keyring(configured_keys())


def is_sealed(stored: bytes) -> bool:
    """Whether `stored` starts like an encrypted artifact."""
    return stored.startswith(MAGIC) and len(stored) >= HEADER_BYTES


def sealed_key_id(stored: bytes) -> str | None:
    """The id of the key an encrypted artifact was written with; None for plaintext."""
    if not is_sealed(stored):
        return None
    return stored[len(MAGIC) : len(MAGIC) + KEY_ID_CHARS].decode("ascii", errors="replace")


def seal(data: bytes) -> bytes:
    """`data` encrypted with the active key, or `data` itself when no key is configured."""
    keyring = configured_keyring()
    if keyring.active is None:
        return data
    header = MAGIC + keyring.active.encode("ascii")
    nonce = os.urandom(NONCE_BYTES)
    return header + nonce + keyring.ciphers[keyring.active].encrypt(nonce, data, header)


def open_sealed(stored: bytes, is_expected: Callable[[bytes], bool], where: str) -> bytes | None:
    """The content `stored` holds if `is_expected` accepts it (a store checks its digest), else
    None: the file was damaged or altered after it was written.

    Plaintext written before a key was set reads as it is. `ArtifactKeyError` (naming `where`,
    the artifact) when it is encrypted with a key that is not configured."""
    if is_expected(stored):
        return stored
    name = sealed_key_id(stored)
    if name is None:
        return None
    keyring = configured_keyring()
    cipher = keyring.ciphers.get(name)
    if cipher is None:
        raise ArtifactKeyError(_missing_key_message(where, name, keyring))
    header = stored[: len(MAGIC) + KEY_ID_CHARS]
    nonce = stored[len(header) : HEADER_BYTES]
    try:
        data = cipher.decrypt(nonce, stored[HEADER_BYTES:], header)
    except InvalidTag:
        return None
    return data if is_expected(data) else None


def is_current(stored: bytes, is_expected: Callable[[bytes], bool], where: str) -> bool:
    """Whether `stored` already holds the expected content as a write would store it now:
    encrypted with the active key when one is configured, so storing the content again seals a
    plaintext copy and re-encrypts one under an older key. Without a key, an encrypted copy is
    left as it is, never replaced by plaintext."""
    keyring = configured_keyring()
    name = sealed_key_id(stored)
    if keyring.active is None and name is not None and not is_expected(stored):
        return True
    try:
        content = open_sealed(stored, is_expected, where)
    except ArtifactKeyError:
        return False  # under a key this worker lacks: write its own copy with the active key
    if content is None:
        return False
    return name == keyring.active if content is not stored else keyring.active is None


def _missing_key_message(where: str, name: str, keyring: Keyring) -> str:
    if keyring.active is None:
        return (
            f"{where} is encrypted (key id {name}) and no encryption key is configured: set "
            f"{KEY_ENV} (or {KEY_FILE_ENV}) to the key it was written with, as on the workers "
            "that wrote it"
        )
    return (
        f"{where} is encrypted with key id {name}, which is not configured (configured: "
        f"{', '.join(sorted(keyring.ciphers))}); add that key after the active one in {KEY_ENV} "
        f"or {KEY_FILE_ENV}"
    )
