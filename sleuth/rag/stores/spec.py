"""Store specs: the `--store` strings of `sleuth ingest`, naming a store of any kind.

| spec | store |
| --- | --- |
| `NAME`, `sqlite:NAME` | `SQLiteStore` at `$SLEUTH_HOME/stores/NAME.sqlite` |
| `qdrant:COLLECTION` | `QdrantVectorStore`, local mode under `$SLEUTH_HOME/qdrant` |
| `qdrant:https://HOST:6333/COLLECTION` | `QdrantVectorStore` on a server; key from `$QDRANT_API_KEY` |
| `chroma:COLLECTION` | `ChromaVectorStore`, embedded under `$SLEUTH_HOME/chroma` |
| `chroma:http://HOST:8000/COLLECTION` | `ChromaVectorStore` on a server; token from `$CHROMA_AUTH_TOKEN` |
| `pgvector:TABLE` | `PgVectorStore`, connecting with libpq's `PG*` environment variables |
| `pgvector:postgresql://USER@HOST:5432/DB?table=TABLE` | `PgVectorStore`; password from `$PGPASSWORD` |
| `opensearch:https://HOST:9200/INDEX` | `OpenSearchVectorStore`; `$OPENSEARCH_USER`/`$OPENSEARCH_PASSWORD` |

`?dimension=N` sets the vector dimension of a new collection (default: the embedder's). Secrets
come from the environment only: a spec that carries a password, key or token is refused, with
the variable to use instead, so none lands in shell history, process lists or logs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from sleuth.rag.stores.base import BaseVectorStore, StoreError
from sleuth.runtime.errors import MissingExtraError

KINDS = ("sqlite", "qdrant", "chroma", "pgvector", "opensearch")
OPENSEARCH_USER_ENV = "OPENSEARCH_USER"
OPENSEARCH_PASSWORD_ENV = "OPENSEARCH_PASSWORD"
_SECRET_PARAMS = {"password", "api_key", "apikey", "api-key", "token", "secret", "key"}
_SECRET_ENV = {
    "qdrant": "QDRANT_API_KEY",
    "chroma": "CHROMA_AUTH_TOKEN",
    "pgvector": "PGPASSWORD",
    "opensearch": f"{OPENSEARCH_USER_ENV} and {OPENSEARCH_PASSWORD_ENV}",
}


def open_store(
    spec: str,
    *,
    dimension: int | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> BaseVectorStore:
    """The store `spec` names (see the module docstring). `dimension` is used when the spec gives
    none; `on_wait` hears about waiting for another process's lock on an embedded store."""
    kind, _, rest = spec.partition(":") if ":" in spec else ("sqlite", "", spec)
    if kind not in KINDS:
        raise StoreError(
            f"--store {spec!r}: unknown kind {kind!r}; use NAME (SQLite) or one of "
            + ", ".join(f"{k}:..." for k in KINDS)
        )
    target, params = _split_params(spec, kind, rest)
    if "dimension" in params:
        dimension = _dimension(spec, params.pop("dimension"))
    if kind == "sqlite":
        _no_params(spec, params)
        from sleuth.rag.stores.sqlite import SQLiteStore

        return SQLiteStore.named(target, on_wait=on_wait)
    if kind == "pgvector":
        return _pgvector(spec, target, params, dimension)
    _no_params(spec, params)
    url, name = _server_and_name(spec, kind, target)
    if kind == "qdrant":
        from sleuth.rag.stores.qdrant import QdrantVectorStore

        if url is None:
            return QdrantVectorStore(name, dimension, on_wait=on_wait)
        return QdrantVectorStore(name, dimension, url=url)
    if kind == "chroma":
        from sleuth.rag.stores.chroma import ChromaVectorStore

        return ChromaVectorStore(name, dimension, url=url)
    if url is None:
        raise StoreError(
            f"--store {spec!r}: give the server, as opensearch:https://HOST:9200/INDEX"
        )
    return _opensearch(url, name, dimension)


def _split_params(spec: str, kind: str, rest: str) -> tuple[str, dict[str, str]]:
    target, _, query = rest.partition("?")
    params = dict(parse_qsl(query, keep_blank_values=True))
    secret = _SECRET_PARAMS & {key.lower() for key in params}
    if secret or urlsplit(target).password is not None:
        raise StoreError(
            f"--store for {kind} must not carry a secret ({', '.join(sorted(secret)) or 'a password in the URL'}): "
            f"set {_SECRET_ENV.get(kind, 'it in the environment')} in the environment instead"
        )
    if not target:
        raise StoreError(f"--store {spec!r}: name the store after '{kind}:'")
    return target, params


def _dimension(spec: str, value: str) -> int:
    if not value.isdigit() or int(value) <= 0:
        raise StoreError(f"--store {spec!r}: dimension must be a positive whole number")
    return int(value)


def _no_params(spec: str, params: dict[str, str]) -> None:
    if params:
        raise StoreError(f"--store {spec!r}: unknown option(s) {', '.join(sorted(params))}")


def _server_and_name(spec: str, kind: str, target: str) -> tuple[str | None, str]:
    """(server URL or None for the embedded store, collection name)."""
    if "://" not in target:
        if "/" in target:
            raise StoreError(f"--store {spec!r}: a {kind} collection name has no '/'")
        return None, target
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StoreError(f"--store {spec!r}: the server must be an http:// or https:// URL")
    name = parts.path.strip("/")
    if not name or "/" in name:
        raise StoreError(f"--store {spec!r}: end the URL with the collection, as {kind}:URL/NAME")
    return urlunsplit((parts.scheme, parts.netloc, "", "", "")), name


def _pgvector(
    spec: str, target: str, params: dict[str, str], dimension: int | None
) -> BaseVectorStore:
    from sleuth.rag.stores.pgvector import PgVectorStore

    if "://" not in target:
        _no_params(spec, params)
        return PgVectorStore(target, dimension)
    parts = urlsplit(target)
    if parts.scheme not in ("postgresql", "postgres"):
        raise StoreError(
            f"--store {spec!r}: use pgvector:postgresql://USER@HOST:5432/DB?table=NAME"
        )
    table = params.pop("table", "sleuth_chunks")
    dsn = urlunsplit(parts._replace(query=urlencode(params)))
    return PgVectorStore(table, dimension, dsn=dsn)


def _opensearch(url: str, index: str, dimension: int | None) -> BaseVectorStore:
    from sleuth.rag.stores.opensearch import OpenSearchVectorStore

    user = os.environ.get(OPENSEARCH_USER_ENV)
    password = os.environ.get(OPENSEARCH_PASSWORD_ENV)
    if bool(user) != bool(password):
        raise StoreError(
            f"set both {OPENSEARCH_USER_ENV} and {OPENSEARCH_PASSWORD_ENV}, or neither"
        )
    if not user:
        return OpenSearchVectorStore(index, hosts=[url], dimension=dimension)
    try:
        from opensearchpy import OpenSearch
    except ImportError as exc:
        raise MissingExtraError(
            "OpenSearchVectorStore needs the opensearch extra: pip install 'sleuth[opensearch]'"
        ) from exc
    client = OpenSearch(hosts=[url], http_auth=(user, password))
    return OpenSearchVectorStore(index, client=client, dimension=dimension)
