"""`sleuth doctor`: check the install and say what to fix (see `workers/doctor.py`)."""

from __future__ import annotations

import argparse
import json

from sleuth.workers.cli_connection import add_connection_arguments
from sleuth.workers.doctor import Finding, run_checks

_LABELS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check the install (Python, llama.cpp, model, Temporal, folders, settings)",
        description=(
            "Check Python, the llama.cpp build against this CPU, the default model, Temporal's "
            "address and the embedded server's ports, Sleuth's folders, and the SLEUTH_* and "
            "TEMPORAL_* settings in force (secrets hidden). Each problem comes with what to do. "
            "Exits 1 when something is broken."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    add_connection_arguments(parser)
    # Bad SLEUTH_* values are one of the things the doctor reports, so they must not stop it.
    parser.set_defaults(func=run_doctor_command, reports_bad_settings=True)


async def run_doctor_command(args: argparse.Namespace) -> int:
    findings = await run_checks()
    broken = [finding for finding in findings if finding.status == "fail"]
    if args.json:
        print(
            json.dumps(
                {"ok": not broken, "findings": [finding.as_dict() for finding in findings]},
                indent=2,
            )
        )
    else:
        print(render(findings))
    return 1 if broken else 0


def render(findings: list[Finding]) -> str:
    width = max(len(finding.check) for finding in findings)
    lines = []
    for finding in findings:
        lines.append(f"{_LABELS[finding.status]}  {finding.check.ljust(width)}  {finding.message}")
        if finding.fix:
            lines.append(f"{' ' * (6 + width)}  fix: {finding.fix}")
    problems = sum(finding.status == "fail" for finding in findings)
    warnings = sum(finding.status == "warn" for finding in findings)
    lines.append("")
    if problems:
        lines.append(f"{problems} problem(s) to fix, {warnings} warning(s).")
    else:
        lines.append(f"Nothing broken ({warnings} warning(s)).")
    return "\n".join(lines)
