"""What the docs generators share: write a generated page, or with `--check` say it is stale."""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_or_check(
    page: Path, text: str, script: str, description: str, argv: list[str] | None
) -> int:
    """Write `text` to `page`, or with `--check` in `argv` exit 1 when the page differs from it."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    options = parser.parse_args(argv)
    if options.check:
        if not page.exists() or page.read_text() != text:
            print(f"{page.relative_to(ROOT)} is stale: run python {Path(script).relative_to(ROOT)}")
            return 1
        return 0
    page.write_text(text)
    print(f"wrote {page.relative_to(ROOT)}")
    return 0
