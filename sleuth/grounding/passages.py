"""Passages: the evidence cut into a few sentences each, and the ones that best match a claim.

A successful tool call's output is either a search result (a JSON list of rows with `text`, and
usually `source` and `location`, as `search_<store>` tools return; or one such object) or plain
text. Each row, or
the whole plain output, is a document; documents are cut at sentence ends into passages of at
most `max_chars` characters. A passage keeps where it came from: the evidence index, the source
(the row's source, else the tool call), and its location (the row's `chars A-B` narrowed to the
passage, else character offsets in the tool output), so a quote from it can be cited.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sleuth.agent.state import EvidenceItem
from sleuth.grounding.claims import CITATION, STOPWORDS
from sleuth.grounding.facts import Fact, read_facts
from sleuth.grounding.sentences import sentence_spans
from sleuth.rag.text import BM25Index, unit_rows, words

MAX_PASSAGE_CHARS = 400
"""Passages are a few sentences: short enough that a small judge reads the claim's facts next to
the text that states them, long enough to keep a sentence's context."""
_CHARS = re.compile(r"^(?P<prefix>.*?)chars (?P<start>\d+)-(?P<end>\d+)\s*$")
_ROW_LISTS = ("results", "rows", "chunks", "hits", "documents", "passages")


@dataclass(frozen=True)
class Passage:
    """A few consecutive sentences of one document of one evidence item."""

    evidence: int
    """1-based index of the evidence item."""
    tool: str
    source: str
    location: str
    text: str
    document_location: str
    """The location of the whole document (a search row's own `location`; empty for a plain
    tool output), which the passage's and its quotes' locations narrow."""
    row: int | None
    """Index of the search-result row the passage is cut from; None for a plain tool output."""
    start: int
    """Offset of `text` in its document (the row's text, or the tool output)."""
    facts: tuple[Fact, ...] = ()
    """What its code and tables state, as sentences (`sleuth.grounding.facts`); their spans are
    offsets in `text`, the lines a citation of the fact quotes."""

    @property
    def readable(self) -> str:
        """`text`, then its facts: what the checks and the passage index read."""
        return " ".join([self.text, *(fact.text for fact in self.facts)])

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    @property
    def document_key(self) -> tuple[int, int | None]:
        return (self.evidence, self.row)


def tool_call_label(item: EvidenceItem) -> str:
    """`tool(name=value, ...)`, values cut to 60 characters: the source of a plain tool output."""
    arguments = ", ".join(
        f"{name}={_short(value)}" for name, value in sorted(item.arguments.items())
    )
    return f"{item.tool}({arguments})"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def documents(item: EvidenceItem) -> list[tuple[int | None, str, str, str]]:
    """(row index, text, source, location) of each document in one evidence item's output."""
    rows = _search_rows(item.output)
    if rows is None:
        return [(None, item.output, tool_call_label(item), "")]
    return [
        (
            number,
            row["text"],
            str(row.get("source") or row.get("url") or tool_call_label(item)),
            str(row.get("location") or ""),
        )
        for number, row in enumerate(rows)
    ]


def document_text(item: EvidenceItem, row: int | None) -> str:
    """The text a passage's offsets refer to: the tool output, or one search row's text."""
    if row is None:
        return item.output
    rows = _search_rows(item.output)
    if rows is None or not 0 <= row < len(rows):
        raise ValueError(f"evidence item {item.index} has no search row {row}")
    return str(rows[row]["text"])


def _search_rows(output: str) -> list[dict[str, Any]] | None:
    """The rows of a search result (a JSON list of objects with a `text` string, or one such
    object), else None."""
    stripped = output.lstrip()
    if not stripped.startswith(("[", "{")):
        return None
    try:
        parsed = json.loads(output)
    except json.JSONDecodeError:
        return None
    if isinstance(parsed, dict):
        lists = [parsed[key] for key in _ROW_LISTS if isinstance(parsed.get(key), list)]
        # One object with a text of its own (`{"text": ..., "source": ...}`) is one row.
        parsed = lists[0] if lists else [parsed]
    if (
        isinstance(parsed, list)
        and parsed
        and all(isinstance(row, dict) and isinstance(row.get("text"), str) for row in parsed)
    ):
        return parsed
    return None


