"""`--store` specs: every kind of store from `sleuth ingest`, secrets only from the environment."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from sleuth import App, RAGRetriever
from sleuth.rag.stores import (
    ChromaVectorStore,
    Document,
    OpenSearchVectorStore,
    PgVectorStore,
    QdrantVectorStore,
    SQLiteStore,
    StoreError,
)
from sleuth.rag.stores.spec import open_store
from sleuth.workers.cli import run as cli_run
from tests.helpers.timeouts import scaled


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "walrus.md").write_text("The walrus operator assigns inside an expression.\n")
    (docs / "generators.txt").write_text("Generators yield values lazily, one at a time.\n")
    return docs


def spec_for(kind: str, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return "notes"
    if kind in ("qdrant", "chroma"):
        return f"{kind}:notes"
    if kind == "chroma-server":
        return f"chroma:{request.getfixturevalue('chroma_url')}/notes-{request.node.name[-12:-1]}"
    if kind == "pgvector":
        table = f"notes_{abs(hash(request.node.name)) % 10**8}"
        return f"pgvector:{request.getfixturevalue('pg_uri')}?table={table}"
    return f"opensearch:{request.getfixturevalue('osmem_clone').url}/notes"


@pytest.mark.parametrize(
    "kind", ["sqlite", "qdrant", "chroma", "chroma-server", "pgvector", "opensearch"]
)
def test_sleuth_ingest_fills_every_kind_of_store(
    kind: str, folder: Path, request: pytest.FixtureRequest, capsys
):
    spec = spec_for(kind, request)
    assert cli_run(["ingest", str(folder), "--store", spec]) == 0, capsys.readouterr()
    assert f"{spec}: 2 files (2 added)" in capsys.readouterr().out
    assert cli_run(["ingest", str(folder), "--store", spec]) == 0
    assert "(2 unchanged), 0 chunks written" in capsys.readouterr().out
    store = open_store(spec)
    try:
        [hit] = store.search("walrus", top_k=1)
        assert hit.source == str((folder / "walrus.md").resolve())
        assert store.count() == 2
    finally:
        store.close()


def test_embedded_stores_live_under_sleuth_home(sleuth_home: Path):
    for spec, kind in (
        ("docs", SQLiteStore),
        ("sqlite:docs", SQLiteStore),
        ("qdrant:docs", QdrantVectorStore),
        ("chroma:docs", ChromaVectorStore),
    ):
        store = open_store(spec)
        assert isinstance(store, kind)
        store.close()
    assert (sleuth_home / "stores" / "docs.sqlite").is_file()
    assert (sleuth_home / "qdrant").is_dir() and (sleuth_home / "chroma").is_dir()


@pytest.mark.parametrize("kind", ["qdrant", "pgvector"])
def test_ingest_with_an_embedder_makes_a_vector_store_of_its_dimension(
    kind: str, folder: Path, request: pytest.FixtureRequest, capsys
):
    spec = spec_for(kind, request)
    assert cli_run(["ingest", str(folder), "--store", spec, "--embedder", "local"]) == 0
    store = open_store(spec)
    try:
        assert getattr(store, "dimension", None) == 384
        from sleuth.rag import LocalEmbeddings

        retriever = RAGRetriever(store=store, embedder=LocalEmbeddings())
        # No word of the question is in the corpus: only the vectors can find the chunk.
        assert retriever.retrieve("lazy iteration producing items", top_k=1)[0].source.endswith(
            "generators.txt"
        )
    finally:
        store.close()


def test_pgvector_table_spec_connects_with_libpq_environment(
    pg_uri: str, monkeypatch: pytest.MonkeyPatch
):
    parts = urlsplit(pg_uri)
    monkeypatch.setenv("PGHOST", parts.hostname or "")
    monkeypatch.setenv("PGPORT", str(parts.port))
    monkeypatch.setenv("PGUSER", parts.username or "")
    monkeypatch.setenv("PGDATABASE", parts.path.strip("/"))
    store = open_store("pgvector:from_environment?dimension=2")
    assert isinstance(store, PgVectorStore) and store.dimension == 2
    store.add([Document(id="a", text="environment only", embedding=[1.0, 0.0])])
    assert store.count() == 1
    store.close()


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("qdrant:https://qdrant.example:6333/docs?api_key=s3cr3t-value", "QDRANT_API_KEY"),
        ("chroma:http://chroma.example:8000/docs?token=s3cr3t-value", "CHROMA_AUTH_TOKEN"),
        ("pgvector:postgresql://alice:s3cr3t-value@db.example/research", "PGPASSWORD"),
        ("pgvector:postgresql://alice@db.example/research?password=s3cr3t-value", "PGPASSWORD"),
        ("opensearch:https://admin:s3cr3t-value@search.example:9200/docs", "OPENSEARCH_PASSWORD"),
    ],
)
def test_a_store_spec_carrying_a_secret_is_refused_naming_the_variable(
    spec: str, variable: str, folder: Path, capsys
):
    assert cli_run(["ingest", str(folder), "--store", spec]) == 2
    err = capsys.readouterr().err
    assert variable in err and "environment" in err
    assert "s3cr3t-value" not in err


def test_bad_specs_say_what_to_write():
    with pytest.raises(StoreError, match="unknown kind 'mongo'"):
        open_store("mongo:docs")
    with pytest.raises(StoreError, match="dimension must be a positive whole number"):
        open_store("qdrant:docs?dimension=-3")
    with pytest.raises(StoreError, match="end the URL with the collection"):
        open_store("qdrant:https://qdrant.example:6333")
    with pytest.raises(StoreError, match="give the server"):
        open_store("opensearch:docs")


class RecordingServer(ThreadingHTTPServer):
    """A loopback HTTP server that records request headers and answers JSON by path."""

    def __init__(self, answers: dict[tuple[str, str], dict]):
        self.answers = answers
        self.requests: list[tuple[str, str, dict[str, str]]] = []

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                server: RecordingServer = self.server  # type: ignore[assignment]
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                path = self.path.split("?")[0]
                headers = {key.lower(): value for key, value in self.headers.items()}
                server.requests.append((self.command, path, headers))
                body = json.dumps(server.answers.get((self.command, path), {})).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_HEAD = _answer

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def recording_server() -> Iterator[RecordingServer]:
    servers: list[RecordingServer] = []

    def start(answers: dict[tuple[str, str], dict]) -> RecordingServer:
        server = RecordingServer(answers)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start  # type: ignore[misc]
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
def test_the_qdrant_api_key_comes_from_the_environment(
    recording_server, monkeypatch: pytest.MonkeyPatch
):
    server = recording_server(
        {
            ("GET", "/"): {"title": "qdrant", "version": version("qdrant-client")},
            ("GET", "/collections/docs/exists"): {"result": {"exists": False}, "status": "ok"},
        }
    )
    monkeypatch.setenv("QDRANT_API_KEY", "key-from-env")
    store = open_store(f"qdrant:{server.url}/docs")
    assert store.count() == 0
    # qdrant-client asks for the server version from a thread of its own; let it finish here.
    deadline = time.monotonic() + scaled(120)
    while ("GET", "/") not in [(method, path) for method, path, _ in server.requests]:
        assert time.monotonic() < deadline, "qdrant-client never asked for the server version"
        time.sleep(0.05)
    assert all(headers.get("api-key") == "key-from-env" for _, _, headers in server.requests)
    assert any(path.startswith("/collections") for _, path, _ in server.requests)


def test_opensearch_credentials_come_from_the_environment(
    recording_server, monkeypatch: pytest.MonkeyPatch
):
    server = recording_server({("POST", "/docs/_count"): {"count": 7}})
    monkeypatch.setenv("OPENSEARCH_USER", "reader")
    monkeypatch.setenv("OPENSEARCH_PASSWORD", "pw-from-env")
    store = open_store(f"opensearch:{server.url}/docs")
    assert isinstance(store, OpenSearchVectorStore)
    assert store.count() == 7
    expected = "Basic " + base64.b64encode(b"reader:pw-from-env").decode()
    assert {headers.get("authorization") for _, _, headers in server.requests} == {expected}


def test_the_seed_datastore_example_runs_on_qdrant(sleuth_home: Path, folder: Path, capsys):
    """Seed 000: `QdrantVectorStore(collection_name=..., dimension=1536)` behind a retriever,
    registered as an app datastore and filled with `sleuth ingest --app`."""
    store = QdrantVectorStore(collection_name="industry_reports", dimension=1536)
    app = App()
    app.datastore("industry_reports", RAGRetriever(store=store), description="analyst reports")
    import tests.helpers.apps.rag_app as rag_app

    original = rag_app.app
    rag_app.app = app
    try:
        code = cli_run(
            [
                "ingest",
                str(folder),
                "--store",
                "industry_reports",
                "--app",
                "tests.helpers.apps.rag_app:app",
            ]
        )
    finally:
        rag_app.app = original
    assert code == 0, capsys.readouterr()
    assert "industry_reports: 2 files (2 added)" in capsys.readouterr().out
    # The CLI closed the store when it was done; a worker process opens it again.
    reopened = QdrantVectorStore(collection_name="industry_reports")
    assert reopened.dimension == 1536
    chunks = RAGRetriever(store=reopened).retrieve("walrus operator", top_k=1)
    assert chunks[0].source.endswith("walrus.md")
    reopened.close()
