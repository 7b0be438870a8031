"""Ingestion: file types, chunking with overlap, change detection, bad files, and `sleuth ingest`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sleuth.rag.demo import demo_topics
from sleuth.rag.ingest import (
    chunk_spans,
    ingest_paths,
    read_sections,
)
from sleuth.rag.stores import Document, SQLiteStore
from sleuth.workers.cli import run as cli_run


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>")
    font_number = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_number} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    (folder / "nested").mkdir(parents=True)
    (folder / "notes.txt").write_text("Plain notes about the walrus operator and assignment.\n")
    (folder / "guide.md").write_text("# Guide\n\nGenerators yield values lazily.\n")
    (folder / "nested" / "page.html").write_text(
        "<html><head><title>Page</title><style>body{color:red}</style>"
        "<script>var hidden = 'scriptword';</script></head>"
        "<body><h1>Decorators</h1><p>A decorator wraps&nbsp;a function.</p></body></html>"
    )
    (folder / "report.pdf").write_bytes(make_pdf(["Coroutines await results", "Page two text"]))
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    return folder


def test_chunks_overlap_and_cover_the_text():
    text = " ".join(f"word{i}" for i in range(600))
    spans = chunk_spans(text, chunk_size=300, overlap=60)
    assert len(spans) > 5
    assert all(end - start <= 300 for start, end in spans)
    for (_, first_end), (second_start, _) in zip(spans, spans[1:], strict=False):
        assert second_start < first_end  # consecutive chunks overlap
        assert text[second_start - 1] == " "  # and start at a word
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    covered = set()
    for start, end in spans:
        covered.update(range(start, end))
    assert all(i in covered for i, c in enumerate(text) if not c.isspace())


def test_chunks_prefer_paragraph_breaks():
    text = ("a" * 50 + " ") * 4 + "\n\n" + "b" * 100
    first, second = chunk_spans(text, chunk_size=260, overlap=0)
    assert text[first[0] : first[1]] == (("a" * 50 + " ") * 4).strip()
    assert text[second[0] : second[1]] == "b" * 100


def test_html_text_skips_scripts_and_styles(corpus: Path):
    path = corpus / "nested" / "page.html"
    [section] = read_sections(path, path.read_bytes())
    assert "Decorators" in section.text and "A decorator wraps a function." in section.text
    assert "scriptword" not in section.text and "color" not in section.text


def test_pdf_pages_become_sections(corpus: Path):
    path = corpus / "report.pdf"
    sections = read_sections(path, path.read_bytes())
    assert [s.where for s in sections] == ["page 1", "page 2"]
    assert "Coroutines await results" in sections[0].text


def test_ingest_folder_stores_every_supported_file(corpus: Path, tmp_path: Path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    report = ingest_paths([corpus], store)
    assert report.count("added") == 4 and not report.failed
    assert {Path(f.path).name for f in report.files} == {
        "notes.txt",
        "guide.md",
        "page.html",
        "report.pdf",
    }
    [hit] = store.search("decorator wraps", top_k=1)
    assert hit.source == str((corpus / "nested" / "page.html").resolve())
    start, end = map(int, hit.location.removeprefix("chars ").split("-"))
    assert start == 0 and end == len(hit.text)
    [pdf_hit] = store.search("coroutines", top_k=1)
    assert pdf_hit.location.startswith("page 1, chars ")


def test_reingesting_unchanged_files_does_nothing(corpus: Path, tmp_path: Path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    ingest_paths([corpus], store)
    before = {d.id for d in store.get([h.id for h in store.search("generators", top_k=5)])}
    again = ingest_paths([corpus], store)
    assert again.count("unchanged") == 4 and again.chunks_written == 0
    assert {h.id for h in store.search("generators", top_k=5)} == before


def test_a_changed_file_replaces_its_old_chunks(corpus: Path, tmp_path: Path):
    store = SQLiteStore(tmp_path / "s.sqlite")
    ingest_paths([corpus], store, chunk_size=60, overlap=10)
    guide = corpus / "guide.md"
    source = str(guide.resolve())
    others = store.count() - store.count(where={"source": source})
    guide.write_text("# Guide\n\nAsync iterators use __anext__.\n" * 5)
    report = ingest_paths([guide], store, chunk_size=60, overlap=10)
    assert report.files[0].outcome == "replaced"
    assert store.search("generators", top_k=5, where={"source": source}) == []
    assert store.count(where={"source": source}) == report.files[0].chunks > 1
    assert store.count() == store.count(where={"source": source}) + others


def test_unreadable_files_are_reported_and_skipped(corpus: Path, tmp_path: Path):
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (corpus / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    locked = corpus / "locked.md"
    locked.write_text("secret")
    locked.chmod(0)
    store = SQLiteStore(tmp_path / "s.sqlite")
    report = ingest_paths([corpus, corpus / "ignored.bin", corpus / "missing.txt"], store)
    failed = {Path(f.path).name: f.error for f in report.failed}
    expected = {"broken.pdf", "latin1.txt", "ignored.bin", "missing.txt"}
    if os.geteuid() != 0:  # root reads any file
        expected.add("locked.md")
    assert expected <= set(failed)
    assert "not UTF-8" in failed["latin1.txt"] and "binary" in failed["ignored.bin"]
    assert report.count("added") == 4 + (os.geteuid() == 0)
    assert store.count(where={"source": str((corpus / "broken.pdf").resolve())}) == 0


def test_a_failure_while_replacing_keeps_the_old_chunks(corpus: Path, tmp_path: Path):
    class FailingEmbedder:
        dimension = 2

        def embed(self, texts):
            raise RuntimeError("embedding service down")

    store = SQLiteStore(tmp_path / "s.sqlite")
    ingest_paths([corpus / "guide.md"], store)
    (corpus / "guide.md").write_text("Completely new content.")
    report = ingest_paths([corpus / "guide.md"], store, embedder=FailingEmbedder())
    assert report.failed[0].error == "RuntimeError: embedding service down"
    assert store.search("generators", top_k=1)[0].text.endswith("Generators yield values lazily.")


def test_ingest_with_an_embedder_stores_vectors(corpus: Path, tmp_path: Path):
    class LengthEmbedder:
        dimension = 2

        def embed(self, texts):
            return [[float(len(t)), 1.0] for t in texts]

    store = SQLiteStore(tmp_path / "s.sqlite")
    ingest_paths([corpus / "notes.txt"], store, embedder=LengthEmbedder())
    assert store.dimension == 2
    [doc] = store.get([store.search("walrus", top_k=1)[0].id])
    assert doc.embedding == [float(len(doc.text)), 1.0]


def test_cli_ingest_into_a_named_store(corpus: Path, sleuth_home: Path, capsys):
    code = cli_run(["ingest", str(corpus), "--store", "notes"])
    out = capsys.readouterr()
    assert code == 0
    assert "notes: 4 files (4 added)" in out.out
    assert "[4/4]" in out.err  # progress, one line per file when not on a terminal
    store = SQLiteStore(sleuth_home / "stores" / "notes.sqlite")
    assert store.search("walrus", top_k=1)[0].source.endswith("notes.txt")
    assert cli_run(["ingest", str(corpus), "--store", "notes"]) == 0
    assert "4 unchanged" in capsys.readouterr().out


def test_cli_reports_bad_files_and_exits_1(corpus: Path, capsys):
    (corpus / "bad.txt").write_bytes(b"\xff\xfe\x00garbage")
    code = cli_run(["ingest", str(corpus), "--store", "notes"])
    out = capsys.readouterr()
    assert code == 1
    assert "skipped" in out.err and "bad.txt" in out.err
    assert "1 failed" in out.out and "4 added" in out.out


def test_cli_needs_paths_and_a_store(capsys):
    assert cli_run(["ingest", "somewhere"]) == 2
    assert "--store NAME" in capsys.readouterr().err


def test_cli_ingest_into_an_app_datastore(corpus: Path, tmp_path: Path, capsys):
    code = cli_run(
        [
            "ingest",
            str(corpus / "guide.md"),
            "--store",
            "guides",
            "--app",
            "tests.helpers.apps.rag_app:app",
        ]
    )
    assert code == 0, capsys.readouterr()
    from tests.helpers.apps.rag_app import app

    retriever = app.get_datastore("guides").retriever
    assert retriever.retrieve("generators", top_k=1)[0].source.endswith("guide.md")


def test_cli_ingest_demo_builds_the_python_docs_store(sleuth_home: Path, capsys):
    assert cli_run(["ingest", "--demo"]) == 0
    topics = len(demo_topics())
    assert f"python-docs: {topics} files ({topics} added)" in capsys.readouterr().out
    store = SQLiteStore(sleuth_home / "stores" / "python-docs.sqlite")
    assert store.search("context manager __exit__", top_k=1)[0].source.startswith("python-docs/")
    assert cli_run(["ingest", "--demo"]) == 0
    assert f"({topics} unchanged), 0 chunks written" in capsys.readouterr().out


def test_cli_warns_when_a_vector_store_gets_no_embedder(corpus: Path, sleuth_home: Path, capsys):
    store = SQLiteStore.named("vectors")
    store.add([Document(id="v", text="vector chunk", embedding=[1.0, 0.0])])
    assert cli_run(["ingest", str(corpus / "notes.txt"), "--store", "vectors"]) == 0
    assert "holds vectors but no --embedder" in capsys.readouterr().err
