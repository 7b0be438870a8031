"""The numbered passages a report's writer reads, and the inline `[n]` citations it writes.

The summarize, regenerate and causal inference nodes see the evidence as numbered passages (the
same passages the grounding judge reads, `sleuth.grounding.split_passages`) under their source,
and are asked to cite them inline as `[n]`. The numbering is a pure function of the state, so
regenerate sees the very numbers summarize saw. A number the writer cites that no passage has is
dropped from the report; `ResearchState.passage_references` says what each `[n]` refers to.
"""

from __future__ import annotations

import re
from typing import Any

from sleuth.grounding import Passage, split_passages
from sleuth.grounding.passages import PassageIndex, distinct_passages
from sleuth.research.state import ResearchState

WRITER_PASSAGE_CHARS = 6000
"""The most passage text a writer's prompt holds (about 1,500 tokens): a small local model
evaluates it in seconds. When the evidence holds more, the passages that best match the question
(and the replan's focus) are kept, in evidence order."""
NO_EVIDENCE_TEXT = "(no evidence was gathered)"
_MARK = re.compile(r"\s?\[\s*(\d+(?:\s*[,;\-–]\s*\d+)*)\s*\]")
_RANGE = re.compile(r"(\d+)\s*[\-–]\s*(\d+)")
_LONGEST_RANGE = 50


def writer_passages(
    state: ResearchState, *, max_chars: int = WRITER_PASSAGE_CHARS
) -> list[Passage]:
    """The passages a writer is given, each distinct text once, grouped by source and in
    evidence order within a source; at most `max_chars` of text, chosen by BM25 against the
    question when there is more."""
    passages = distinct_passages(split_passages(state.evidence))
    if sum(len(p.text) for p in passages) > max_chars:
        query = " ".join(p for p in (state.prompt, state.focused_prompt) if p)
        scores = PassageIndex(passages).bm25(query)
        ranked = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
        chosen: list[int] = []
        used = 0
        for index in ranked:
            size = len(passages[index].text)
            if used + size <= max_chars or not chosen:
                chosen.append(index)
                used += size
        passages = [passages[i] for i in sorted(chosen)]
    # Grouped by source (in order of first appearance), so the prompt names each source once.
    sources = list(dict.fromkeys(p.source for p in passages))
    return sorted(passages, key=lambda p: sources.index(p.source))


def render_passages(passages: list[Passage]) -> str:
    """The passages under a `From <source>:` line per source, each `[n] text`; a note when
    there is none."""
    if not passages:
        return NO_EVIDENCE_TEXT
    blocks: list[str] = []
    for number, passage in enumerate(passages, start=1):
        if number == 1 or passage.source != passages[number - 2].source:
            blocks.append(f"From {passage.source}:")
        blocks.append(f"[{number}] {' '.join(passage.text.split())}")
    return "\n".join(blocks)


def passage_references(passages: list[Passage]) -> list[str]:
    """`source#location` of each numbered passage, in order."""
    return [f"{p.source}#{p.location}" if p.location else p.source for p in passages]


def drop_invented_citations(text: str, count: int) -> str:
    """`text` with every cited number outside 1..`count` removed from its `[n]` mark, and a
    mark left with no number removed whole. Ranges (`[2-4]`) are read as the numbers they span."""

    def keep(match: re.Match[str]) -> str:
        numbers = cited_numbers(match.group(1))
        valid = [n for n in numbers if 1 <= n <= count]
        if valid == numbers:
            return match.group(0)
        if not valid:
            return ""
        lead = " " if match.group(0).startswith(" ") else ""
        return f"{lead}[{', '.join(str(n) for n in valid)}]"

    return _MARK.sub(keep, text)


def drop_invented_in(value: Any, count: int) -> Any:
    """`drop_invented_citations` applied to every string of a JSON value."""
    if isinstance(value, str):
        return drop_invented_citations(value, count)
    if isinstance(value, list):
        return [drop_invented_in(v, count) for v in value]
    if isinstance(value, dict):
        return {k: drop_invented_in(v, count) for k, v in value.items()}
    return value


def cited_numbers(inside: str) -> list[int]:
    """The numbers inside one `[...]` mark (`2, 4-6` -> 2, 4, 5, 6), each once."""
    numbers: list[int] = []
    for part in re.split(r"\s*[,;]\s*", inside):
        span = _RANGE.fullmatch(part.strip())
        if span and 0 <= int(span[2]) - int(span[1]) <= _LONGEST_RANGE:
            found = list(range(int(span[1]), int(span[2]) + 1))
        else:
            found = [int(n) for n in re.findall(r"\d+", part)]
        numbers.extend(n for n in found if n not in numbers)
    return numbers
