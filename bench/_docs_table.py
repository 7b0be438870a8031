"""Write one benchmark's latest results into its own section of `docs/benchmarks.md`.

Each benchmark owns the text between `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->`;
a run replaces that text (the file and the section are created when missing) and leaves the rest
of the page alone, so the page always shows each benchmark's latest run, never a diary of runs.

    from bench._docs_table import write_section
    write_section("research_quality", table, command=" ".join(sys.argv), title="Research quality")
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from pathlib import Path

DOCS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
PAGE_HEADER = (
    "# Benchmarks\n\n"
    "Each section below is written by the benchmark it names, with the command, date and machine "
    "of its latest run; running the benchmark again replaces its section.\n"
)
_NAME = re.compile(r"^[a-z0-9_]+$")


class DocsSectionError(ValueError):
    """The page's markers for a section are broken (so it cannot be replaced safely)."""


def markers(name: str) -> tuple[str, str]:
    if not _NAME.match(name):
        raise ValueError(f"section name {name!r}: use lower-case letters, digits and _")
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def machine_description() -> str:
    """The machine a run measured: CPU model, cores, OS, Python, and the load when it ended."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = ", load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())
    python = ".".join(map(str, sys.version_info[:3]))
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {python}{load}"
    )


def render_section(
    name: str, body: str, *, command: str, title: str | None = None, when: str | None = None
) -> str:
    """The section's text, markers included: a heading, the command, date and machine, then
    `body` (Markdown, as the benchmark formats it)."""
    start, end = markers(name)
    when = when or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [start]
    if title:
        lines += [f"## {title}", ""]
    lines += [
        f"Latest run: `{command}` on {when}; {machine_description()}.",
        "",
        body.rstrip(),
        end,
    ]
    return "\n".join(lines)


def replace_section(page: str, name: str, section: str) -> str:
    """`page` with the section `name` replaced by `section` (appended when the page has none)."""
    start, end = markers(name)
    starts, ends = page.count(start), page.count(end)
    if starts == 0 and ends == 0:
        return page.rstrip("\n") + "\n\n" + section + "\n"
    if starts != 1 or ends != 1 or page.index(start) > page.index(end):
        raise DocsSectionError(
            f"the page has {starts} {start!r} and {ends} {end!r} markers; expected one of each, "
            "start before end. Fix the page by hand (or delete the section) and run again"
        )
    before = page[: page.index(start)]
    after = page[page.index(end) + len(end) :]
    return before + section + after


def write_section(
    name: str,
    body: str,
    *,
    command: str,
    title: str | None = None,
    path: Path | None = None,
    when: str | None = None,
) -> Path:
    """Replace benchmark `name`'s section of `path` (default `docs/benchmarks.md`) with `body`;
    returns the page's path. The page is written whole to a temporary file first, so a failure
    never leaves it half-written."""
    path = path or DOCS_PAGE
    page = path.read_text() if path.exists() else PAGE_HEADER
    text = replace_section(
        page, name, render_section(name, body, command=command, title=title, when=when)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    temporary.replace(path)
    return path
