"""sleuth.workers.render: rich tables, progress bars and the research report on a terminal; the plain
text unchanged in pipes, files and tests."""

from __future__ import annotations

import io
import os
import re

import pytest
from rich.console import Console

from sleuth.activities.research_models import ResearchOutcome
from sleuth.rag.ingest import FileResult
from sleuth.research import ClaimRecord, ResearchReport
from sleuth.workers import cli_models
from sleuth.workers.cli_ingest import IngestProgress
from sleuth.workers.cli_research import format_report
from sleuth.workers.render import (
    PlainTable,
    print_report,
    print_table,
    progress_bar,
    render_report,
    terminal_console,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as sys.stdout does in a person's shell."""

    def isatty(self) -> bool:
        return True


def outcome() -> ResearchOutcome:
    report = ResearchReport(
        prompt="How fast did the CRM market grow?",
        summary="The CRM market grew 12 percent in 2024 [1].",
        structured_output={"summary": "grew 12 percent", "key_findings": ["[bold]12%"]},
        output_schema="Report",
        claims=[
            ClaimRecord(claim="The market grew 12 percent.", score=0.9, grounded=True),
            ClaimRecord(claim="It will double by 2030.", score=0.1, grounded=False),
        ],
        sources=["gartner-2024.pdf"],
        grounding_score=0.5,
        grounding_threshold=0.65,
        end_reason="max_replans",
    )
    return ResearchOutcome(
        final_state=report, state_ref="ref", research="market", workflow_id="wf-1", run_id="r"
    )


def test_pipes_and_files_get_no_console() -> None:
    assert terminal_console(io.StringIO()) is None
    with open(os.devnull, "w") as devnull:
        assert terminal_console(devnull) is None
    assert isinstance(terminal_console(Terminal()), Console)


def test_a_real_pseudo_terminal_gets_a_console() -> None:
    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as stream:
            assert terminal_console(stream) is not None
    finally:
        os.close(leader)
        os.close(follower)


def test_the_report_is_unchanged_off_a_terminal() -> None:
    text = format_report(outcome(), "http://ui/wf-1")
    out = io.StringIO()
    print_report(text, out)
    assert out.getvalue() == text + "\n"


def test_the_report_on_a_terminal_has_rules_coloured_marks_and_every_line() -> None:
    text = format_report(outcome(), "http://ui/wf-1")
    out = io.StringIO()
    render_report(text, Console(file=out, force_terminal=True, color_system="standard", width=90))
    shown = out.getvalue()
    plain = ANSI.sub("", shown)
    # Titles become rules instead of dash underlines.
    for title in ("Summary", "Structured output", "Findings", "Sources"):
        assert re.search(rf"^{title} ─+$", plain, re.M), plain
    assert "\n-------\n" not in plain
    # Marks are coloured: green for a grounded finding, red for an ungrounded one.
    assert "\x1b[1;32m✓" in shown and "\x1b[1;31m✗" in shown
    # Every other line of the plain report is there, text never read as rich markup.
    assert '"[bold]12%"' in plain
    for line in text.splitlines():
        if line and set(line) != {"-"} and not line.startswith(("{", "}", "  ")):
            assert line in plain, line


def test_print_report_draws_on_a_terminal() -> None:
    out = Terminal()
    print_report(format_report(outcome(), "http://ui/wf-1"), out)
    plain = ANSI.sub("", out.getvalue())
    assert re.search(r"^Findings ─+$", plain, re.M) and "Workflow: wf-1" in plain


def test_a_plain_table_aligns_columns_and_leaves_the_last_free() -> None:
    table = PlainTable(("NAME", "STATUS", "DESCRIPTION"), status_column=1)
    table.add("a", "ready", "first model")
    table.add("longer-name", "missing", "second")
    assert table.plain().splitlines() == [
        "NAME         STATUS   DESCRIPTION",
        "a            ready    first model",
        "longer-name  missing  second",
    ]
    with pytest.raises(ValueError, match="a row of 3 cells, got 2"):
        table.add("only", "two")


def test_a_table_on_a_terminal_is_drawn_and_cells_are_not_markup() -> None:
    table = PlainTable(("ITEM", "STATUS", "DATA"), status_column=1)
    table.add("item-1", "failed", "[red]not markup[/red]")
    out = Terminal()
    print_table(table, out)
    plain = ANSI.sub("", out.getvalue())
    assert "[red]not markup[/red]" in plain
    assert re.search(r"^ITEM\s+┃\s+STATUS\s+┃\s+DATA", plain, re.M), plain
    piped = io.StringIO()
    print_table(table, piped)
    assert piped.getvalue().splitlines()[0].split() == ["ITEM", "STATUS", "DATA"]


def test_sleuth_models_draws_a_table_on_a_terminal(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("SLEUTH_MODEL_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    cli_models.list_models(type("Args", (), {"verify": False, "json": False})())
    plain = ANSI.sub("", terminal.getvalue())
    assert re.search(r"NAME\s+┃\s+STATUS\s+┃\s+SIZE\s+┃\s+DESCRIPTION", plain), plain
    assert re.search(r"qwen2\.5-coder-0\.5b\s+│\s+not downloaded\s+│", plain), plain


def test_progress_bar_only_on_a_terminal() -> None:
    with progress_bar(io.StringIO(), "scan") as bar:
        assert bar is None
    out = Terminal()
    with progress_bar(out, "scan") as bar:
        assert bar is not None
        bar.update(completed=3, total=None, detail="0 failed")
        bar.update(completed=7, total=10, detail="1 failed, 2 running")
        bar.progress.refresh()
    plain = ANSI.sub("", out.getvalue())
    assert "7/10" in plain and "1 failed, 2 running" in plain


def test_ingest_progress_is_a_bar_on_a_terminal_and_a_line_per_file_elsewhere() -> None:
    files = [
        FileResult(path="docs/a.md", outcome="added", chunks=3),
        FileResult(path="docs/b.pdf", outcome="failed", error="not a PDF"),
    ]
    piped = io.StringIO()
    report = IngestProgress(None, piped)
    for done, result in enumerate(files, start=1):
        report(done, len(files), result)
    assert piped.getvalue().splitlines() == [
        "[1/2] added docs/a.md (3 chunks)",
        "skipped docs/b.pdf: not a PDF",
    ]
    out = Terminal()
    with progress_bar(out, "ingest") as bar:
        report = IngestProgress(bar, out)
        for done, result in enumerate(files, start=1):
            report(done, len(files), result)
        assert bar is not None
        bar.progress.refresh()
    plain = ANSI.sub("", out.getvalue())
    assert "skipped docs/b.pdf: not a PDF" in plain and "2/2" in plain
    assert "[1/2] added" not in plain
