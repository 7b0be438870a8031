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

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNGROUNDED = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_ERROR: "the command failed: a run failed, a server did not answer, something to fix "
    "(stderr says what)",
    EXIT_USAGE: "the command line is wrong: an unknown option, a bad value, a missing argument",
    EXIT_UNGROUNDED: "`sleuth research`: the report is partial or not found in the sources "
    "(--allow-ungrounded exits 0)",
    EXIT_INTERRUPTED: "interrupted with Ctrl-C",
    EXIT_BROKEN_PIPE: "the reader of stdout went away (`sleuth runs | head -1`): the output was "
    "cut, quietly, as when a Unix tool dies of SIGPIPE",
}
"""Every exit code of `sleuth`, as `sleuth --help` lists them (docs/cli.md too)."""


def exit_code_table() -> str:
    width = max(len(str(code)) for code in EXIT_CODES)
    return "exit codes:\n" + "\n".join(
        f"  {code:<{width}}  {meaning}" for code, meaning in EXIT_CODES.items()
    )


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: only its command's module when it names one, else every command."""
    parser = argparse.ArgumentParser(
        prog="sleuth",
        description="Durable deep-research agents on Temporal.",
        epilog=exit_code_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        return EXIT_USAGE
    from sleuth.workers.cli_connection import connection_environment
    from sleuth.workers.telemetry import configure_tracing, shutdown_tracing

    configure_tracing()
    try:
        with connection_environment(args):
            outcome = func(args)
            if inspect.isawaitable(outcome):
                outcome = asyncio.run(outcome)  # type: ignore[arg-type]
    finally:
        shutdown_tracing()
    return int(outcome or 0)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point. Exits with os._exit after flushing: temporalio can abort at interpreter
    exit. A reader that closes stdout early (`sleuth runs | head -1`) ends the command quietly
    with EXIT_BROKEN_PIPE."""
    warnings.showwarning = _show_warning
    try:
        code = run(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        code = _stdout_gone()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except Exception as exc:  # a person reads this: one line, what went wrong
        print(f"sleuth: error: {redact(str(exc))}", file=sys.stderr)
        code = EXIT_ERROR
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _stdout_gone()
    sys.stderr.flush()
    os._exit(code)


def _stdout_gone() -> int:
    """Point stdout at /dev/null, so flushing what is still buffered for the gone reader cannot
    fail again (Python's documented recipe for SIGPIPE), and say how the command ended."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


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
