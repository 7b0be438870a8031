"""The `sleuth` command line. Each feature adds its subcommands from its own module.

A command module defines `register(subparsers)`, adding parsers whose `func(args) -> int` runs the
command (coroutines are awaited). Add each command it adds to COMMANDS, with the module's name.
A command line imports only its command's module (the others load Temporal's client, the
workflows and the agent: about half a second of CPU a command need not pay); `sleuth --help`,
no command or an unknown one import them all.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

import sleuth
from sleuth.runtime.log import configure_logging
from sleuth.runtime.redact import redact
from sleuth.runtime.settings import load_settings

# Each command, in the order `sleuth --help` lists them, and the module that registers it.
COMMANDS: dict[str, str] = {
    "server": "sleuth.workers.cli_server",
    "worker": "sleuth.workers.cli_worker",
    "models": "sleuth.workers.cli_models",
    "ingest": "sleuth.workers.cli_ingest",
    "research": "sleuth.workers.cli_research",
    "report": "sleuth.workers.cli_report",
    "scan": "sleuth.workers.cli_scan",
    "rows": "sleuth.workers.cli_scan",
    "schedule": "sleuth.workers.cli_schedule",
    "run": "sleuth.workers.cli_run",
    "agent": "sleuth.workers.cli_agent",
    "codec-server": "sleuth.workers.cli_codec",
    "serve": "sleuth.workers.cli_serve",
    "setup": "sleuth.workers.cli_setup",
    "review": "sleuth.workers.cli_review",
    "runs": "sleuth.workers.cli_runs",
    "doctor": "sleuth.workers.cli_doctor",
}
COMMAND_MODULES: list[str] = list(dict.fromkeys(COMMANDS.values()))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: only its command's module when it names one, else every command."""
    parser = argparse.ArgumentParser(
        prog="sleuth",
        description="Durable deep-research agents on Temporal.",
    )
    parser.add_argument("--version", action="version", version=f"sleuth {sleuth.__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    # The top-level parser has only -h: a first word that is no option is the command.
    wanted = COMMANDS.get(argv[0]) if argv and not argv[0].startswith("-") else None
    for module_name in [wanted] if wanted else COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "reports_bad_settings", False):
        load_settings()  # every SLEUTH_* variable is checked before any command starts
        configure_logging()
    func = getattr(args, "func", None)
    if func is None:
        build_parser().print_help()  # every command, whichever module parsed the line
        return 2
    from sleuth.workers.telemetry import configure_tracing, shutdown_tracing

    configure_tracing()
    try:
        outcome = func(args)
        if inspect.isawaitable(outcome):
            outcome = asyncio.run(outcome)  # type: ignore[arg-type]
    finally:
        shutdown_tracing()
    return int(outcome or 0)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point. Exits with os._exit after flushing: temporalio can abort at interpreter exit."""
    warnings.showwarning = _show_warning
    try:
        code = run(argv)
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:  # a person reads this: one line, what went wrong
        print(f"sleuth: error: {redact(str(exc))}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


_python_showwarning = warnings.showwarning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Settings warnings read as one line to a person; others keep Python's format."""
    # Only workers.client warns so, and then it is loaded; a command that never loads it pays nothing.
    client = sys.modules.get("sleuth.workers.client")
    if client is not None and issubclass(category, client.DeprecatedVariableWarning):
        print(f"sleuth: warning: {message}", file=sys.stderr)
        return
    _python_showwarning(message, category, filename, lineno, file, line)
