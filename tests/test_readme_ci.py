"""The README's test set-up command and `.ci/run` stay in step."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_test_command() -> list[str]:
    """The steps of the README's test set-up command (the fenced line that ends in pytest)."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    commands = [
        line
        for block in blocks
        for line in block.splitlines()
        if line.startswith("python -m venv") and line.rstrip().endswith("pytest")
    ]
    assert len(commands) == 1, commands
    return [step.strip() for step in commands[0].split("&&")]


def test_ci_installs_and_runs_exactly_the_readme_test_command() -> None:
    steps = readme_test_command()
    assert steps[0] == "python -m venv .venv"
    assert steps[1] == ". .venv/bin/activate"
    assert steps[-1] == "pytest"
    [install] = [step for step in steps if step.startswith("pip install")]
    script = (ROOT / ".ci" / "run").read_text()
    match = re.search(r"^TEST_INSTALL=\((.*)\)$", script, re.MULTILINE)
    assert match, "`.ci/run` must keep its install command in TEST_INSTALL=(...)"
    assert shlex.split(match.group(1)) == shlex.split(install)
    assert re.search(r"^pytest 2>&1 \| tee", script, re.MULTILINE), (
        "`.ci/run` must run plain pytest"
    )


def test_ci_script_is_valid_bash_and_fails_on_errors() -> None:
    script = ROOT / ".ci" / "run"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "set -euo pipefail" in script.read_text()
    assert '"$status" -eq 5' in script.read_text()  # no tests collected is a failure
