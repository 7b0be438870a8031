"""Passages: evidence cut into a few sentences each, where each comes from, and selection."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from sleuth.agent.state import EvidenceItem
from sleuth.grounding.passages import (
    PassageIndex,
    document_text,
    sentence_spans,
    split_passages,
    tool_call_label,
)

WITH_CHUNK = (
    "7. The context manager's __exit__() method is invoked.  If an\n"
    "   exception caused the suite to be exited, its type, value, and\n"
    "   traceback are passed as arguments to __exit__(). Otherwise, three\n"
    "   None arguments are supplied.\n\n"
    "   If the suite was exited due to an exception, and the return value\n"
    "   from the __exit__() method was false, the exception is reraised.\n"
    "   If the return value was true, the exception is suppressed."
)
CHANGELOG = (
    "gzip (1.12-1) sid; urgency=high\n\n"
    "  * new upstream release\n"
    "    - zgrep: fix arbitrary-file-write vulnerability\n"
    "      address CVE-2022-1271 (closes: #1009168)\n"
    "    - report correct length of 4 GiB and larger files (closes: #149775)\n\n"
    " -- Milan Kupcevic <milan@debian.org>  Sat, 09 Apr 2022 22:22:26 -0400"
)


def search_item(index: int = 1) -> EvidenceItem:
    rows = [
        {
            "id": "a",
            "source": "python-docs/with",
            "location": "chars 803-1195",
            "score": 1.0,
            "text": WITH_CHUNK,
        },
        {"id": "b", "source": "python-docs/try", "location": "", "score": 0.5, "text": "Short."},
    ]
    return EvidenceItem(
        index=index, tool="search_python_docs", arguments={"query": "with"}, output=json.dumps(rows)
    )


def test_search_rows_become_passages_with_the_rows_source_and_narrowed_location() -> None:
    passages = split_passages([search_item()], max_chars=200)

    from_with = [p for p in passages if p.source == "python-docs/with"]
    assert len(from_with) > 1 and all(len(p.text) <= 200 for p in from_with)
    for passage in from_with:
        assert passage.evidence == 1 and passage.row == 0 and passage.tool == "search_python_docs"
        assert WITH_CHUNK[passage.start : passage.end] == passage.text
        assert passage.location == f"chars {803 + passage.start}-{803 + passage.end}"
    short = next(p for p in passages if p.source == "python-docs/try")
    assert (short.row, short.location, short.text) == (1, "chars 0-6", "Short.")


def test_a_plain_output_is_cut_at_sentences_and_located_by_offsets_in_the_output() -> None:
    item = EvidenceItem(
        index=1, tool="read_changelog", arguments={"package": "gzip"}, output=CHANGELOG
    )
    passages = split_passages([item], max_chars=120)

    assert len(passages) >= 3
    assert {p.source for p in passages} == {"read_changelog(package=gzip)"}
    for passage in passages:
        assert passage.row is None and len(passage.text) <= 120
        assert CHANGELOG[passage.start : passage.end] == passage.text
        assert passage.location == f"chars {passage.start}-{passage.end}"
    # Every sentence of the output is in exactly one passage, in order.
    assert "".join(p.text for p in passages).replace(" ", "").replace("\n", "") == (
        CHANGELOG.replace(" ", "").replace("\n", "")
    )


def test_failed_calls_are_not_evidence_and_numbering_follows_the_trail() -> None:
    failed = EvidenceItem(index=1, tool="search", output="boom", success=False, error="boom")
    passages = split_passages([failed, search_item(index=2)])
    assert passages and {p.evidence for p in passages} == {2}
    assert all(document_text(search_item(), p.row)[p.start : p.end] == p.text for p in passages)


def test_a_json_output_that_is_not_a_search_result_is_plain_text() -> None:
    item = EvidenceItem(index=1, tool="lookup", output=json.dumps({"price": 12, "currency": "EUR"}))
    (passage,) = split_passages([item])
    assert passage.row is None and passage.text == item.output


def test_sentences_end_at_full_stops_blank_lines_and_bullets() -> None:
    text = 'He said "stop." Then left.\n\nNew paragraph\n  * a bullet\n  * another'
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        'He said "stop."',
        "Then left.",
        "New paragraph",
        "* a bullet",
        "* another",
    ]


def test_tool_call_labels_cut_long_arguments() -> None:
    item = EvidenceItem(index=1, tool="fetch", arguments={"url": "x" * 100, "page": 2})
    label = tool_call_label(item)
    assert label.startswith("fetch(page=2, url=xxx") and label.endswith("…)") and len(label) < 90


def test_bm25_selects_the_passage_that_states_the_claim_in_evidence_order() -> None:
    item = EvidenceItem(index=1, tool="read_changelog", output=CHANGELOG)
    passages = split_passages([search_item(), item], max_chars=120)
    index = PassageIndex(passages)

    (best,) = index.select("gzip 1.12-1 fixes a zgrep vulnerability, CVE-2022-1271.", top=1)
    assert "CVE-2022-1271" in best.text
    chosen = index.select("the exception is suppressed when __exit__ returns true", top=3)
    assert len(chosen) == 3
    assert chosen == sorted(chosen, key=lambda p: (p.evidence, p.row or 0, p.start))
    assert any("suppressed" in p.text for p in chosen)
    assert index.select("completely unrelated words", top=3) == []


class KeywordEmbedder:
    """Vectors by keyword family, so 'car' and 'automobile' are close without sharing a word."""

    families = (("car", "automobile", "vehicle"), ("exception", "error"))

    @property
    def dimension(self) -> int:
        return len(self.families) + 1

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            lowered = text.lower()
            vector = [float(any(w in lowered for w in family)) for family in self.families]
            vectors.append([*vector, 0.1])
        return vectors


def test_embeddings_find_a_passage_that_shares_no_word_with_the_claim() -> None:
    item = EvidenceItem(index=1, tool="notes", output="The automobile was red. Prices rose in May.")
    passages = split_passages([item], max_chars=30)
    embedder = KeywordEmbedder()
    vectors = embedder.embed([p.text for p in passages])
    index = PassageIndex(passages, np.asarray(vectors, dtype=np.float32))
    claim = "A car is described"
    assert index.select(claim, top=1) == []
    (found,) = index.select(claim, top=1, claim_vector=embedder.embed([claim])[0])
    assert found.text == "The automobile was red."


def test_a_sentence_longer_than_a_passage_is_cut_at_spaces_and_nothing_is_lost() -> None:
    words = " ".join(f"word{n}" for n in range(200))  # one 1,289-character sentence, no breaks
    url = "https://example.org/" + "x" * 300
    output = f"Intro. {words} and then {url} ends here."
    item = EvidenceItem(index=1, tool="fetch", arguments={}, output=output)
    passages = split_passages([item], max_chars=120)

    assert all(len(p.text) <= 120 for p in passages)
    for passage in passages:
        assert output[passage.start : passage.end] == passage.text
    assert "".join(p.text for p in passages).replace(" ", "") == output.replace(" ", "")
    # Cut at spaces: every word arrives whole, except inside the URL, which has no space.
    inner = [p.text for p in passages if "x" * 10 not in p.text]
    assert all(not t.startswith(("ord", "rd")) for t in inner)
