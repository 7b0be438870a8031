"""`tests.helpers.cli_process.run_sleuth` runs a `sleuth` command as a real subprocess would: same output,
exit code, environment, arguments, working directory and import path, forked from a zygote that
imported the command line once. Each test compares the fork with a real `python -c` subprocess."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli_process import (
    FORK_ENV,
    ROOT,
    _zygote,
    popen_sleuth,
    run_sleuth,
    sleuth_command,
)
from tests.helpers.timeouts import scaled

# An --app module that reports the process it was imported in, then exits with code 7 (or sleeps,
# or leaves a child holding standard output).
PROBE = """
import json, os, subprocess, sys, time
print(json.dumps({
    "cwd": os.getcwd(),
    "argv": sys.argv,
    "marker": os.environ.get("PROBE_MARKER"),
    "path_head": sys.path[:2],
    "tests_from": getattr(sys.modules.get("tests"), "__path__", [None])[0] if "tests" in sys.modules else None,
    "stdin": sys.stdin.read(),
    "unbuffered": sys.stdout.write_through,
    "session_leader": os.getsid(0) == os.getpid(),
}))
if not os.environ.get("PROBE_SLEEP"):  # (a sleeping probe writes one line only)
    print("to stderr", file=sys.stderr)
if os.environ.get("PROBE_PID_FILE"):
    open(os.environ["PROBE_PID_FILE"], "w").write(str(os.getpid()))
if os.environ.get("PROBE_SLEEP"):
    sys.stdout.flush()
    time.sleep(float(os.environ["PROBE_SLEEP"]))
if os.environ.get("PROBE_LATE"):
    subprocess.Popen(["sh", "-c", "sleep 0.3; echo late"])
