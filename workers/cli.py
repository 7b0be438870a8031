"""The `sleuth` command line. Each feature adds its subcommands from its own module.

A command module defines `register(subparsers)`, adding parsers whose `func(args) -> int` runs the
command (coroutines are awaited). Add the module's name to COMMAND_MODULES.
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

from sleuth.log import configure_logging
from sleuth.redact import redact
from sleuth.settings import load_settings
from workers.client import DeprecatedVariableWarning

COMMAND_MODULES: list[str] = [
    "workers.cli_server",
    "workers.cli_worker",
    "workers.cli_models",
    "workers.cli_ingest",
    "workers.cli_research",
    "workers.cli_scan",
    "workers.cli_schedule",
    "workers.cli_run",
    "workers.cli_agent",
    "workers.cli_codec",
    "workers.cli_serve",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sleuth",
        description="Durable deep-research agents on Temporal.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    load_settings()  # every SLEUTH_* variable is checked before any command starts
    configure_logging()
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    outcome = func(args)
    if inspect.isawaitable(outcome):
        outcome = asyncio.run(outcome)  # type: ignore[arg-type]
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
    if issubclass(category, DeprecatedVariableWarning):
        print(f"sleuth: warning: {message}", file=sys.stderr)
        return
    _python_showwarning(message, category, filename, lineno, file, line)
