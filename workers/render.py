"""Terminal rendering for the CLI: `rich` tables, progress bars and reports when a person reads
stdout, plain text everywhere else.

The commands build their plain output first (tables as rows, the research report as the text
`sleuth.workers.cli_research.format_report` writes); this module only decides how it looks. On a
terminal it draws it with `rich`. Pipes, files, CI logs and tests get the plain text unchanged,
and `--json` never comes here. Cell and report text is never read as rich markup: a value
holding `[bold]` prints as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from sleuth.runtime.errors import InvalidSettingError

MARK_STYLES = {"✓": "green", "✗": "red"}
"""How a leading mark in a report line or a table cell is coloured."""
STATUS_STYLES = {
    "ready": "green",
    "ok": "green",
    "active": "green",
    "broken": "red",
    "failed": "red",
    "not downloaded": "yellow",
    "paused": "yellow",
}
"""How a status cell is coloured; any other value prints unstyled."""


def terminal_console(out: TextIO) -> Console | None:
    """A rich console writing to `out` when `out` is a terminal; None for pipes, files and CI
    logs, which get plain text."""
    isatty = getattr(out, "isatty", None)
    if isatty is None or not isatty():
        return None
    return Console(file=out, highlight=False)


@dataclass
class PlainTable:
    """A table as plain rows: the one structure behind both renderings."""

    columns: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    status_column: int | None = None
    """The column whose values `STATUS_STYLES` colours on a terminal."""

    def add(self, *cells: str) -> None:
        if len(cells) != len(self.columns):
            raise InvalidSettingError(
                f"a row of {len(self.columns)} cells, got {len(cells)}: {cells!r}"
            )
        self.rows.append(cells)

    def plain(self, *, last_column_free: bool = True) -> str:
        """The table as aligned plain text (the last column unpadded when `last_column_free`)."""
        all_rows = [tuple(self.columns), *self.rows]
        padded = len(self.columns) - 1 if last_column_free else len(self.columns)
        widths = [max(len(row[i]) for row in all_rows) for i in range(padded)]
        lines = []
        for row in all_rows:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            cells += list(row[padded:])
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)

    def rich(self) -> Table:
        table = Table(show_edge=False, header_style="bold", pad_edge=False)
        for column in self.columns:
            table.add_column(column, overflow="fold")
        for row in self.rows:
            cells = []
            for position, cell in enumerate(row):
                style = STATUS_STYLES.get(cell, "") if position == self.status_column else ""
                cells.append(Text(cell, style=style))
            table.add_row(*cells)
        return table


def print_table(table: PlainTable, out: TextIO) -> None:
    """`table` drawn with rich on a terminal, else as aligned plain text."""
    console = terminal_console(out)
    if console is None:
        out.write(table.plain() + "\n")
    else:
        console.print(table.rich())


def print_report(text: str, out: TextIO) -> None:
    """A report written as plain text (titles underlined with dashes, findings marked ✓/✗)
    drawn with rich on a terminal; written unchanged anywhere else."""
    console = terminal_console(out)
    if console is None:
        out.write(text + "\n")
        return
    render_report(text, console)


def render_report(text: str, console: Console) -> None:
    """Draw a plain-text report: each dash-underlined title as a rule, a JSON section as
    highlighted JSON, marks coloured; any other line as it is."""
    for title, body in _sections(text.splitlines()):
        if title is not None:
            console.print(Rule(Text(title, style="bold"), align="left"))
        block = "\n".join(body).strip("\n")
        if title is not None and _is_json(block):
            console.print(Syntax(block, "json", theme="ansi_dark", background_color="default"))
            console.print()
            continue
        for line in body:
            console.print(_styled_line(line), soft_wrap=True)


@contextmanager
def progress_bar(out: TextIO, description: str) -> Iterator[ProgressBar | None]:
    """A rich progress bar on `out` when it is a terminal (None elsewhere: the caller prints
    plain lines). The bar is removed when the block ends."""
    console = terminal_console(out)
    if console is None:
        yield None
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        console=console,
        transient=True,
    )
    with progress:
        yield ProgressBar(progress, progress.add_task(description, total=None, detail=""))


@dataclass
class ProgressBar:
    """One bar of a running `progress_bar`."""

    progress: Progress
    task: TaskID

    def update(self, *, completed: int, total: int | None, detail: str = "") -> None:
        """Show `completed` of `total` (None: not known yet) and a short `detail`."""
        self.progress.update(self.task, completed=completed, total=total, detail=detail)

    def say(self, line: str) -> None:
        """Print `line` above the bar (as plain text, never markup)."""
        self.progress.console.print(Text(line))


def _sections(lines: Sequence[str]) -> Iterator[tuple[str | None, list[str]]]:
    """(title, body lines) in order; lines before the first title come with title None."""
    title: str | None = None
    body: list[str] = []
    position = 0
    while position < len(lines):
        line = lines[position]
        underline = lines[position + 1] if position + 1 < len(lines) else ""
        if line.strip() and underline and set(underline) == {"-"} and len(underline) == len(line):
            if title is not None or body:
                yield title, body
            title, body = line, []
            position += 2
            continue
        body.append(line)
        position += 1
    if title is not None or body:
        yield title, body


def _is_json(block: str) -> bool:
    if not block.startswith(("{", "[")):
        return False
    try:
        json.loads(block)
    except ValueError:
        return False
    return True


def _styled_line(line: str) -> Text:
    mark = line[:1]
    if mark in MARK_STYLES:
        return Text.assemble((mark, f"bold {MARK_STYLES[mark]}"), line[1:])
    return Text(line)
