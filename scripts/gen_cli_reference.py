"""Write docs/cli.md, the command-line reference, from the `sleuth` argument parser itself.

    python scripts/gen_cli_reference.py           # rewrite docs/cli.md
    python scripts/gen_cli_reference.py --check   # exit 1 if docs/cli.md is stale

tests/project/test_reference_docs.py fails when the page and the parser disagree: change a flag,
run this script, commit both.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's sleuth, whatever is installed
PAGE = ROOT / "docs" / "cli.md"
WIDTH = "100"
"""Usage lines are wrapped at this many columns whatever the terminal (argparse reads $COLUMNS)."""

HEADER = """# Command-line reference

Generated from the parser by `python scripts/gen_cli_reference.py`; do not edit by hand.
`sleuth COMMAND --help` prints the same. Settings read from the environment are in the
[settings reference](settings.md).
"""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    found: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, sub, helps.get(name, "")))
    return found


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _option_row(action: argparse.Action) -> str | None:
    if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
        return None
    if action.help == argparse.SUPPRESS:
        return None
    if action.option_strings:
        names = ", ".join(f"`{name}`" for name in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or action.dest.upper()
            names += f" `{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    else:
        names = f"`{action.metavar or action.dest}`"
    help_text = action.help or ""
    if "%(" in help_text:
        help_text = help_text % {**vars(action), "prog": "sleuth"}
    default = action.default
    shown = ""
    if (
        action.option_strings
        and action.nargs != 0
        and default not in (None, argparse.SUPPRESS, [], "")
        and "default" not in help_text
    ):
        shown = f" (default: `{default}`)"
    return f"| {names} | {_cell(help_text)}{shown} |"


def _section(path: str, parser: argparse.ArgumentParser, summary: str, depth: int) -> list[str]:
    lines = [f"{'#' * depth} `{path}`", ""]
    description = parser.description or summary
    if description:
        lines += [_cell(description), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = [row for action in parser._actions if (row := _option_row(action))]
    if rows:
        lines += ["| argument | meaning |", "| --- | --- |", *rows, ""]
    if parser.epilog:
        lines += [_cell(parser.epilog), ""]
    for name, sub, help_text in _subcommands(parser):
        lines += _section(f"{path} {name}", sub, help_text, min(depth + 1, 4))
    return lines


def render() -> str:
    """The page's text, from the parser as it is now."""
    os.environ["COLUMNS"] = WIDTH
    from sleuth.workers.cli import build_parser

    parser = build_parser([])
    lines = [HEADER, "| command | what it does |", "| --- | --- |"]
    commands = _subcommands(parser)
    lines += [
        f"| [`sleuth {name}`](#sleuth-{name}) | {_cell(help_text)} |"
        for name, _, help_text in commands
    ]
    lines += ["", "## `sleuth`", "", "```text", parser.format_usage().strip(), "```", ""]
    top = [row for action in parser._actions if (row := _option_row(action))]
    if top:
        lines += ["| argument | meaning |", "| --- | --- |", *top, ""]
    for name, sub, help_text in commands:
        lines += _section(f"sleuth {name}", sub, help_text, 2)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    from scripts.generated_page import write_or_check

    description = (__doc__ or "").splitlines()[0]
    return write_or_check(PAGE, render(), __file__, description, argv)


if __name__ == "__main__":
    sys.exit(main())
