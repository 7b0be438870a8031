"""Ingestion: read files (text, Markdown, HTML, PDF), chunk with overlap, embed, store.

Each chunk records its file's SHA-256 in metadata (`content_sha256`), so re-ingesting an unchanged
file does nothing and a changed file replaces all of its old chunks in one step
(`BaseVectorStore.replace_source`, one transaction on SQLite). A file that cannot be read, parsed
or embedded is reported and skipped; the rest of the run goes on.

Folders are walked without leaving them: a symbolic link that leads outside the folder, and any
link to a folder, is reported and skipped unless `follow_links=True`; with it, links are followed
and a link that leads back into a folder being walked (a loop) is reported and skipped. A path
given by name is read wherever it points, and one that is itself a link loop is reported as
failed. Only regular files are read (never a FIFO or a device), and a file over `max_file_bytes`
fails with the limit and how to raise it.
"""

from __future__ import annotations

import errno
import hashlib
import html.parser
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sleuth.rag.embeddings import Embedder
from sleuth.rag.stores.base import BaseVectorStore, Document
from sleuth.runtime.errors import InvalidSettingError, SleuthError

TEXT_SUFFIXES = {".txt", ".text", ".md", ".markdown", ".rst"}
HTML_SUFFIXES = {".html", ".htm"}
PDF_SUFFIXES = {".pdf"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES

DEFAULT_CHUNK_SIZE = 1200
DEFAULT_OVERLAP = 200
DEFAULT_MAX_FILE_BYTES = 50_000_000
"""Files larger than this (50 MB) are refused unless the caller raises the limit."""

Outcome = Literal["added", "replaced", "unchanged", "failed", "empty", "skipped"]


@dataclass
class Section:
    """A stretch of a file's text, with where it is (`page 3`, or "" for the whole file)."""

    text: str
    where: str = ""


@dataclass
class FileResult:
    path: str
    outcome: Outcome
    chunks: int = 0
    error: str = ""


@dataclass
class IngestReport:
    """What an ingest run did, file by file."""

    files: list[FileResult] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for f in self.files if f.outcome == outcome)

    @property
    def chunks_written(self) -> int:
        return sum(f.chunks for f in self.files if f.outcome in ("added", "replaced"))

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.outcome == "failed"]

    @property
    def skipped(self) -> list[FileResult]:
        return [f for f in self.files if f.outcome == "skipped"]


class UnreadableFileError(SleuthError, ValueError):
    """A file's bytes could not be turned into text."""


class FileTooLargeError(UnreadableFileError):
    """A file is over the size limit of one ingest."""


# -- reading ---------------------------------------------------------------------------------------


class _TextExtractor(html.parser.HTMLParser):
    """Visible text of an HTML page: no scripts or styles, a line break per block element."""

    _SKIP = {"script", "style", "noscript", "template", "head"}
    _BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self._skipping:
            self.parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return "\n".join(_squeeze_blank_lines(lines))


def _squeeze_blank_lines(lines: Iterable[str]) -> Iterator[str]:
    blank = started = False
    for line in lines:
        if line:
            if blank and started:
                yield ""
            yield line
            blank, started = False, True
        else:
            blank = True


