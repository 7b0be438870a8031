"""structlog is configured once, with a console renderer for people and JSON for machines.

Each case runs in a fresh interpreter: logging configuration is process-wide and happens once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.timeouts import scaled

SCRIPT = """
import sys
from sleuth.runtime.log import configure_logging, get_logger
args = sys.argv[1:]
first = {"json": True, "console": False, "env": None}[args[0]]
configure_logging(json_format=first)
if len(args) > 1:
    configure_logging(json_format=not first)  # ignored: configuration happens once
log = get_logger("sleuth.test")
log.info("research.started", research="market-report", replans=2)
log.debug("research.detail", hidden=True)
log.warning("research.slow", seconds=12.5)
"""


def run_logging(*args: str, **env: str) -> list[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("SLEUTH_LOG")
    }
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # logs go to stderr, never mixed into command output
    return result.stderr.strip().splitlines()


def test_json_renderer_writes_one_parseable_object_per_event() -> None:
    lines = run_logging("json")
    records = [json.loads(line) for line in lines]
    assert [r["event"] for r in records] == ["research.started", "research.slow"]
    started, slow = records
    assert started["research"] == "market-report" and started["replans"] == 2
    assert started["level"] == "info" and "timestamp" in started
    assert slow["level"] == "warning" and slow["seconds"] == 12.5


def test_console_renderer_is_for_people() -> None:
    lines = run_logging("console")
    assert len(lines) == 2
    assert "research.started" in lines[0] and "research=market-report" in lines[0]
    assert "[info" in lines[0] and "[warning" in lines[1]
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[0])


def test_configuration_happens_once() -> None:
    lines = run_logging("console", "then-json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[0])


def test_environment_chooses_format_and_level() -> None:
    lines = run_logging("env", SLEUTH_LOG_FORMAT="json", SLEUTH_LOG_LEVEL="warning")
    assert [json.loads(line)["event"] for line in lines] == ["research.slow"]
    debug = run_logging("env", SLEUTH_LOG_FORMAT="json", SLEUTH_LOG_LEVEL="debug")
    assert [json.loads(line)["event"] for line in debug] == [
        "research.started",
        "research.detail",
        "research.slow",
    ]


TEMPORAL_SCRIPT = """
import logging
from sleuth.runtime.log import configure_logging
configure_logging()
logging.getLogger("temporalio.workflow").info("node execute starts")
logging.getLogger("temporalio.worker").warning("worker lost its connection")
logging.getLogger("sleuth.cli").info("sleuth's own line")
"""


@pytest.mark.parametrize(
    ("setting", "sdk_info_shown"), [(None, False), ("INFO", True)], ids=["default", "info"]
)
def test_temporal_sdk_info_lines_are_quiet_unless_asked_for(
    setting: str | None, sdk_info_shown: bool
) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("SLEUTH_")}
    if setting:
        environment["SLEUTH_TEMPORAL_LOG_LEVEL"] = setting
    result = subprocess.run(
        [sys.executable, "-c", TEMPORAL_SCRIPT],
        env=environment,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert result.returncode == 0, result.stderr
    assert ("node execute starts" in result.stderr) is sdk_info_shown
    assert "worker lost its connection" in result.stderr
    assert "sleuth's own line" in result.stderr


SWAPPED_STDERR_SCRIPT = """
import io, sys
from sleuth.runtime.log import configure_logging, get_logger
configure_logging(json_format=True)
log = get_logger("sleuth.test")
original = sys.stderr
sys.stderr = io.StringIO()
log.info("first.stream")
sys.stderr.close()  # what an output capture does when it ends
sys.stderr = original
log.info("after.swap")
"""


def test_logging_follows_a_swapped_stderr() -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("SLEUTH_")}
    result = subprocess.run(
        [sys.executable, "-c", SWAPPED_STDERR_SCRIPT],
        env=environment,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert result.returncode == 0, result.stderr
    assert "after.swap" in result.stderr
    assert "first.stream" not in result.stderr
