"""The CLI core: `sleuth --help`, the session helper every command opens, and `sleuth worker`."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

import sleuth.workers.session
import sleuth.workflows
from sleuth.apps.app import App, load_app
from sleuth.runtime.paths import web_ui_url, workflow_link
from sleuth.workers.cli import COMMAND_MODULES, COMMANDS, build_parser
from sleuth.workers.cli_research import run_research_command
from sleuth.workers.session import open_session, workflow_pollers
from sleuth.workers.worker import build_worker
from tests.helpers.apps.ping_app import PingWorkflow
from tests.helpers.cli_process import popen_sleuth, run_sleuth
from tests.helpers.timeouts import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONUNBUFFERED": "1", **extra}


def dev_address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


@pytest.fixture
def ping_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers built in this process also serve PingWorkflow (the test app's workflow)."""
    monkeypatch.setattr(
        sleuth.workflows, "ALL_WORKFLOWS", [*sleuth.workflows.ALL_WORKFLOWS, PingWorkflow]
    )


def test_sleuth_help_lists_every_command() -> None:
    result = run_sleuth(["--help"], env=cli_env())
    assert result.returncode == 0, result.stderr
    assert {"sleuth.workers.cli_server", "sleuth.workers.cli_worker"} <= set(COMMAND_MODULES)
    subparsers = next(action for action in build_parser()._actions if action.dest == "command")
    commands = set(subparsers.choices)  # type: ignore[arg-type]
    assert {"server", "worker"} <= commands
    for command in commands:
        assert f"    {command} " in result.stdout or f"    {command}\n" in result.stdout


async def test_session_runs_a_worker_only_when_none_polls(
    dev_env: WorkflowEnvironment, ping_registered: None, capfd: pytest.CaptureFixture[str]
) -> None:
    task_queue = str(uuid.uuid4())
    address = dev_address(dev_env)
    async with open_session(
        "tests.helpers.apps.ping_app:app", task_queue=task_queue, address=address
    ) as first:
        assert first.started_worker
        assert first.task_queue == task_queue
        assert first.app.name == "ping"
        assert f"no worker polls task queue {task_queue!r}" in capfd.readouterr().err
        result = await first.client.execute_workflow(
            PingWorkflow.run, "hello", id=f"ping-{uuid.uuid4()}", task_queue=task_queue
        )
        assert result == "pong: hello"

        async with open_session(
            "tests.helpers.apps.ping_app:app", task_queue=task_queue, address=address
        ) as second:
            assert not second.started_worker
            assert "no worker polls" not in capfd.readouterr().err


