"""No dated history in the code: "Until 2026-12-02 the calibration was …" belongs in
CHANGELOG.md, where it is dated by its release, not in a comment or docstring that outlives it."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE = ("sleuth", "workflows", "activities", "workers", "tests", "bench", "scripts")
DATED = re.compile(r"\b(?:Until|Since|As of|Before|After) 20\d\d-\d\d", re.IGNORECASE)


def dated_history(source: str) -> list[tuple[int, str]]:
    """The comments and strings of `source` that date a change, with their lines."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING) and DATED.search(token.string):
            found.append((token.start[0], DATED.search(token.string).group(0)))  # type: ignore[union-attr]
    return found


def test_the_finder_sees_a_dated_comment_and_a_dated_docstring() -> None:
    source = '"""Until 2026-12-02 it was slower."""\nx = 1  # since 2025-01 the cap is 3\n'
    assert dated_history(source) == [(1, "Until 2026-12"), (2, "since 2025-01")]
    assert dated_history('parse_since("2025-05-30")  # a date, not history\n') == []


def test_no_comment_or_docstring_dates_a_change() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {phrase!r}: move the history to CHANGELOG.md"
        for folder in CODE
        for path in sorted((REPO / folder).rglob("*.py"))
        if "grounding_data" not in path.parts and path != Path(__file__).resolve()
        for line, phrase in dated_history(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "\n".join(offenders)
