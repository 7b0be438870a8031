"""Memory files: AGENTS.md-style notes prepended to an agent's system prompt."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def load_memory(paths: Sequence[str | Path]) -> str:
    """The contents of every existing file in `paths` (`~` expanded), each under its own heading.

    Missing paths are skipped without a word, so defaults like `["~/AGENTS.md", "./AGENTS.md"]`
    need no checking first.
    """
    blocks = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8").strip()
        if text:
            blocks.append(f"# Memory from {raw}\n{text}")
    return "\n\n".join(blocks)
