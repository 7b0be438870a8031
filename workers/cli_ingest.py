"""`sleuth ingest PATH... --store SPEC`: load files into a retrieval store.

`--store NAME` is the SQLite store `$SLEUTH_HOME/stores/NAME.sqlite`; `qdrant:`, `chroma:`,
`pgvector:` and `opensearch:` specs name the other stores (`sleuth.rag.stores.spec`), with their
credentials taken from the environment only. With `--app`, a datastore of that name registered in
the app is used instead (its store and its embedder).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import TextIO

from sleuth.rag.embeddings import Embedder
from sleuth.rag.ingest import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_OVERLAP,
    FileResult,
    ingest_paths,
)
from sleuth.rag.stores.base import BaseVectorStore, StoreError
from sleuth.runtime.errors import InvalidSettingError
from sleuth.workers.render import ProgressBar, progress_bar


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="load text, Markdown, HTML and PDF files into a retrieval store",
        description=(
            "Chunk files (folders are searched for .txt .md .rst .html .pdf) into a store. "
            "Unchanged files are skipped, changed files replace their old chunks, unreadable "
            "files are reported and skipped. Links out of a folder and link loops are reported "
            "and not followed. Exits 1 if any file failed."
        ),
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to ingest")
    parser.add_argument(
        "--store",
        default=None,
        metavar="SPEC",
        help=(
            "NAME ($SLEUTH_HOME/stores/NAME.sqlite), qdrant:COLLECTION, chroma:COLLECTION, "
            "pgvector:TABLE, a server as qdrant:https://HOST:6333/COLLECTION, "
            "chroma:http://HOST:8000/COLLECTION, pgvector:postgresql://USER@HOST/DB?table=NAME or "
            "opensearch:https://HOST:9200/INDEX (secrets only from the environment: "
            "QDRANT_API_KEY, CHROMA_AUTH_TOKEN, PGPASSWORD, OPENSEARCH_USER/OPENSEARCH_PASSWORD), "
            "or a datastore of --app"
        ),
    )
    parser.add_argument("--app", default=None, help="package.module:app whose datastore to fill")
    parser.add_argument(
        "--embedder",
        default="none",
        help="none (BM25 only, the default), local (offline MiniLM), or openai[:MODEL]",
    )
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, metavar="CHARS")
    parser.add_argument("--overlap", type=int, default=DEFAULT_OVERLAP, metavar="CHARS")
    parser.add_argument(
        "--follow-links",
        action="store_true",
        help="follow symbolic links out of the given folders (loops are still skipped)",
    )
    parser.add_argument(
        "--max-file-mb",
        type=float,
        default=DEFAULT_MAX_FILE_BYTES / 1e6,
        metavar="MB",
        help=f"refuse files larger than this (default {DEFAULT_MAX_FILE_BYTES / 1e6:g})",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="ingest the demo corpus (the Python language reference) into the python-docs store",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print what was done as JSON: the store, counts per outcome, and each file",
    )
    parser.set_defaults(func=run_ingest)


def make_embedder(spec: str) -> Embedder | None:
    """`none`, `local`, or `openai[:model]` as an embedder."""
    kind, _, model = spec.partition(":")
    if kind == "none":
        return None
    if kind == "local":
        from sleuth.rag.embeddings import LocalEmbeddings

        return LocalEmbeddings()
    if kind == "openai":
        from sleuth.rag.embeddings import OpenAIEmbeddings

        return OpenAIEmbeddings(model or "text-embedding-3-small")
    raise InvalidSettingError(f"--embedder {spec!r}: use none, local, or openai[:MODEL]")


def resolve_store(
    name: str, app_target: str | None, embedder: Embedder | None
) -> tuple[BaseVectorStore, Embedder | None]:
    """The store (and embedder) `--store SPEC [--app ...]` names."""
    if app_target:
        from sleuth.workers.session import cli_app

        retriever = cli_app(app_target).get_datastore(name).retriever
        store = getattr(retriever, "store", None)
        if not isinstance(store, BaseVectorStore):
            raise InvalidSettingError(
                f"datastore {name!r} of {app_target} is not a RAGRetriever over a sleuth store; "
                "ingest into it with its own tools"
            )
        return store, embedder or getattr(retriever, "embedder", None)
    from sleuth.rag.stores.spec import open_store

    dimension = getattr(embedder, "dimension", None) if embedder is not None else None
    return open_store(name, dimension=dimension, on_wait=_say_waiting), embedder


def _say_waiting(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class IngestProgress:
    """Reports each file as it is ingested: a rich progress bar on a terminal (files that failed
    or were skipped printed above it), one line per file otherwise (logs, CI)."""

    def __init__(self, bar: ProgressBar | None, stream: TextIO | None = None):
        self.bar = bar
        self.stream = stream or sys.stderr

    def __call__(self, done: int, total: int, result: FileResult) -> None:
        if result.outcome == "failed":
            self._say(f"skipped {result.path}: {result.error}")
        elif result.outcome == "skipped":
            self._say(f"not followed: {result.error}")
        elif self.bar is None:
            self._say(f"[{done}/{total}] {result.outcome} {result.path} ({result.chunks} chunks)")
        if self.bar is not None:
            self.bar.update(completed=done, total=total, detail=result.path[-40:])
        self.stream.flush()

    def _say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.say(line)
        else:
            print(line, file=self.stream)


def run_ingest(args: argparse.Namespace) -> int:
    if args.max_file_mb <= 0:
        print("sleuth ingest: --max-file-mb must be above 0", file=sys.stderr)
        return 2
    if args.demo:
        from sleuth.rag.demo import DEMO_STORE, ingest_demo
        from sleuth.rag.stores.spec import open_store

        demo_store = open_store(args.store or DEMO_STORE, on_wait=_say_waiting)
        try:
            report = ingest_demo(demo_store, embedder=make_embedder(args.embedder))
        finally:
            demo_store.close()
        _print_result(args, args.store or DEMO_STORE, report.files)
        return 0
    if not args.paths or not args.store:
        print(
            "sleuth ingest: give files or folders and --store NAME "
            "(e.g. sleuth ingest docs/ --store docs), or --demo",
            file=sys.stderr,
        )
        return 2
    try:
        store, embedder = resolve_store(args.store, args.app, make_embedder(args.embedder))
    except StoreError as exc:
        print(f"sleuth ingest: {exc}", file=sys.stderr)
        return 2
    if embedder is None and getattr(store, "dimension", None):
        print(
            f"note: {args.store} holds vectors but no --embedder was given; new chunks get none "
            "and are found by BM25 only (pass the embedder the store was filled with)",
            file=sys.stderr,
        )
    try:
        with progress_bar(sys.stderr, "ingest") as bar:
            report = ingest_paths(
                args.paths,
                store,
                embedder=embedder,
                chunk_size=args.chunk_size,
                overlap=args.overlap,
                on_file=IngestProgress(bar),
                follow_links=args.follow_links,
                max_file_bytes=int(args.max_file_mb * 1e6),
            )
    finally:
        store.close()
    _print_result(args, args.store, report.files)
    return 1 if report.failed else 0


def _print_result(args: argparse.Namespace, store_name: str, files: list[FileResult]) -> None:
    if getattr(args, "json", False):
        document = {
            "store": store_name,
            "counts": _counts(files),
            "chunks": sum(f.chunks for f in files),
            "files": [dataclasses.asdict(f) for f in files],
        }
        print(json.dumps(document, indent=2))
        return
    print(_summary(store_name, files))
    for failed in files:
        if failed.outcome == "failed":
            print(f"  failed: {failed.path}: {failed.error}")


def _counts(files: list[FileResult]) -> dict[str, int]:
    return {
        outcome: sum(1 for f in files if f.outcome == outcome)
        for outcome in ("added", "replaced", "unchanged", "empty", "skipped", "failed")
    }


def _summary(store_name: str, files: list[FileResult]) -> str:
    counts = _counts(files)
    chunks = sum(f.chunks for f in files)
    parts = ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n)
    return f"{store_name}: {len(files)} files ({parts or 'nothing to do'}), {chunks} chunks written"
