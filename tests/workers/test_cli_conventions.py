"""The command line's conventions, checked on every command the parser has: the `temporal`
CLI's connection flags where a command talks to Temporal, `--json` where its output is data,
`--version`, `python -m sleuth`, a quiet broken pipe and the documented exit codes.

The walk covers every (sub)command `build_parser()` builds; a command missing from the tables
below fails the test until someone decides which rules it falls under."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

import sleuth
from sleuth.workers import cli
from sleuth.workers.cli_connection import CONNECTION_FLAGS, connection_environment
from sleuth.workers.client import connect_config
from tests.helpers.cli_process import run_sleuth, sleuth_command

ROOT = Path(__file__).resolve().parents[2]

TALKS_TO_TEMPORAL = {
    "worker", "research", "report", "scan", "run", "agent", "serve", "setup", "review", "runs",
    "doctor", "schedule create", "schedule list", "schedule describe", "schedule pause",
    "schedule unpause", "schedule trigger", "schedule delete",
}  # fmt: skip
"""Commands that connect to a Temporal server: each takes the five connection flags."""
NO_TEMPORAL = {
    "server": "runs the embedded dev server itself (--port picks where), connects to no other",
    "models": "local model files only",
    "models pull": "local model files only",
    "ingest": "writes a retrieval store; no workflow",
    "rows": "reads a row sink; no workflow",
    "codec-server": "decodes payloads for the Web UI; the Web UI connects to it",
}
DATA_OUTPUT = {
    "server", "models", "ingest", "research", "report", "scan", "rows", "schedule create",
    "schedule list", "schedule describe", "run", "agent", "review", "runs", "doctor",
}  # fmt: skip
"""Commands whose output is data: each takes --json (`report` writes -o FILE.json)."""
NOT_DATA = {
    "worker": "a long-running service; its output is a log",
    "serve": "a long-running HTTP service",
    "codec-server": "a long-running HTTP service",
    "setup": "an action; prints what it registered",
    "models pull": "an action; prints where the file went",
    "schedule pause": "an action with a one-line confirmation",
    "schedule unpause": "an action with a one-line confirmation",
    "schedule trigger": "an action with a one-line confirmation",
    "schedule delete": "an action with a one-line confirmation",
}
JSON_BY_OUTPUT_FILE = {"report"}
"""Data commands whose JSON is chosen by the output file's extension (`-o report.json`)."""


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command: a parser that runs something (`func`), with its name as typed."""
    if parser.get_default("func") is not None:
        yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*path, name))


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


ALL_COMMANDS = dict(commands(cli.build_parser()))


def test_every_command_is_classified() -> None:
    names = set(ALL_COMMANDS)
    assert names, "the parser has no commands"
    unclassified_temporal = names - TALKS_TO_TEMPORAL - set(NO_TEMPORAL)
    unclassified_output = names - DATA_OUTPUT - set(NOT_DATA)
    assert not unclassified_temporal, (
        f"decide whether {sorted(unclassified_temporal)} talk to Temporal (then give them "
        "add_connection_arguments or add_session_arguments) and add them to this test's tables"
    )
    assert not unclassified_output, (
        f"decide whether the output of {sorted(unclassified_output)} is data (then give them "
        "--json) and add them to this test's tables"
    )
    assert not (TALKS_TO_TEMPORAL | DATA_OUTPUT | set(NO_TEMPORAL) | set(NOT_DATA)) - names, (
        "the tables name commands the parser no longer has"
    )


@pytest.mark.parametrize("name", sorted(TALKS_TO_TEMPORAL))
def test_a_command_that_talks_to_temporal_takes_the_temporal_cli_connection_flags(
    name: str,
) -> None:
    missing = set(CONNECTION_FLAGS) - options(ALL_COMMANDS[name])
    assert not missing, f"sleuth {name} lacks {sorted(missing)}: use add_connection_arguments"
    assert "--no-tls" in options(ALL_COMMANDS[name])


@pytest.mark.parametrize("name", sorted(NO_TEMPORAL))
def test_a_command_said_not_to_talk_to_temporal_does_not_connect(name: str) -> None:
    source = inspect.getsource(ALL_COMMANDS[name].get_default("func"))
    found = [word for word in ("open_session", "connect_temporal", "connect(") if word in source]
    assert not found, f"sleuth {name} connects to Temporal ({found}): move it to TALKS_TO_TEMPORAL"


@pytest.mark.parametrize("name", sorted(DATA_OUTPUT))
def test_a_command_whose_output_is_data_takes_json(name: str) -> None:
    flag = "--output" if name in JSON_BY_OUTPUT_FILE else "--json"
    assert flag in options(ALL_COMMANDS[name]), f"sleuth {name} lacks {flag}"


def test_the_connection_flags_replace_their_variables_while_the_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "temporal.toml"
    config_file.write_text(
        '[profile.cloud]\naddress = "cloud.example.com:7233"\nnamespace = "cloud-ns"\n'
    )
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(config_file))
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "from-variable")
    parser = ALL_COMMANDS["runs"]
    args = parser.parse_args(["--profile", "cloud", "--api-key", "secret-key", "--tls"])
    with connection_environment(args):
        config = connect_config()
    # The profile gives the address; the variable beats the profile's namespace; the API key
    # and --tls reach the connection.
    assert config["target_host"] == "cloud.example.com:7233"
    assert config["namespace"] == "from-variable"
    assert config["api_key"] == "secret-key" and config["tls"]
    args = parser.parse_args(["--profile", "cloud", "--namespace", "flag-ns", "--address", "h:1"])
    with connection_environment(args):
        config = connect_config()
    assert (config["target_host"], config["namespace"]) == ("h:1", "flag-ns")
    # Afterwards the environment is as it was.
    assert os.environ["TEMPORAL_NAMESPACE"] == "from-variable"
    assert "TEMPORAL_PROFILE" not in os.environ and "TEMPORAL_API_KEY" not in os.environ
    args = parser.parse_args(["--no-tls"])
    with connection_environment(args):
        assert os.environ["TEMPORAL_TLS"] == "false"


def test_address_and_namespace_flags_reach_the_server(dev_env: WorkflowEnvironment) -> None:
    address = dev_env.client.service_client.config.target_host
    # The variable names a dead address; the flag wins.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEMPORAL_ADDRESS": "127.0.0.1:9"}
    result = run_sleuth(["runs", "--json", "--address", address], env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("[")
    namespace = f"no-such-{uuid.uuid4().hex[:6]}"
    result = run_sleuth(["runs", "--address", address, "--namespace", namespace], env=env)
    assert result.returncode == 1 and namespace in result.stderr, result.stderr


def test_version_is_sleuths_one_version_and_python_m_sleuth_is_the_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "sleuth", "--version"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"sleuth {sleuth.__version__}"
    assert run_sleuth(["--version"], env=env).stdout.strip() == f"sleuth {sleuth.__version__}"


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """`sleuth models | head -1`, made deterministic: the reading end is closed before the
    command writes anything."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            sleuth_command("models"),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == cli.EXIT_BROKEN_PIPE == 141


