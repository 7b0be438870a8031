"""The README's test set-up command and `.ci/run` stay in step."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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


def ci_array(script: str, name: str) -> list[str]:
    match = re.search(rf"^{name}=\((.*)\)$", script, re.MULTILINE)
    assert match, f"`.ci/run` must keep that command in {name}=(...)"
    return shlex.split(match.group(1))


def test_ci_installs_and_runs_exactly_the_readme_test_command() -> None:
    steps = readme_test_command()
    script = (ROOT / ".ci" / "run").read_text()
    assert len(steps) == 6, steps
    venv, activate, cmake_args, install, model_pull, run_tests = steps
    assert venv == "python -m venv .venv"
    assert activate == ". .venv/bin/activate"
    assert cmake_args.startswith("export CMAKE_ARGS=")
    assert re.search(rf"^{re.escape(cmake_args)}$", script, re.MULTILINE), (
        "`.ci/run` must build llama.cpp with the README's CMAKE_ARGS"
    )
    assert "-DGGML_NATIVE=OFF" in cmake_args
    assert ci_array(script, "TEST_INSTALL") == shlex.split(install)
    assert ci_array(script, "MODEL_PULL") == shlex.split(model_pull)
    assert run_tests == "pytest"
    assert re.search(r"^pytest --durations=15 -rs 2>&1 \| tee", script, re.MULTILINE), (
        "`.ci/run` must run plain pytest, listing the 15 slowest tests and the skip reasons"
    )


def test_ci_script_is_valid_bash_and_fails_on_errors() -> None:
    script = ROOT / ".ci" / "run"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "set -euo pipefail" in script.read_text()
    assert '"$status" -eq 5' in script.read_text()  # no tests collected is a failure


def test_readme_main_job_asks_the_demo_question() -> None:
    from sleuth.rag.demo import DEMO_QUESTION

    readme = (ROOT / "README.md").read_text()
    [main_job] = [
        line
        for block in re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
        for line in block.splitlines()
        if line.startswith("python -m venv") and "sleuth research" in line
    ]
    assert main_job.rstrip().endswith(f'sleuth research "{DEMO_QUESTION}"')
    assert not set(DEMO_QUESTION) & set('`$"\\!'), "the question must paste into a shell as is"
