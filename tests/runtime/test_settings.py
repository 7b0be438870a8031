"""Every SLEUTH_* setting lives in one validated model; the settings reference lists exactly its variables."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from sleuth.runtime.paths import sleuth_home, task_queue, web_ui_url
from sleuth.runtime.settings import (
    ENV_VARIABLES,
    SettingsError,
    SleuthSettings,
    env_name,
    load_settings,
)
from sleuth.scans.sinks import allowed_sink_dirs, configured_sink_urls
from sleuth.workers.worker import ENV_VARIABLES as WORKER_VARIABLES
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No SLEUTH_* variable but the per-test SLEUTH_HOME."""
    for name in [n for n in os.environ if n.startswith("SLEUTH_") and n != "SLEUTH_HOME"]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_without_variables(clean_env: pytest.MonkeyPatch, sleuth_home: Path) -> None:
    settings = load_settings()
    assert settings.home == sleuth_home
    assert settings.task_queue is None and task_queue() == "sleuth"
    assert settings.model == "local:qwen2.5-coder-1.5b"
    assert settings.openai_structured_output == "auto"
    assert (settings.max_concurrent_activities, settings.max_concurrent_workflow_tasks) == (16, 64)
    assert (settings.activity_threads, settings.graceful_shutdown_seconds) == (16, 30.0)
    assert settings.sticky_queue_timeout_seconds == 10.0, "the Temporal SDK's own default"
    assert settings.heartbeat_throttle_seconds == 2.0
    assert settings.sinks == {} and settings.sink_dirs == []
    assert (settings.metrics_host, settings.metrics_port) == ("127.0.0.1", None)
    clean_env.delenv("SLEUTH_HOME")
    assert load_settings().home_dir == Path.home() / ".sleuth"


