"""Sentences and lines: the units that claims are cut into and that citations quote.

Prose is segmented by pysbd (the rule-based Golden Rules segmenter), so abbreviations ("e.g.",
"Dr.", "Oct. 2023"), decimals (3.10) and initials do not end a sentence. Text written as lines
(code, tables, CSV, a changelog's bullets) is cut at line ends instead: a line is what its
author wrote as one unit, and joining a signature to the next line's comment makes neither
readable. Blank lines and list bullets end a unit in both.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pysbd

_BLOCK_BREAK = re.compile(r"\n[ \t]*\n\s*|\n(?=[ \t]*(?:[*•+]|-(?!-)|\d+[.)])\s)")
"""A blank line, or a line break before a list bullet (`- `, `* `, `• `, `1. `, `2) `)."""
_CODE_LINE = re.compile(
    r"""^\s*(?:
        (?:async\s+)?def\s+\w+\s*\( | class\s+\w+\s*[(:]
        | (?:import|from)\s+[\w.]+(?:\s+import\b.*)?$
        | (?:if|elif|while|for|with|try|except|else|finally)\b[^.]*:\s*(?:\#.*)?$
        | @\w[\w.]*(?:\(.*\))?\s*$ | >>>\s | \.\.\.\s
        | [\w.\[\]]+\s*(?:[+\-*/]?=|:=)\s*\S[^.]*$      # an assignment
        | [\w.]+\s*\([^)]*\)\s*(?:\#.*|//.*|;)?$        # a call, maybe with a comment
        | [\w.]+\s*=\s*[\w.]+\(.*
        | return\s+[\w.]+\(.*\)\s*$
        | [{}()\]\[]+[,;]?\s*$ | \"\"\"\s*$ | \'\'\'\s*$
    )|^\s*\S.*\s(?:\#|//)\s.*$   # code followed by a comment (anchored: linear in the line)
    """,
    re.VERBOSE,
)
"""A line of code: a definition, an import, a block opener, a decorator, a prompt, an
assignment, a call, a lone bracket or docstring quote, or anything followed by a comment."""
_COMMENT_LINE = re.compile(r"^\s*(?:#+|//+)(?=\s|$)")
"""A line that is only a comment: a run of them is prose (its markers read as spaces)."""
_TABLE_LINE = re.compile(
    r"^\s*\|.*\|\s*$"  # a Markdown row
    r"|^[^,\s][^,]*(?:,(?! )[^,]*){2,}$"  # a CSV row: three or more cells, no space after commas
    r"|\S(?<![.!?:;,])(?: {2,}|\t)\S.*\S(?<![.!?:;,])(?: {2,}|\t)\S"  # aligned columns
)
"""A row of a table: Markdown, CSV, or columns aligned with runs of spaces or tabs."""


def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False)


_SEGMENTER = _segmenter()


def line_kind(line: str) -> str:
    """`code`, `table`, `comment` (a line that is only a comment) or `prose`."""
    if _COMMENT_LINE.match(line):
        return "comment"
    if _TABLE_LINE.search(line.rstrip("\n")):
        return "table"
    if _CODE_LINE.search(line.rstrip("\n")):
        return "code"
    return "prose"


def line_structured(block: str) -> bool:
    """Whether a block is written as lines (code, a table, CSV) rather than as wrapped prose:
    a third or more of its non-empty lines are code or table rows (all of them in a block of
    one or two lines: a wrapped sentence's line may look like code by chance)."""
    lines = [line for line in block.splitlines() if line.strip()]
    coded = sum(line_kind(line) in ("code", "table") for line in lines)
    if len(lines) <= 2:
        return bool(lines) and coded == len(lines)
    return coded * 3 >= len(lines)


@lru_cache(maxsize=4096)
def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of each sentence or line of `text`, without surrounding whitespace. Prose
    is segmented by pysbd within each block (a line break inside a paragraph does not end a
    sentence). In a block written as lines (`line_structured`) each line of code or of a table
    is one unit, and a run of other lines (comment lines, a docstring's prose) is segmented as
    prose, comment markers read as spaces."""
    spans: list[tuple[int, int]] = []
    position = 0
    for boundary in [*_BLOCK_BREAK.finditer(text), None]:
        end = boundary.start() if boundary else len(text)
        spans.extend(_block_spans(text, position, end))
        position = boundary.end() if boundary else len(text)
    return tuple(spans)


def _block_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    block = text[start:end]
    if not block.strip():
        return []
    if not line_structured(block):
        runs = [(0, len(block), "prose")]
    else:
        runs = []
        offset = 0
        for line in block.splitlines(keepends=True):
            kind = line_kind(line)
            kind = "line" if kind in ("code", "table") else kind
            if runs and kind != "line" and runs[-1][2] == kind:
                runs[-1] = (runs[-1][0], offset + len(line), kind)
            else:
                runs.append((offset, offset + len(line), kind))
            offset += len(line)
    spans = []
    for a, b, kind in runs:
        if kind == "line":
            pieces = [(a, b)]
        else:
            run = block[a:b]
            if kind == "comment":
                run = _COMMENT_MARKS.sub(lambda m: " " * len(m[0]), run)
            pieces = [(a + x, a + y) for x, y in _prose_spans(run)]
        for x, y in pieces:
            x, y = _strip(block, x, y)
            if y > x:
                spans.append((start + x, start + y))
    return spans


_COMMENT_MARKS = re.compile(r"(?m)^\s*(?:#+|//+)")


def _prose_spans(block: str) -> list[tuple[int, int]]:
    """pysbd's sentences of one paragraph, located in it. Line breaks are read as spaces (the
    same length, so offsets hold): pysbd would end a sentence at each of them."""
    flat = block.replace("\r", " ").replace("\n", " ")
    spans = []
    position = 0
    for segment in _SEGMENTER.segment(flat):
        piece = segment.strip()
        if not piece:
            continue
        found = flat.find(piece, position)
        if found < 0:  # pysbd normalised something; keep the rest as one sentence
            spans.append((position, len(flat)))
            return spans
        if spans and _continues(flat[spans[-1][0] : spans[-1][1]], piece):
            spans[-1] = (spans[-1][0], found + len(piece))
        else:
            spans.append((found, found + len(piece)))
        position = found + len(piece)
    if position < len(flat) and flat[position:].strip():
        spans.append((position, len(flat)))
    return spans


def _continues(previous: str, piece: str) -> bool:
    """Whether pysbd cut inside a sentence: the piece opens with punctuation that cannot start
    one, or the cut fell on a dot that opens a code span or file name (`` `.gz` ``)."""
    return piece[0] in ",;:)]}" or previous.endswith(("`.", "(.", "[.", "/."))


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_sentences(text: str) -> list[str]:
    """The sentences (or lines, see `sentence_spans`) of `text`."""
    return [text[a:b] for a, b in sentence_spans(text)]


def prose_sentences(text: str) -> list[str]:
    """The sentences of one paragraph of prose, by pysbd (line breaks read as spaces)."""
    return [text[a:b] for a, b in _prose_spans(text) if text[a:b].strip()]