async def test_session_without_a_worker_uses_the_app_queue_and_starts_nothing(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLEUTH_TASK_QUEUE", raising=False)
    async with open_session(
        "tests.helpers.apps.ping_app:app", need_worker=False, address=dev_address(dev_env)
    ) as session:
        assert not session.started_worker
        assert session.task_queue == "sleuth-ping"
    monkeypatch.setenv("SLEUTH_TASK_QUEUE", "from-env")
    async with open_session(None, need_worker=False, address=dev_address(dev_env)) as session:
        assert session.task_queue == "from-env"


class StartCounter:
    """Counts `Client.connect` calls and App loads made through the session."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.connections = 0
        self.app_loads: list[str | App | None] = []
        connect = Client.connect.__func__  # type: ignore[attr-defined]

        async def counting_connect(cls: type[Client], *args: object, **kwargs: object) -> Client:
            self.connections += 1
            return await connect(cls, *args, **kwargs)  # type: ignore[no-any-return]

        def counting_load(target: str | App | None = None) -> App:
            self.app_loads.append(target)
            return load_app(target)

        monkeypatch.setattr(Client, "connect", classmethod(counting_connect))
        monkeypatch.setattr(sleuth.workers.session, "load_app", counting_load)


async def test_a_command_connects_once_and_loads_no_app_when_a_worker_serves_the_queue(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, ping_registered: None
) -> None:
    task_queue = str(uuid.uuid4())
    address = dev_address(dev_env)
    async with build_worker(
        dev_env.client, load_app("tests.helpers.apps.ping_app:app"), task_queue=task_queue
    ):
        deadline = time.monotonic() + scaled(60)
        while await workflow_pollers(dev_env.client, task_queue) == 0:
            assert time.monotonic() < deadline, "the worker never polled its task queue"
            await asyncio.sleep(0.1)
        counter = StartCounter(monkeypatch)
        async with open_session(
            "tests.helpers.apps.ping_app:app", task_queue=task_queue, address=address
        ) as session:
            assert not session.started_worker
            result = await session.client.execute_workflow(
                PingWorkflow.run, "served", id=f"ping-{uuid.uuid4()}", task_queue=task_queue
            )
        assert result == "pong: served"
        assert (counter.connections, counter.app_loads) == (1, [])

        # The demo app's queue is known without building it either.
        monkeypatch.setenv("SLEUTH_TASK_QUEUE", task_queue)
        async with open_session(None, address=address) as session:
            assert not session.started_worker and session.task_queue == task_queue
        assert (counter.connections, counter.app_loads) == (2, [])


async def test_a_command_loads_the_app_once_to_run_a_worker_on_its_one_connection(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch, ping_registered: None
) -> None:
    counter = StartCounter(monkeypatch)
    task_queue = str(uuid.uuid4())
    async with open_session(
        "tests.helpers.apps.ping_app:app", task_queue=task_queue, address=dev_address(dev_env)
    ) as session:
        assert session.started_worker
        result = await session.client.execute_workflow(
            PingWorkflow.run, "in-process", id=f"ping-{uuid.uuid4()}", task_queue=task_queue
        )
    assert result == "pong: in-process"
    assert (counter.connections, counter.app_loads) == (1, ["tests.helpers.apps.ping_app:app"])


async def test_an_app_without_a_given_queue_is_loaded_to_read_its_queue(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLEUTH_TASK_QUEUE", raising=False)
    counter = StartCounter(monkeypatch)
    async with open_session(
        "tests.helpers.apps.ping_app:app", need_worker=False, address=dev_address(dev_env)
    ) as session:
        assert session.task_queue == "sleuth-ping"
    assert (counter.connections, counter.app_loads) == (1, ["tests.helpers.apps.ping_app:app"])


async def test_sleuth_research_no_wait_connects_once_and_loads_no_app(
    dev_env: WorkflowEnvironment,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev_address(dev_env))
    counter = StartCounter(monkeypatch)
    task_queue = str(uuid.uuid4())
    args = build_parser().parse_args(
        [
            "research",
            "q?",
            "--no-wait",
            "--task-queue",
            task_queue,
            "--app",
            "tests.helpers.apps.ping_app:app",
        ]
    )
    assert await run_research_command(args) == 0
    printed = capsys.readouterr()
    assert "started" in printed.out + printed.err
    assert (counter.connections, counter.app_loads) == (1, [])


async def test_sleuth_worker_polls_until_sigterm_then_stops_cleanly(
    dev_env: WorkflowEnvironment,
) -> None:
    task_queue = str(uuid.uuid4())
    process = popen_sleuth(
        ["worker", "--app", "tests.helpers.apps.ping_app:app", "--task-queue", task_queue],
        env=cli_env(TEMPORAL_ADDRESS=dev_address(dev_env)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + scaled(60)
        while await workflow_pollers(dev_env.client, task_queue) == 0:
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the worker never polled its task queue"
            await asyncio.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=scaled(60))
        # The server still lists the stopped worker's poller, but its process is gone: the next
        # command must start its own worker rather than wait for this one.
        assert await workflow_pollers(dev_env.client, task_queue) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    assert f"on task queue {task_queue!r}" in output
    assert "registers no research configs" in output
    assert "sleuth worker: stopped." in output


def test_sleuth_worker_config_names_the_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "agents.yaml"
    result = run_sleuth(
        ["worker", "--app", "tests.helpers.apps.ping_app:app", "--config", str(missing)],
        env=cli_env(),
        timeout=scaled(60),
    )
    assert result.returncode == 1
    assert f"--config {missing}" in result.stderr


def test_sleuth_worker_with_a_bad_app_says_what_to_fix() -> None:
    result = run_sleuth(
        ["worker", "--app", "no_such_module_here:app"], env=cli_env(), timeout=scaled(60)
    )
    assert result.returncode == 1
    assert "cannot import 'no_such_module_here'" in result.stderr


def test_web_ui_links_follow_a_local_temporal_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLEUTH_WEB_UI", raising=False)
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    assert web_ui_url() == "http://localhost:8233"
    monkeypatch.setenv("TEMPORAL_ADDRESS", "localhost:17233")
    assert workflow_link("wf-1") == "http://localhost:18233/namespaces/default/workflows/wf-1"
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal.internal:7233")
    assert web_ui_url() == "http://localhost:8233"
    monkeypatch.setenv("SLEUTH_WEB_UI", "https://temporal.example.com")
    assert web_ui_url() == "https://temporal.example.com"


def test_a_command_imports_only_what_it_uses() -> None:
    """Every `sleuth` command starts a Python process. A command line imports only its command's
    module, `workflows` and `activities` load their modules on first use, and a client with
    SleuthPlugin reads the workflow classes only when a worker is built: `sleuth server --status`
    costs 0.76-0.85 s of CPU here instead of 1.42-1.62 s, `sleuth doctor --json` 1.05-1.23 s
    instead of 1.84-1.88 s (CHANGELOG.md)."""
    probe = (
        "import sys\n"
        "def loaded(*roots):\n"
        "    return sorted(m for m in sys.modules if '.'.join(m.split('.')[:2]) in roots)\n"
        "import sleuth.workers.cli\n"
        "print('cli:', *loaded('sleuth.workflows', 'sleuth.activities'), 'temporalio.client' in sys.modules)\n"
        "sleuth.workers.cli.build_parser(['server', '--status'])\n"
        "print('server:', *[m for m in loaded('sleuth.workers') if m.startswith('sleuth.workers.cli_')])\n"
        "import sleuth.workers.plugin\n"
        "sleuth.workers.plugin.SleuthPlugin(lambda: None)\n"
        "heavy = ['sleuth.workflows.research', 'sleuth.workflows.scan', 'sleuth.activities.research', 'sleuth.agent.loop']\n"
        "print('plugin:', *[m for m in heavy if m in sys.modules])\n"
        "from sleuth.workflows import ALL_WORKFLOWS, ResearchWorkflow\n"
        "assert ResearchWorkflow in ALL_WORKFLOWS and len(ALL_WORKFLOWS) == 5, ALL_WORKFLOWS\n"
        "sleuth.workers.cli.build_parser([])\n"
        "print('all:', len([m for m in loaded('sleuth.workers') if m.startswith('sleuth.workers.cli_')]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=True,
    )
    assert result.stdout.splitlines() == [
        "cli: False",
        "server: sleuth.workers.cli_server",
        "plugin:",
        # and sleuth.workers.cli_events, which two of them use, and cli_connection (the
        # connection flags) most of them use
        f"all: {len(COMMAND_MODULES) + 2}",
    ]


def test_every_command_is_listed_with_the_module_that_registers_it() -> None:
    """COMMANDS maps each command to its module: a command the map lacks could not be run, and
    one its module does not register would import that module for nothing."""
    registered_by: dict[str, str] = {}
    for module_name in COMMAND_MODULES:
        registered = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module_name).register(registered)
        registered_by |= dict.fromkeys(registered.choices, module_name)
    assert registered_by == COMMANDS
    assert build_parser(["rows", "x"]).parse_args(["rows", "x"]).func
    with pytest.raises(SystemExit):
        build_parser(["nonsense"]).parse_args(["nonsense"])
