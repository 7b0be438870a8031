"""The suite never touches the person's own things (issue 45, part 6).

Each test runs with a temporary `HOME` and `SLEUTH_HOME`. A test that unsets `SLEUTH_HOME` used to
reach the real `~/.sleuth`, and the autouse fixture then stopped the background server recorded
there: a newcomer's server died at the end of the test command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli_process import run_sleuth
from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PERSON_HOME = "SLEUTH_TEST_PERSON_HOME"
ENVIRONMENT_CLEARING_TESTS = [
    # Unsets SLEUTH_HOME and reads the default data directory.
    "tests/runtime/test_settings.py::test_defaults_without_variables",
    # Unset SLEUTH_HOME and HOME here.
    "tests/workers/test_suite_isolation.py::test_unsetting_the_homes_reaches_only_temporary_folders",
]


def test_every_test_has_a_temporary_home(tmp_path: Path, sleuth_home: Path) -> None:
    assert Path.home().is_relative_to(tmp_path)
    assert Path(os.environ["SLEUTH_HOME"]) == sleuth_home
    assert sleuth_home.is_relative_to(tmp_path)


def test_the_models_stay_findable_read_only() -> None:
    from tests.conftest import REAL_MODELS_DIR

    assert os.environ["SLEUTH_TEST_MODELS_DIR"] == str(REAL_MODELS_DIR)
    assert "SLEUTH_MODEL_DIR" not in os.environ or not Path.home().is_relative_to(
        Path(os.environ["SLEUTH_MODEL_DIR"])
    )


def test_unsetting_the_homes_reaches_only_temporary_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Run by the test below in a pytest of its own, whose `HOME` holds a live server: this test
    clears the variables, and then leaves `SLEUTH_HOME` pointing at that server's data dir, as a
    test that sets it from the person's environment would. Neither may reach the server."""
    from sleuth.workers.embedded import read_background_server

    monkeypatch.delenv("SLEUTH_HOME")
    assert read_background_server() is None, "reached the person's ~/.sleuth"
    monkeypatch.delenv("HOME")
    person = os.environ.get(PERSON_HOME)
    if person:
        monkeypatch.setenv("SLEUTH_HOME", str(Path(person) / ".sleuth"))


def _person_env(home: Path) -> dict[str, str]:
    """The person's environment: their HOME, no SLEUTH_HOME (so `~/.sleuth`)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLEUTH_")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    return {**env, "HOME": str(home), "PYTHONPATH": str(ROOT), PERSON_HOME: str(home)}


def test_the_tests_that_clear_the_environment_leave_the_persons_server_running(
    tmp_path: Path,
) -> None:
    person = tmp_path / "person"
    person.mkdir()
    env = _person_env(person)
    port = free_ports(1000)
    started = run_sleuth(
        ["server", "--background", "--port", str(port), "--in-memory"],
        env=env,
        timeout=scaled(120),
    )
    assert started.returncode == 0, started.stdout + started.stderr
    record = person / ".sleuth" / "temporal.pid"
    assert record.is_file(), "the person's server is recorded in their ~/.sleuth"
    server_pid = int(started.stdout.split("(pid ")[1].split(")")[0])
    try:
        suite = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider"]
            + ENVIRONMENT_CLEARING_TESTS,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(600),
        )
        assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-3000:]
        assert f"{len(ENVIRONMENT_CLEARING_TESTS)} passed" in suite.stdout, suite.stdout
        status = run_sleuth(["server", "--status"], env=env, timeout=scaled(60))
        assert f"running (pid {server_pid})" in status.stdout, status.stdout + status.stderr
        assert f"gRPC    localhost:{port} (answers)" in status.stdout, status.stdout
        assert record.is_file(), "the person's server record was removed"
    finally:
        run_sleuth(["server", "--stop"], env=env, timeout=scaled(120))
