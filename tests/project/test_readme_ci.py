"""The documented test set-up command and `.ci/run` stay in step, wherever the command lives
(the README today; CONTRIBUTING.md or a docs page if it moves)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def documentation_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_test_command() -> list[str]:
    """The steps of the documented test set-up command (the fenced line that ends in pytest),
    found in whichever page holds it: exactly one page may."""
    commands = [
        line
        for page in documentation_pages()
        if page.exists()
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.DOTALL)
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
    assert ci_array(script, "RUN_TESTS") == shlex.split(run_tests) == ["pytest"]
    assert re.search(r'^"\$\{RUN_TESTS\[@\]\}" 2>&1 \| tee', script, re.MULTILINE), (
        "`.ci/run` must run the documented test command"
    )


def test_the_test_command_lists_the_slowest_tests_and_skip_reasons() -> None:
    """Plain `pytest` prints what CI needs to see: pyproject's addopts ask for it."""
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = shlex.split(options["addopts"])
    assert "--durations=15" in addopts and "-rs" in addopts


def test_ci_builds_the_docs_site_strictly_between_mypy_and_pytest() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    mypy = script.index('mypy "${TYPED_PATHS[@]}"')
    mkdocs = script.index("mkdocs build --strict")
    pytest_run = script.index('"${RUN_TESTS[@]}" 2>&1')
    assert mypy < mkdocs < pytest_run


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