def _pack(text: str, max_chars: int) -> list[tuple[int, int]]:
    """Consecutive sentences grouped into spans of at most `max_chars` (a longer sentence is cut
    at line breaks, then at spaces, so no passage outgrows a small judge's prompt)."""
    pieces: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        if end - start <= max_chars:
            pieces.append((start, end))
            continue
        line_start = start
        lines: list[tuple[int, int]] = []
        for match in re.finditer(r"\n", text[start:end]):
            cut = start + match.start()
            if cut - line_start >= max_chars // 2:
                lines.append((line_start, cut))
                line_start = cut + 1
        lines.append((line_start, end))
        for line in lines:
            pieces.extend(_cut_at_spaces(text, *line, max_chars))
    packed: list[tuple[int, int]] = []
    for start, end in pieces:
        start = _skip_space(text, start, end)
        if start >= end:
            continue
        if packed and end - packed[-1][0] <= max_chars:
            packed[-1] = (packed[-1][0], end)
        else:
            packed.append((start, end))
    return packed


def _cut_at_spaces(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """`text[start:end]` in spans of at most `max_chars`, cut at the last space that fits (a
    run without spaces, such as a long URL, is cut where it must)."""
    spans = []
    while end - start > max_chars:
        limit = start + max_chars
        space = max(text.rfind(" ", start + 1, limit + 1), text.rfind("\t", start + 1, limit + 1))
        cut = space if space > start + max_chars // 2 else limit
        spans.append((start, cut))
        start = _skip_space(text, cut, end)
    if end > start:
        spans.append((start, end))
    return spans


def _skip_space(text: str, start: int, end: int) -> int:
    while start < end and text[start].isspace():
        start += 1
    return start


def split_passages(
    evidence: Sequence[EvidenceItem], *, max_chars: int = MAX_PASSAGE_CHARS
) -> list[Passage]:
    """Every passage of every successful evidence item, in evidence order (failed calls are not
    evidence)."""
    passages = []
    for number, item in enumerate(evidence, start=1):
        if not item.success:
            continue
        for row, text, source, location in documents(item):
            facts = read_facts(text)
            for start, end in _pack(text, max_chars):
                passages.append(
                    Passage(
                        evidence=number,
                        tool=item.tool,
                        source=source,
                        location=narrow(location, start, end),
                        text=text[start:end],
                        document_location=location,
                        row=row,
                        start=start,
                        facts=tuple(
                            Fact(fact.text, fact.start - start, min(fact.end, end) - start)
                            for fact in facts
                            if start <= fact.start < end
                        ),
                    )
                )
    return passages


def text_key(text: str) -> str:
    """What makes two passages the same passage: their text, ignoring case and spacing."""
    return " ".join(text.split()).casefold()


def distinct_positions(passages: Sequence[Passage]) -> list[int]:
    """The positions in `passages` of the first passage with each text (`text_key`)."""
    seen: set[str] = set()
    kept = []
    for position, passage in enumerate(passages):
        key = text_key(passage.text)
        if key not in seen:
            seen.add(key)
            kept.append(position)
    return kept


def distinct_passages(passages: Sequence[Passage]) -> list[Passage]:
    """`passages` with each text once, at its first occurrence. The same chunk comes back from
    every search that finds it (a small model repeats its searches), and a corpus can hold one
    text under two pages; counted twice, it fills a claim's passage slots with copies of itself
    and skews the BM25 statistics."""
    return [passages[i] for i in distinct_positions(passages)]


def narrow(location: str, start: int, end: int) -> str:
    """The location of `[start, end)` inside a document found at `location`."""
    match = _CHARS.match(location)
    if match:
        base = int(match["start"])
        return f"{match['prefix']}chars {base + start}-{base + end}"
    if location:
        return f"{location}, chars {start}-{end}"
    return f"chars {start}-{end}"


FOCUS_SHARE = 0.5
"""The judge model sees a selected passage only if its BM25 score is at least this share of the
best selected passage's. A passage that merely shares a common word ("name") with the claim
distracted the 1.5B judge from the one that states it: on the grounding benchmark (both
splits, `bench/grounding.py`), showing only these passages raised the model's own AUROC from
0.865 to 0.909 on the test split, and made judging faster (fewer tokens)."""
FOCUS_COSINE_MARGIN = 0.1
"""With embeddings, a selected passage whose cosine with the claim is within this of the best
selected passage's is shown to the judge too (a paraphrase may share few words)."""


class PassageIndex:
    """BM25 over the passages (and cosine over their embeddings when given), to pick the passages
    a claim is judged against."""

    def __init__(
        self, passages: Sequence[Passage], vectors: np.ndarray | None = None, k1: float = 1.2
    ) -> None:
        self.passages = list(passages)
        self.counts = [Counter(words(p.readable + " " + p.source)) for p in self.passages]
        self._bm25 = BM25Index(self.counts)
        self.vectors = unit_rows(vectors) if vectors is not None and len(vectors) else None
        self.k1 = k1

    def bm25(self, query: str, b: float = 0.75) -> list[float]:
        """Each passage's BM25 score for the words of `query` (citation marks aside)."""
        return self._bm25.scores(set(words(CITATION.sub(" ", query))), k1=self.k1, b=b)

    def select(
        self, claim: str, *, top: int, claim_vector: Sequence[float] | None = None
    ) -> list[Passage]:
        """The `top` passages that best match `claim`, in evidence order. BM25 alone, or fused
        with cosine similarity by reciprocal rank when there are embeddings. A passage that
        shares no word with the claim is chosen only by a close embedding (cosine ≥ 0.5)."""
        return self.select_and_focus(claim, top=top, claim_vector=claim_vector)[0]

    def select_and_focus(
        self,
        claim: str,
        *,
        top: int,
        claim_vector: Sequence[float] | None = None,
        share: float = FOCUS_SHARE,
    ) -> tuple[list[Passage], list[Passage]]:
        """`select`'s passages, and those of them that match the claim nearly as well as the
        best one (what the judge model is shown): a BM25 score at least `share` of the best
        chosen passage's, or with embeddings a cosine within `FOCUS_COSINE_MARGIN` of the best
        one's. Both lists are in evidence order; the second holds at least the best passage."""
        if not self.passages:
            return [], []
        lexical = self.bm25(claim)
        ranked = sorted(range(len(lexical)), key=lambda i: -lexical[i])
        eligible = {i for i in ranked if lexical[i] > 0}
        cosine: np.ndarray | None = None
        if self.vectors is not None and claim_vector is not None:
            query = np.asarray(claim_vector, dtype=np.float32)
            cosine = self.vectors @ (query / (np.linalg.norm(query) or 1.0))
            by_vector = sorted(range(len(cosine)), key=lambda i: -float(cosine[i]))
            eligible |= {i for i in by_vector if cosine[i] >= 0.5}
            fused: dict[int, float] = {}
            for ranking in (ranked, by_vector):
                for rank, index in enumerate(ranking):
                    fused[index] = fused.get(index, 0.0) + 1.0 / (60 + rank)
            ranked = sorted(fused, key=lambda i: -fused[i])
        chosen = [i for i in ranked if i in eligible][:top]
        if not chosen:
            return [], []
        best_lexical = max(lexical[i] for i in chosen)
        best_cosine = max(float(cosine[i]) for i in chosen) if cosine is not None else 0.0
        # The best passage always passes: by BM25 when it shares a word with the claim, else
        # (chosen by its embedding alone) by cosine.
        focus = {
            i
            for i in chosen
            if (best_lexical > 0 and lexical[i] >= share * best_lexical)
            or (cosine is not None and float(cosine[i]) >= best_cosine - FOCUS_COSINE_MARGIN)
        }
        focus |= self._complements(claim, chosen, focus)
        return (
            [self.passages[i] for i in sorted(chosen)],
            [self.passages[i] for i in sorted(focus)],
        )

    def _complements(self, claim: str, chosen: list[int], focus: set[int]) -> set[int]:
        """Chosen passages that state what the focused ones leave out of the claim: a claim
        that combines two facts is judged against the passages of both. A passage joins when
        it holds two of the claim's words the others lack, or one number."""
        wanted = {w for w in words(CITATION.sub(" ", claim)) if w not in STOPWORDS and len(w) > 1}
        covered = set().union(*(self.counts[i].keys() for i in focus)) if focus else set()
        added: set[int] = set()
        for index in chosen:  # best first
            if index in focus:
                continue
            missing = wanted - covered
            gained = missing & self.counts[index].keys()
            if len(gained) >= 2 or any(w[0].isdigit() for w in gained):
                added.add(index)
                covered |= gained
        return added