def test_the_exit_codes_are_documented_in_the_help_and_the_docs() -> None:
    result = run_sleuth(["--help"], env={**os.environ, "PYTHONPATH": str(ROOT)})
    docs = (ROOT / "docs" / "cli-conventions.md").read_text()
    for code in cli.EXIT_CODES:
        assert f"\n  {code} " in result.stdout, code
        assert f"| {code} |" in docs, f"docs/cli-conventions.md lacks exit code {code}"
    research = importlib.import_module("sleuth.workers.cli_research")
    assert research.EXIT_UNGROUNDED == cli.EXIT_UNGROUNDED


def test_json_output_is_json_alone_on_stdout(tmp_path: Path, dev_env: WorkflowEnvironment) -> None:
    """The data commands this issue gave --json print one JSON document and nothing else."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "crm.md").write_text("The CRM market grew 12 percent in 2024.\n")
    address = dev_env.client.service_client.config.target_host
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    models = json.loads(run_sleuth(["models", "--json"], env=env).stdout)
    assert {model["name"] for model in models["models"]} >= {"qwen2.5-coder-0.5b"}
    status = json.loads(run_sleuth(["server", "--status", "--json"], env=env).stdout)
    assert status["running"] is False and "address" in status
    ingested = run_sleuth(["ingest", str(notes), "--store", "notes", "--json"], env=env)
    assert ingested.returncode == 0, ingested.stderr
    document = json.loads(ingested.stdout)
    assert document["counts"]["added"] == 1 and document["files"][0]["chunks"] >= 1
    schedules = run_sleuth(["schedule", "list", "--json", "--address", address], env=env)
    assert schedules.returncode == 0, schedules.stderr
    assert isinstance(json.loads(schedules.stdout), list)