sys.stdout.flush()
os._exit(7) if os.environ.get("PROBE_HARD_EXIT") else sys.exit(7)
"""


def both(
    args: list[str], env: dict[str, str], cwd: Path
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    forked = run_sleuth(args, env=env, cwd=cwd, timeout=scaled(60))
    real = subprocess.run(
        sleuth_command(*args),
        env=env, cwd=cwd, capture_output=True, text=True, timeout=scaled(60),
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return forked, real


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "probe_app.py").write_text(PROBE)
    return folder


def test_the_zygote_starts_here() -> None:
    """On Linux the fork path is the one the suite uses (a failed start falls back to
    subprocesses with a warning, and would make the tests below compare subprocess with itself)."""
    if sys.platform != "linux":
        pytest.skip("the zygote forks: Linux only")
    if os.environ.get(FORK_ENV) == "0":
        pytest.skip(f"{FORK_ENV}=0: every command runs as a real subprocess")
    assert _zygote() is not None


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_a_command_sees_its_own_environment_arguments_directory_and_path(
    probe_dir: Path, tmp_path: Path, unbuffered: str
) -> None:
    env = {
        **os.environ,
        "PROBE_MARKER": "seen",
        "PYTHONPATH": str(probe_dir),
        "PYTHONUNBUFFERED": unbuffered,
    }
    cwd = tmp_path  # not the checkout: `tests` must not be importable from here
    forked, real = both(["worker", "--app", "probe_app:app", "--task-queue", "q"], env, cwd)

    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )
    assert forked.returncode == 7 and "to stderr" in forked.stderr
    assert '"marker": "seen"' in forked.stdout and f'"cwd": "{tmp_path}"' in forked.stdout
    assert '"argv": ["-c", "worker", "--app", "probe_app:app"' in forked.stdout
    assert f'"path_head": ["", "{probe_dir}"]' in forked.stdout
    assert '"tests_from": null' in forked.stdout  # the zygote's own `tests` import is dropped
    assert f'"unbuffered": {"true" if unbuffered else "false"}' in forked.stdout


@pytest.mark.parametrize(
    "args",
    [["nope"], ["server", "--status"], ["worker", "--app", "no_such_module_here:app"]],
)
def test_output_and_exit_code_match_a_real_subprocess(args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "SLEUTH_HOME": str(tmp_path), "TEMPORAL_ADDRESS": "127.0.0.1:9"}
    forked, real = both(args, env, ROOT)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )


def test_output_a_child_writes_after_the_command_exits_is_waited_for(probe_dir: Path) -> None:
    """As `subprocess.run` reads its pipes to the end: a command that leaves a child holding its
    output is not done until that child is."""
    env = {**os.environ, "PYTHONPATH": str(probe_dir), "PROBE_LATE": "1", "PROBE_HARD_EXIT": "1"}
    forked, real = both(["worker", "--app", "probe_app:app"], env, ROOT)
    assert forked.stdout.endswith("late\n") and real.stdout.endswith("late\n")
    assert forked.returncode == real.returncode == 7


def test_a_command_past_its_timeout_is_killed(probe_dir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    env = {
        **os.environ,
        "PYTHONPATH": str(probe_dir),
        "PROBE_SLEEP": "600",
        "PROBE_PID_FILE": str(pid_file),
    }
    with pytest.raises(subprocess.TimeoutExpired):
        run_sleuth(["worker", "--app", "probe_app:app"], env=env, timeout=scaled(2))
    if not pid_file.exists():
        # Killed before the probe was imported: then it never is.
        time.sleep(scaled(2))
        assert not pid_file.exists()
        return
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + scaled(10)
    while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
        assert time.monotonic() < deadline, f"process {pid} outlived its timeout"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"


def _reads_environment_on_import(path: Path) -> list[str]:
    """`os.environ`/`os.getenv` used outside any function or lambda in `path`."""
    found: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            if not inside and (
                (isinstance(child, ast.Attribute) and child.attr == "environ")
                or (isinstance(child, ast.Call) and ast.unparse(child.func).endswith("getenv"))
            ):
                found.append(f"{path}:{child.lineno}: {ast.unparse(child)[:80]}")
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return found


def test_no_module_reads_the_environment_when_imported(tmp_path: Path) -> None:
    """The zygote imports before a command's environment is set: a module that read a variable
    at import would see the zygote's value in every forked command (and in a long-lived worker,
    the value at its start), so none may."""
    found = [
        line
        for package in ("sleuth", "workers", "workflows", "activities")
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in _reads_environment_on_import(path)
    ]
    assert found == []
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nHOME = os.environ.get('HOME')\ndef f():\n    return os.getenv('X')\n"
    )
    assert [line.split(": ", 1)[1] for line in _reads_environment_on_import(sample)] == [
        "os.environ"
    ]


@pytest.mark.parametrize("new_session", [False, True])
def test_a_long_lived_command_is_signalled_and_waited_for_as_a_popen_is(
    probe_dir: Path, tmp_path: Path, new_session: bool
) -> None:
    """`popen_sleuth` (the zygote's fork) against `subprocess.Popen` (a real process): the same
    first line, the same end on SIGTERM, the same session; `os.killpg` reaches a new session."""
    env = {**os.environ, "PYTHONPATH": str(probe_dir), "PROBE_SLEEP": "600"}
    args = ["worker", "--app", "probe_app:app"]
    forked = popen_sleuth(
        args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=new_session,
    )  # fmt: skip
    real = subprocess.Popen(
        sleuth_command(*args), env=env, cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=new_session,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        lines = []
        for process in (forked, real):
            assert process.stdout is not None
            lines.append(process.stdout.readline())
            assert process.poll() is None
        assert lines[0] == lines[1] and f'"session_leader": {str(new_session).lower()}' in lines[0]
        with pytest.raises(subprocess.TimeoutExpired):
            forked.wait(timeout=0.2)
        forked.send_signal(signal.SIGTERM)
        if new_session:
            os.killpg(real.pid, signal.SIGTERM)
        else:
            real.send_signal(signal.SIGTERM)
        ends = [process.communicate(timeout=scaled(30)) for process in (forked, real)]
        assert ends[0] == ends[1]
        assert forked.returncode == real.returncode == -signal.SIGTERM
    finally:
        for process in (forked, real):
            if process.poll() is None:
                process.kill()
                process.wait()
