"""Evidence written as code or tables, read as statements a claim can be checked against.

People state facts in code and tables as often as in prose: a signature `fill(text, width=70)`
says the default width is 70, a comment `heapify(x)  # ... in linear time` says how fast
heapify is, a table row says what each of its columns holds for that row. Neither the judge
model nor the word-level checks read those forms well, so each is also written out as a
statement (`Fact`): a keyword default as "The default width of fill() is 70.", a comment as
its code's subject followed by the comment's words, a table row as its cells named by their
header. A fact keeps the span of the lines it was read from, which is what a citation quotes:
quotes stay verbatim evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SIGNATURE = re.compile(
    r"^[ \t]*(?:(?:async[ \t]+)?def[ \t]+|class[ \t]+)?(?P<name>[A-Za-z_][\w.]*)[ \t]*"
    r"\((?P<params>[^()]*(?:\([^()]*\)[^()]*)*)\)",
    re.MULTILINE,
)
_PARAM = re.compile(
    r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?::\s*[^=]+?)?\s*=\s*(?P<value>.+?)\s*$", re.DOTALL
)
_BARE_PARAM = re.compile(
    r"^\s*(?:\*{1,2}[A-Za-z_]\w*|\*|/|\.\.\.|…|[A-Za-z_]\w*(?:\s*:\s*[^=]+)?)\s*$"
)
_PROSE_DEFAULT = re.compile(
    r"\b(?P<name>[A-Za-z_]\w*)\s*\((?:by\s+)?default(?:s\s+to|\s+is|:)?\s+(?P<value>[^()]+(?:\([^()]*\))?)\)"
)
_TRAILING_COMMENT = re.compile(r"^(?P<code>[^#\n]*?\S)[ \t]+(?:#+|//+)[ \t]*(?P<comment>\S[^\n]*)$")
_COMMENT_ONLY = re.compile(r"^[ \t]*(?:#+|//+)[ \t]?(?P<comment>[^\n]*)$")
_DEFINITION = re.compile(r"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+(?P<name>[A-Za-z_]\w*)")
_CALL = re.compile(r"(?P<name>[A-Za-z_][\w.]*)\s*\([^()]*\)")
_MARKDOWN_ROW = re.compile(r"^[ \t]*\|(?P<cells>.*)\|[ \t]*$")
_SEPARATOR_CELL = re.compile(r"^\s*:?-{2,}:?\s*$")
_CSV_ROW = re.compile(r"^[^,\s][^,\n]*(?:,(?! )[^,\n]*){2,}$")
_ALIGNED_GAP = re.compile(r"(?<=[^\s.!?:;,])(?: {2,}|\t+)(?=\S)")
_MARKUP = re.compile(r"\*\*|__|`|\[(?P<text>[^\]]*)\](?:\([^)]*\))?")


@dataclass(frozen=True)
class Fact:
    """A statement read from code or a table, and the span of the lines it was read from."""

    text: str
    start: int
    end: int


def read_facts(text: str) -> list[Fact]:
    """Every fact that `text`'s signatures, comments and tables state, in text order."""
    lines = _lines(text)
    facts = _signature_defaults(text) + _prose_defaults(text) + _comments(text, lines)
    facts += _tables(text, lines)
    unique: dict[str, Fact] = {}
    for fact in sorted(facts, key=lambda f: (f.start, f.end)):
        unique.setdefault(fact.text.casefold(), fact)
    return list(unique.values())


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line of `text`, without its line break."""
    spans = []
    position = 0
    for line in text.splitlines(keepends=True):
        spans.append((position, position + len(line.rstrip("\r\n"))))
        position += len(line)
    return spans


def _split_params(params: str) -> list[str]:
    """The parameters of a signature, split at top-level commas."""
    parts, depth, current = [], 0, ""
    for char in params:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def _signature_defaults(text: str) -> list[Fact]:
    """Facts like "The default width of fill() is 70." for each keyword default of each signature: a
    `def` (or `class`) line, or a line that opens with `name(...)` whose parameters are all
    names, `*args`, `**kwargs` or `name=value` (a call passing literals is not a signature)."""
    facts = []
    for match in _SIGNATURE.finditer(text):
        params = _split_params(match["params"])
        keyword = [_PARAM.match(p) for p in params]
        defined = match[0].lstrip().startswith(("def", "async", "class"))
        shaped = all(
            k is not None or _BARE_PARAM.match(p) for k, p in zip(keyword, params, strict=True)
        )
        if not (defined or shaped) or not any(keyword):
            continue
        function = match["name"].rsplit(".", 1)[-1] if defined else match["name"]
        line_end = text.find("\n", match.end())
        end = len(text) if line_end < 0 else line_end
        start = match.start() + len(match[0]) - len(match[0].lstrip())
        for found in keyword:
            if found is None:
                continue
            value = " ".join(found["value"].split())
            facts.append(
                Fact(f"The default {found['name']} of {function}() is {value}.", start, end)
            )
    return facts


def _prose_defaults(text: str) -> list[Fact]:
    """Facts like "The default lo is 0." for "lo (default 0)", "hi (defaults to len(a))"."""
    facts = []
    for match in _PROSE_DEFAULT.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        value = " ".join(match["value"].split()).rstrip(".,;")
        facts.append(
            Fact(f"The default {match['name']} is {value}.", start, len(text) if end < 0 else end)
        )
    return facts


def _subject(code: str) -> str:
    """What a line of code is about: its definition's or last call's name, else the line."""
    definition = _DEFINITION.match(code)
    if definition:
        return definition["name"] + "()"
    calls = list(_CALL.finditer(code))
    if calls:
        return calls[-1]["name"] + "()"
    return " ".join(code.split())


def _comments(text: str, lines: list[tuple[int, int]]) -> list[Fact]:
    """A comment read as a statement about its code: a trailing comment (and the comment-only
    lines that continue it) about the code before it, "heapify() transforms list into a heap";
    a comment-only run about the definition that follows it, else the one it sits in."""
    facts = []
    index = 0
    enclosing: str | None = None
    while index < len(lines):
        start, end = lines[index]
        line = text[start:end]
        definition = _DEFINITION.match(line)
        if definition:
            enclosing = definition["name"] + "()"
        trailing = _TRAILING_COMMENT.match(line)
        only = _COMMENT_ONLY.match(line)
        if trailing and not only and not _inside_string(trailing["code"]):
            words = [trailing["comment"]]
            stop = index + 1
            while stop < len(lines):
                more = _COMMENT_ONLY.match(text[lines[stop][0] : lines[stop][1]])
                if not more or not more["comment"].strip():
                    break
                words.append(more["comment"])
                stop += 1
            facts.append(
                Fact(_statement(_subject(trailing["code"]), words), start, lines[stop - 1][1])
            )
            index = stop
            continue
        if only and only["comment"].strip():
            words = []
            stop = index
            while stop < len(lines):
                more = _COMMENT_ONLY.match(text[lines[stop][0] : lines[stop][1]])
                if not more:
                    break
                words.append(more["comment"])
                stop += 1
            following = next((text[a:b] for a, b in lines[stop:] if text[a:b].strip()), "")
            after = _DEFINITION.match(following)
            subject = after["name"] + "()" if after else enclosing
            if subject:
                facts.append(Fact(_statement(subject, words), start, lines[stop - 1][1]))
            index = stop
            continue
        index += 1
    return facts


def _inside_string(code: str) -> bool:
    """Whether a `#` after `code` sits inside a string literal (an odd number of quotes)."""
    return code.count('"') % 2 == 1 or code.count("'") % 2 == 1


def _statement(subject: str, words: list[str]) -> str:
    comment = " ".join(" ".join(words).split()).rstrip(".")
    return f"{subject} {comment}."


def _clean(cell: str) -> str:
    return " ".join(_MARKUP.sub(lambda m: m["text"] or "", cell).split())


def _tables(text: str, lines: list[tuple[int, int]]) -> list[Fact]:
    """Each data row of a Markdown, CSV or aligned-column table, its cells named by the header:
    "Compressor name zstd 1.5.1 -1: Ratio 2.887, Compression 530 MB/s." (the header is the
    table's first row)."""
    return (
        _markdown_tables(text, lines)
        + _split_tables(text, lines, "csv")
        + _split_tables(text, lines, "aligned")
    )


def _markdown_tables(text: str, lines: list[tuple[int, int]]) -> list[Fact]:
    facts: list[Fact] = []
    header: list[str] | None = None
    for start, end in lines:
        row = _MARKDOWN_ROW.match(text[start:end])
        if row is None:
            header = None
            continue
        cells = [c.strip() for c in row["cells"].split("|")]
        if all(_SEPARATOR_CELL.match(c) for c in cells if c):
            continue
        if header is None:
            header = [_clean(c) for c in cells]
            continue
        statement = _row_statement(header, [_clean(c) for c in cells])
        if statement:
            facts.append(Fact(statement, start, end))
    return facts


def _split_tables(text: str, lines: list[tuple[int, int]], kind: str) -> list[Fact]:
    """CSV tables (cells split at commas) or aligned columns (at runs of two or more spaces):
    a header line followed by rows of as many cells."""
    facts: list[Fact] = []
    header: list[str] | None = None
    for start, end in lines:
        line = text[start:end]
        if kind == "csv":
            cells = [c.strip() for c in line.split(",")] if _CSV_ROW.match(line) else []
        else:
            cells = [c.strip() for c in _ALIGNED_GAP.split(line.strip())]
            cells = cells if len(cells) >= 3 and not _MARKDOWN_ROW.match(line) else []
        if not cells:
            header = None
            continue
        if header is None or (kind == "aligned" and len(cells) != len(header)):
            header = cells
            continue
        statement = _row_statement(header, cells)
        if len(cells) <= len(header) and statement:
            facts.append(Fact(statement, start, end))
    return facts


def _row_statement(header: list[str], cells: list[str]) -> str:
    named = [(h, c) for h, c in zip(header, cells, strict=False) if c]
    if not named:
        return ""
    (first_header, first), rest = named[0], named[1:]
    described = ", ".join(f"{h} {c}" if h else c for h, c in rest)
    lead = f"{first_header} {first}" if first_header else first
    return f"{lead}: {described}." if described else f"{lead}."
