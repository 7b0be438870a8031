"""`sleuth report RUN_ID --output report.html`: a finished research run's report as a file.

The format follows the extension: `.md` Markdown, `.html` one self-contained page, `.json` the
report's sections as data (`sleuth.research.render`). `sleuth research --output FILE` writes the
same file at the end of a run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sleuth.research import ResearchReport
from sleuth.research.render import FORMATS, format_for, write_report
from sleuth.runtime.paths import workflow_link
from sleuth.workers.cli_connection import add_connection_arguments


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write a finished research run's report to a Markdown, HTML or JSON file",
        description=(
            "Read the report of a finished research run and write it to a file to keep or "
            "share: the answer with numbered citations, each claim with its verdict, score and "
            "quote, coverage, sources and the run's counters. The format follows the "
            "extension: " + ", ".join(FORMATS) + "."
        ),
    )
    parser.add_argument("run_id", metavar="RUN_ID", help="the workflow id of the research run")
    add_output_argument(parser, required=True)
    add_connection_arguments(parser)
    parser.set_defaults(func=run_report_command)


def add_output_argument(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        required=required,
        help="write the report to FILE: report.md, report.html or report.json (the format "
        "follows the extension; an existing file is replaced whole)",
    )


def check_output(path: str | None) -> str | None:
    """Why `--output path` cannot be written (None when it can): checked before a run starts,
    so a typo never costs a run."""
    if path is None:
        return None
    try:
        format_for(path)
    except ValueError as exc:
        return f"--output: {exc}"
    target = Path(path)
    if target.is_dir():
        return f"--output {path}: that is a folder; name the file, e.g. {target / 'report.html'}"
    if not target.parent.is_dir():
        return f"--output {path}: folder {target.parent} does not exist; create it first"
    return None


def save_report(report: ResearchReport, path: str, workflow_id: str, namespace: str) -> None:
    """Write `report` to `path` and say so on stderr (and that an older file was replaced)."""
    replaced = write_report(
        report,
        path,
        workflow_id=workflow_id,
        web_ui=workflow_link(workflow_id, namespace=namespace),
    )
    note = " (replaced the file that was there)" if replaced else ""
    print(f"report written to {path}{note}", file=sys.stderr, flush=True)


async def run_report_command(args: argparse.Namespace) -> int:
    problem = check_output(args.output)
    if problem:
        print(f"sleuth: {problem}", file=sys.stderr)
        return 2
    from sleuth.workers.embedded import connect_temporal
    from sleuth.workers.reports import RunNotReadable, research_outcome

    client = await connect_temporal(namespace=args.namespace)
    try:
        outcome = await research_outcome(client, args.run_id)
    except RunNotReadable as exc:
        print(f"sleuth: {exc}", file=sys.stderr)
        return 1
    save_report(outcome.final_state, args.output, outcome.workflow_id, client.namespace)
    return 0
