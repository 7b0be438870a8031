"""The artifact store on S3-compatible object storage (S3, MinIO, R2, GCS's S3 API), through obstore.

Selected by `SLEUTH_ARTIFACTS=s3://bucket/prefix`; the connection comes from the standard AWS
variables, read by the client as every AWS tool reads them: `AWS_ENDPOINT_URL` (unset: AWS
itself), `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (or any credential source the AWS
chain knows), `AWS_REGION` / `AWS_DEFAULT_REGION`. Install the client with `pip install 'sleuth[s3]'`.

Objects live at `<prefix>/<ab>/<cdef…>` (their SHA-256). A pointer is one small object at
`<prefix>/pointers/<sha256 of its name>`, swapped by a conditional write: the first value with
`If-None-Match: *`, each next one with `If-Match: <the ETag read>`. Of two writers that read the
same value, the store accepts exactly one; the other's swap returns False and it reads again, as
on the local backend. Every S3-compatible store named above supports both preconditions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sleuth.runtime.artifact_keys import pointer_key
from sleuth.runtime.errors import InvalidSettingError, SleuthError

if TYPE_CHECKING:
    from obstore.store import S3Store

INSTALL_HINT = "install the S3 client with `pip install 'sleuth[s3]'`"


class ObjectStoreError(SleuthError, OSError):
    """The object store refused or failed a request; the message says which and what to check."""


class S3Backend:
    """Objects and pointers in one bucket under one prefix (see the module docstring)."""

    verifies_writes = True

    def __init__(self, bucket: str, prefix: str = "", *, store: S3Store | None = None):
        if not bucket:
            raise InvalidSettingError(
                "SLEUTH_ARTIFACTS names no bucket: set it to s3://bucket/prefix"
            )
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.location = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._store = store if store is not None else _new_store(bucket, self.prefix)

    @classmethod
    def from_url(cls, url: str) -> S3Backend:
        """The backend `s3://bucket/prefix` names; `InvalidSettingError` saying what to set."""
        scheme, _, rest = url.partition("://")
        bucket, _, prefix = rest.partition("/")
        if scheme != "s3" or not bucket:
            raise InvalidSettingError(
                f"SLEUTH_ARTIFACTS={url!r} is not an object store URL: set it to "
                "s3://bucket/prefix (or to a folder)"
            )
        return cls(bucket, prefix)

    def write_object(self, key: str, data: bytes) -> None:
        obstore = _obstore()
        with self._errors("write", key):
            obstore.put(self._store, key, data)

    def read_object(self, key: str) -> bytes:
        obstore = _obstore()
        with self._errors("read", key):
            return bytes(obstore.get(self._store, key).bytes())

    def object_exists(self, key: str) -> bool:
        obstore = _obstore()
        try:
            with self._errors("check", key):
                obstore.head(self._store, key)
        except FileNotFoundError:
            return False
        return True

    def read_pointer(self, name: str) -> str | None:
        value, _ = self._read_pointer(name)
        return value

    def swap_pointer(self, name: str, expected: str | None, value: str) -> bool:
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        obstore = _obstore()
        key = pointer_key(name)
        data = value.encode("utf-8")
        if expected is None:
            try:
                with self._errors("create pointer", key, passing=(AlreadyExistsError,)):
                    obstore.put(self._store, key, data, mode="create")
            except AlreadyExistsError:
                return False
            return True
        current, e_tag = self._read_pointer(name)
        if current != expected or e_tag is None:
            return False
        try:
            with self._errors("swap pointer", key, passing=(PreconditionError,)):
                obstore.put(self._store, key, data, mode={"e_tag": e_tag})
        except PreconditionError:
            return False
        return True

    def _read_pointer(self, name: str) -> tuple[str | None, str | None]:
        obstore = _obstore()
        key = pointer_key(name)
        try:
            with self._errors("read pointer", key):
                result = obstore.get(self._store, key)
                data = bytes(result.bytes())
        except FileNotFoundError:
            return None, None
        return data.decode("utf-8", errors="replace"), result.meta.get("e_tag")

    def _errors(
        self, action: str, key: str, passing: tuple[type[BaseException], ...] = ()
    ) -> _Translated:
        return _Translated(self, action, key, passing)


class _Translated:
    """Turns the client's errors into `ObjectStoreError`s a person can act on; lets a missing
    object (`FileNotFoundError`) and the expected precondition failures through."""

    def __init__(
        self,
        backend: S3Backend,
        action: str,
        key: str,
        passing: tuple[type[BaseException], ...],
    ):
        self.backend, self.action, self.key, self.passing = backend, action, key, passing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if error is None or isinstance(error, self.passing):
            return None
        from obstore.exceptions import BaseError, NotFoundError, PermissionDeniedError

        where = f"{self.backend.location}/{self.key}"
        text = str(error).split("\n", 1)[0]
        if isinstance(error, FileNotFoundError | NotFoundError):
            if "NoSuchBucket" in str(error):
                raise ObjectStoreError(
                    f"bucket {self.backend.bucket!r} does not exist at the S3 endpoint "
                    "(AWS_ENDPOINT_URL): create it, or point SLEUTH_ARTIFACTS at an existing "
                    "bucket"
                ) from None
            return None
        if isinstance(error, PermissionDeniedError) or "Unauthenticated" in type(error).__name__:
            raise ObjectStoreError(
                f"the object store refused to {self.action} {where}: check AWS_ACCESS_KEY_ID, "
                f"AWS_SECRET_ACCESS_KEY and the bucket's policy ({text})"
            ) from None
        if isinstance(error, BaseError | OSError | ConnectionError):
            raise ObjectStoreError(
                f"could not {self.action} {where}: {text} (check AWS_ENDPOINT_URL, AWS_REGION "
                "and that the bucket exists)"
            ) from None
        return None


def _obstore() -> Any:
    try:
        import obstore
    except ImportError:
        raise InvalidSettingError(
            f"SLEUTH_ARTIFACTS is an s3:// URL but obstore is not installed: {INSTALL_HINT}"
        ) from None
    return obstore


def _new_store(bucket: str, prefix: str) -> S3Store:
    _obstore()
    from obstore.store import S3Store

    # The AWS variables are read by the client itself; plain-HTTP endpoints (MinIO on a LAN, a
    # local test server) are only used when AWS_ENDPOINT_URL names one.
    return S3Store(
        bucket,
        prefix=prefix or None,
        client_options={"allow_http": True},
        retry_config={"max_retries": 3},
    )