def test_every_variable_is_read_when_needed_not_frozen_at_import(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    values = {
        "SLEUTH_HOME": str(tmp_path / "home"),
        "SLEUTH_ARTIFACTS": str(tmp_path / "artifacts"),
        "SLEUTH_TASK_QUEUE": "gpu-pool",
        "SLEUTH_EMBEDDED_ADDRESS": "localhost:17233",
        "SLEUTH_WEB_UI": "https://temporal.example.com",
        "SLEUTH_LOG_FORMAT": "JSON",
        "SLEUTH_LOG_LEVEL": "debug",
        "SLEUTH_TEMPORAL_LOG_LEVEL": "info",
        "SLEUTH_MODEL": "openai:gpt-4o-mini",
        "SLEUTH_MODEL_DIR": str(tmp_path / "models"),
        "SLEUTH_LOCAL_THREADS": "2",
        "SLEUTH_OPENAI_STRUCTURED_OUTPUT": "json_object",
        "SLEUTH_MODEL_TIMEOUT_SECONDS": "180",
        "SLEUTH_SINKS": f"audit=jsonl://{tmp_path}/home/a.jsonl, search=opensearch://s:9200/rows",
        "SLEUTH_SINK_DIRS": f"{tmp_path}/exports{os.pathsep}{tmp_path}/more",
        "SLEUTH_ENCRYPTION_KEY": "a2V5",
        "SLEUTH_ENCRYPTION_KEY_FILE": str(tmp_path / "key"),
        "SLEUTH_MAX_CONCURRENT_ACTIVITIES": "4",
        "SLEUTH_MAX_CONCURRENT_WORKFLOW_TASKS": " 8 ",
        "SLEUTH_ACTIVITY_THREADS": "2",
        "SLEUTH_GRACEFUL_SHUTDOWN_SECONDS": "90.5",
        "SLEUTH_STICKY_QUEUE_TIMEOUT_SECONDS": "2.5",
        "SLEUTH_HEARTBEAT_THROTTLE_SECONDS": "0.5",
        "SLEUTH_PRICES": str(tmp_path / "prices.toml"),
        "SLEUTH_METRICS_PORT": "9464",
        "SLEUTH_METRICS_HOST": "0.0.0.0",
        "SLEUTH_PAYLOAD_OFFLOAD": "false",
        "SLEUTH_PAYLOAD_OFFLOAD_BYTES": "65536",
        "SLEUTH_MAX_PAYLOAD_BYTES": "8388608",
        "SLEUTH_WORKSPACE_MAX_BYTES": "1000",
        "SLEUTH_WORKSPACE_MAX_FILES": "10",
        "SLEUTH_WORKSPACE_MAX_DEPTH": "4",
        "SLEUTH_WORKSPACE_MAX_PATH_CHARS": "64",
        "SLEUTH_SERVE_TOKEN": "t" * 32,
        "SLEUTH_SERVE_TOKEN_FILE": str(tmp_path / "token"),
        "SLEUTH_SERVE_ALLOWED_HOSTS": "sleuth.example.com, 10.0.0.5",
        "SLEUTH_SERVE_MAX_BODY_BYTES": "65536",
        "SLEUTH_SERVE_CORS_ORIGINS": "https://app.example.com",
        "SLEUTH_SERVE_SSE_PING_SECONDS": "5",
        "SLEUTH_MAX_ACTIVITIES_PER_SECOND": "2.5",
        "SLEUTH_MAX_TASK_QUEUE_ACTIVITIES_PER_SECOND": "20",
        "SLEUTH_WORKER_VERSIONING": "true",
        "SLEUTH_DEPLOYMENT_NAME": "research-fleet",
        "SLEUTH_BUILD_ID": "2f9c1e0",
        "SLEUTH_VERSIONING_BEHAVIOR": "Auto_Upgrade",
    }
    assert set(values) == set(ENV_VARIABLES), "this test sets every variable the model has"
    load_settings()  # a cached value must not hide the variables set below
    for name, value in values.items():
        clean_env.setenv(name, value)
    settings = load_settings()
    assert settings.home == tmp_path / "home" and sleuth_home() == tmp_path / "home"
    assert settings.artifacts == tmp_path / "artifacts"
    assert settings.task_queue == "gpu-pool" and task_queue() == "gpu-pool"
    assert settings.embedded_address == "localhost:17233"
    assert web_ui_url() == "https://temporal.example.com"
    assert (settings.log_format, settings.log_level, settings.temporal_log_level) == (
        "json",
        "DEBUG",
        "INFO",
    )
    assert settings.model == "openai:gpt-4o-mini" and settings.model_dir == tmp_path / "models"
    assert settings.local_threads == 2 and settings.openai_structured_output == "json_object"
    assert settings.model_timeout_seconds == 180.0
    assert configured_sink_urls() == {
        "audit": f"jsonl://{tmp_path}/home/a.jsonl",
        "search": "opensearch://s:9200/rows",
    }
    assert allowed_sink_dirs()[1:] == [tmp_path / "exports", tmp_path / "more"]
    assert settings.encryption_key is not None
    assert settings.encryption_key.get_secret_value() == "a2V5"
    assert settings.encryption_key_file == tmp_path / "key"
    assert (settings.max_concurrent_activities, settings.max_concurrent_workflow_tasks) == (4, 8)
    assert (settings.activity_threads, settings.graceful_shutdown_seconds) == (2, 90.5)
    assert settings.sticky_queue_timeout_seconds == 2.5
    assert settings.heartbeat_throttle_seconds == 0.5
    assert (settings.metrics_host, settings.metrics_port) == ("0.0.0.0", 9464)
    assert settings.prices == tmp_path / "prices.toml"
    assert (settings.payload_offload, settings.payload_offload_bytes) == (False, 65536)
    assert settings.max_payload_bytes == 8388608
    assert (settings.workspace_max_bytes, settings.workspace_max_files) == (1000, 10)
    assert (settings.workspace_max_depth, settings.workspace_max_path_chars) == (4, 64)
    assert settings.serve_token is not None and settings.serve_token.get_secret_value() == "t" * 32
    assert settings.serve_token_file == tmp_path / "token"
    assert settings.serve_allowed_hosts == ["sleuth.example.com", "10.0.0.5"]
    assert (settings.serve_max_body_bytes, settings.serve_sse_ping_seconds) == (65536, 5.0)
    assert settings.serve_cors_origins == ["https://app.example.com"]
    assert settings.max_activities_per_second == 2.5
    assert settings.max_task_queue_activities_per_second == 20.0
    assert settings.worker_versioning and settings.versioned
    assert (settings.deployment_name, settings.build_id) == ("research-fleet", "2f9c1e0")
    assert settings.versioning_behavior == "auto_upgrade"

    clean_env.setenv("SLEUTH_TASK_QUEUE", "cpu-pool")
    assert load_settings().task_queue == "cpu-pool"
    clean_env.setenv("SLEUTH_TASK_QUEUE", "")
    assert load_settings().task_queue is None, "an empty variable counts as unset"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SLEUTH_MAX_CONCURRENT_ACTIVITIES", "abc", "expected a whole number greater than 0"),
        ("SLEUTH_ACTIVITY_THREADS", "2.5", "expected a whole number greater than 0"),
        ("SLEUTH_MAX_CONCURRENT_WORKFLOW_TASKS", "0", "greater than 0"),
        ("SLEUTH_GRACEFUL_SHUTDOWN_SECONDS", "soon", "expected a number greater than 0"),
        ("SLEUTH_LOCAL_THREADS", "-1", "expected a whole number greater than 0"),
        ("SLEUTH_LOG_FORMAT", "xml", "expected one of: console, json"),
        ("SLEUTH_LOG_LEVEL", "loud", "expected one of: DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ("SLEUTH_OPENAI_STRUCTURED_OUTPUT", "grammar", "one of: auto, json_schema"),
        ("SLEUTH_SINKS", "audit", "must look like name=URL"),
        ("SLEUTH_METRICS_PORT", "99999", "expected a whole number from 1 to 65535"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_expected_form(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=rf"^{variable}='{re.escape(value)}' is not valid"):
        load_settings()
    with pytest.raises(ValueError, match=message):
        load_settings()


def test_a_bad_value_does_not_echo_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_SINKS", "search=opensearchs://admin:hunter2@search:9200/rows,bad")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "hunter2" not in str(caught.value) and "SLEUTH_SINKS=" in str(caught.value)


def test_commands_check_the_settings_before_they_start(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLEUTH_MAX_CONCURRENT_ACTIVITIES": "abc",
        # Nothing may be started or reached: the settings stop the command first.
        "TEMPORAL_ADDRESS": "localhost:1",
    }
    result = run_sleuth(["worker"], env=env, timeout=scaled(120))
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "sleuth: error: SLEUTH_MAX_CONCURRENT_ACTIVITIES='abc' is not valid (Input should be a "
        "valid integer, unable to parse string as an integer); expected a whole number greater "
        "than 0"
    )


def test_worker_variables_are_settings_fields() -> None:
    assert set(WORKER_VARIABLES) == {
        "SLEUTH_MAX_CONCURRENT_ACTIVITIES",
        "SLEUTH_MAX_CONCURRENT_WORKFLOW_TASKS",
        "SLEUTH_ACTIVITY_THREADS",
        "SLEUTH_GRACEFUL_SHUTDOWN_SECONDS",
    }
    assert set(WORKER_VARIABLES) <= set(ENV_VARIABLES)


def setting_rows(page: Path) -> dict[str, list[str]]:
    """`{variable: cells}` for each SLEUTH_* row of the `| variable | ... |` tables of a docs page."""
    rows: dict[str, list[str]] = {}
    in_table = False
    for line in page.read_text().splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] == "variable":
            in_table = True
            continue
        if in_table:
            for variable in re.findall(r"`(SLEUTH_[A-Z_]+)`", cells[0]):
                assert variable not in rows, f"{variable} is listed twice in {page.name}"
                rows[variable] = cells
    return rows


def documented_default(field_default: Any) -> str | None:
    """How a page shows a plain default (None for the ones it describes in words)."""
    if isinstance(field_default, bool) or not isinstance(field_default, int | float | str):
        return None
    return f"{field_default:g}" if isinstance(field_default, float) else str(field_default)


def test_the_settings_reference_lists_every_setting_with_its_default() -> None:
    rows = setting_rows(ROOT / "docs" / "settings.md")
    assert set(rows) == set(ENV_VARIABLES)
    for name, field in SleuthSettings.model_fields.items():
        shown = documented_default(field.default)
        if shown is not None:
            assert f"`{shown}`" in rows[env_name(name)][1], (
                f"docs/settings.md's default for {env_name(name)} must be {shown}"
            )


@pytest.mark.parametrize("page", ["scale-out.md", "operations.md", "security.md", "deploy.md"])
def test_other_pages_setting_tables_agree_with_the_model(page: str) -> None:
    """Pages that show a few settings beside their topic show real ones, with their defaults."""
    defaults = {
        env_name(name): field.default for name, field in SleuthSettings.model_fields.items()
    }
    for variable, cells in setting_rows(ROOT / "docs" / page).items():
        assert variable in defaults, f"docs/{page} lists {variable}, which is no setting"
        shown = documented_default(defaults[variable])
        if shown is not None and len(cells) > 2:
            assert shown in cells[1], f"docs/{page}'s default for {variable} must be {shown}"