def _decode(data: bytes, path: Path) -> str:
    if b"\x00" in data[:8192]:
        raise UnreadableFileError(f"{path} looks binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableFileError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def read_sections(path: Path, data: bytes) -> list[Section]:
    """The text of a file by its type; raises `UnreadableFileError` when it has none."""
    suffix = path.suffix.lower()
    if suffix in PDF_SUFFIXES:
        return _read_pdf(path, data)
    text = _decode(data, path)
    if suffix in HTML_SUFFIXES:
        extractor = _TextExtractor()
        extractor.feed(text)
        extractor.close()
        text = extractor.text()
    return [Section(text)]


def _read_pdf(path: Path, data: bytes) -> list[Section]:
    import io

    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        return [
            Section(page.extract_text() or "", f"page {number}")
            for number, page in enumerate(reader.pages, start=1)
        ]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableFileError(f"{path} is not a readable PDF: {exc}") from exc


# -- chunking --------------------------------------------------------------------------------------


def chunk_spans(
    text: str, chunk_size: int = DEFAULT_CHUNK_SIZE, overlap: int = DEFAULT_OVERLAP
) -> list[tuple[int, int]]:
    """(start, end) spans of at most `chunk_size` characters, each overlapping the last by ~`overlap`.

    Chunks end at a paragraph break, else a sentence end, else a space, when one lies in the last
    third of the window, so passages are not cut mid-word.
    """
    if chunk_size <= 0 or not 0 <= overlap < chunk_size:
        raise InvalidSettingError(
            f"need chunk_size > 0 and 0 <= overlap < chunk_size (got {chunk_size}, {overlap})"
        )
    spans: list[tuple[int, int]] = []
    start, length = 0, len(text)
    while start < length:
        while start < length and text[start].isspace():
            start += 1
        if start >= length:
            break
        end = min(start + chunk_size, length)
        if end < length:
            floor = start + (2 * chunk_size) // 3
            for separator in ("\n\n", ". ", "\n", " "):
                cut = text.rfind(separator, floor, end)
                if cut != -1:
                    end = cut + len(separator.rstrip()) if separator != "\n\n" else cut
                    break
        stripped_end = end
        while stripped_end > start and text[stripped_end - 1].isspace():
            stripped_end -= 1
        spans.append((start, stripped_end))
        if end >= length:
            break
        next_start = max(end - overlap, start + 1)
        # Start the overlap at a word boundary.
        space = text.find(" ", next_start, end)
        start = space + 1 if overlap and space != -1 else next_start
    return spans


def chunk_documents(
    source: str,
    sections: Sequence[Section],
    *,
    content_sha256: str,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    overlap: int = DEFAULT_OVERLAP,
    metadata: dict[str, object] | None = None,
) -> list[Document]:
    """The chunks of one file as `Document`s (no embeddings yet), with stable ids."""
    documents: list[Document] = []
    for section in sections:
        for start, end in chunk_spans(section.text, chunk_size, overlap):
            location = f"chars {start}-{end}"
            if section.where:
                location = f"{section.where}, {location}"
            number = len(documents)
            chunk_id = hashlib.sha256(f"{source}\0{content_sha256}\0{number}".encode()).hexdigest()
            documents.append(
                Document(
                    id=chunk_id[:32],
                    text=section.text[start:end],
                    source=source,
                    location=location,
                    metadata={
                        **(metadata or {}),
                        "content_sha256": content_sha256,
                        "chunk": number,
                    },
                )
            )
    return documents


# -- ingesting -------------------------------------------------------------------------------------


def expand_paths(
    paths: Iterable[str | Path], *, follow_links: bool = False
) -> tuple[list[Path], list[FileResult]]:
    """Files to ingest, and what was passed over: named files as given, folders walked for
    supported file types (see the module docstring for links and loops)."""
    found: list[Path] = []
    passed_over: list[FileResult] = []
    for raw in paths:
        path = Path(raw)
        try:
            is_folder = stat.S_ISDIR(path.stat().st_mode)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                passed_over.append(
                    FileResult(str(path), "failed", error=f"{path} is a symbolic link loop")
                )
                continue
            is_folder = False  # reading it will say what is wrong
        if is_folder:
            _walk(path, path.resolve(), follow_links, found, passed_over, set())
        else:
            found.append(path)
    return found, passed_over


def _walk(
    folder: Path,
    root: Path,
    follow_links: bool,
    found: list[Path],
    passed_over: list[FileResult],
    open_folders: set[tuple[int, int]],
) -> None:
    """Collect supported files under `folder`; `open_folders` are the folders being walked."""
    try:
        identity = os.stat(folder)
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as exc:
        passed_over.append(FileResult(str(folder), "failed", error=f"cannot list {folder}: {exc}"))
        return
    key = (identity.st_dev, identity.st_ino)
    open_folders = open_folders | {key}
    for entry in entries:
        path = Path(entry.path)
        if entry.is_symlink():
            _follow(path, root, follow_links, found, passed_over, open_folders)
        elif entry.is_dir(follow_symlinks=False):
            _walk(path, root, follow_links, found, passed_over, open_folders)
        elif entry.is_file(follow_symlinks=False) and path.suffix.lower() in SUPPORTED_SUFFIXES:
            found.append(path)


def _follow(
    link: Path,
    root: Path,
    follow_links: bool,
    found: list[Path],
    passed_over: list[FileResult],
    open_folders: set[tuple[int, int]],
) -> None:
    """A symbolic link met inside a folder: follow it, or say why not."""
    try:
        target = link.resolve(strict=True)
        target_stat = target.stat()
    except (OSError, RuntimeError) as exc:
        looping = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
        if looping or link.suffix.lower() in SUPPORTED_SUFFIXES:
            reason = "is a symbolic link loop" if looping else "is a broken symbolic link"
            passed_over.append(FileResult(str(link), "skipped", error=f"{link} {reason}"))
        return
    is_folder = stat.S_ISDIR(target_stat.st_mode)
    if not is_folder and link.suffix.lower() not in SUPPORTED_SUFFIXES:
        return
    if not follow_links:
        if is_folder or not target.is_relative_to(root):
            where = "to a folder" if is_folder else f"outside {root}"
            passed_over.append(
                FileResult(
                    str(link),
                    "skipped",
                    error=f"{link} links {where} ({target}); pass --follow-links to ingest it",
                )
            )
            return
        found.append(link)
        return
    if not is_folder:
        found.append(link)
    elif (target_stat.st_dev, target_stat.st_ino) in open_folders:
        passed_over.append(
            FileResult(
                str(link),
                "skipped",
                error=f"{link} is a symbolic link loop: it leads back to {target}",
            )
        )
    else:
        _walk(link, root, follow_links, found, passed_over, open_folders)


def read_file(path: Path, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, refusing anything else and anything over `max_bytes`."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableFileError(f"{path} is not a regular file")
        if status.st_size > max_bytes:
            raise FileTooLargeError(_too_large(path, status.st_size, max_bytes))
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while we read it
        raise FileTooLargeError(_too_large(path, len(data), max_bytes))
    return data


def _too_large(path: Path, size: int, max_bytes: int) -> str:
    return (
        f"{path} is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:g} MB limit for one file; "
        "raise it with --max-file-mb (max_file_bytes= in Python) to ingest this file"
    )


def ingest_sections(
    source: str,
    sections: Sequence[Section],
    store: BaseVectorStore,
    *,
    content_sha256: str,
    embedder: Embedder | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    overlap: int = DEFAULT_OVERLAP,
    metadata: dict[str, object] | None = None,
) -> tuple[Outcome, int]:
    """Store one document's chunks unless this exact content is stored; (outcome, chunks written)."""
    if store.count(where={"source": source, "content_sha256": content_sha256}):
        return "unchanged", 0
    had_chunks = store.count(where={"source": source}) > 0
    documents = chunk_documents(
        source,
        sections,
        content_sha256=content_sha256,
        chunk_size=chunk_size,
        overlap=overlap,
        metadata=metadata,
    )
    if embedder is not None and documents:
        vectors = embedder.embed([d.text for d in documents])
        for document, vector in zip(documents, vectors, strict=True):
            document.embedding = vector
    store.replace_source(source, documents)
    if not documents:
        return "empty", 0
    return ("replaced" if had_chunks else "added"), len(documents)


def ingest_file(
    path: Path,
    store: BaseVectorStore,
    *,
    embedder: Embedder | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    overlap: int = DEFAULT_OVERLAP,
    source: str | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> FileResult:
    """Ingest one file (its source is its absolute path); never raises for a bad file."""
    source = source or str(path.resolve())
    try:
        data = read_file(path, max_file_bytes)
        outcome, chunks = ingest_sections(
            source,
            read_sections(path, data),
            store,
            content_sha256=hashlib.sha256(data).hexdigest(),
            embedder=embedder,
            chunk_size=chunk_size,
            overlap=overlap,
        )
    except (OSError, UnreadableFileError) as exc:
        return FileResult(str(path), "failed", error=str(exc))
    except Exception as exc:  # a parser or embedder failure on one file must not stop the run
        return FileResult(str(path), "failed", error=f"{type(exc).__name__}: {exc}")
    return FileResult(str(path), outcome, chunks=chunks)


def ingest_paths(
    paths: Iterable[str | Path],
    store: BaseVectorStore,
    *,
    embedder: Embedder | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    overlap: int = DEFAULT_OVERLAP,
    on_file: Callable[[int, int, FileResult], None] | None = None,
    follow_links: bool = False,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> IngestReport:
    """Ingest files and folders into `store`; `on_file(done, total, result)` reports progress,
    including the paths passed over (links out of a folder, loops)."""
    files, passed_over = expand_paths(paths, follow_links=follow_links)
    total = len(passed_over) + len(files)
    report = IngestReport()
    for result in passed_over:
        report.files.append(result)
        if on_file is not None:
            on_file(len(report.files), total, result)
    for path in files:
        result = ingest_file(
            path,
            store,
            embedder=embedder,
            chunk_size=chunk_size,
            overlap=overlap,
            max_file_bytes=max_file_bytes,
        )
        report.files.append(result)
        if on_file is not None:
            on_file(len(report.files), total, result)
    return report
