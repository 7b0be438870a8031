"""Worker settings and Temporal connection security read from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig
from temporalio.testing import WorkflowEnvironment

from workers.client import ConnectionSecurity, ConnectionSettingsError, connect
from workers.worker import ENV_VARIABLES, WorkerSettings


def test_worker_settings_defaults_without_variables() -> None:
    assert WorkerSettings.from_env({}) == WorkerSettings()


def test_worker_settings_overrides() -> None:
    settings = WorkerSettings.from_env(
        {
            "SLEUTH_MAX_CONCURRENT_ACTIVITIES": "4",
            "SLEUTH_MAX_CONCURRENT_WORKFLOW_TASKS": " 8 ",
            "SLEUTH_ACTIVITY_THREADS": "2",
            "SLEUTH_GRACEFUL_SHUTDOWN_SECONDS": "90.5",
            "SLEUTH_UNRELATED": "x",
        }
    )
    assert settings == WorkerSettings(
        max_concurrent_activities=4,
        max_concurrent_workflow_tasks=8,
        activity_threads=2,
        graceful_shutdown_seconds=90.5,
    )
    assert set(ENV_VARIABLES) == {
        "SLEUTH_MAX_CONCURRENT_ACTIVITIES",
        "SLEUTH_MAX_CONCURRENT_WORKFLOW_TASKS",
        "SLEUTH_ACTIVITY_THREADS",
        "SLEUTH_GRACEFUL_SHUTDOWN_SECONDS",
    }


def test_worker_settings_read_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_MAX_CONCURRENT_ACTIVITIES", "3")
    assert WorkerSettings.from_env().max_concurrent_activities == 3


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SLEUTH_MAX_CONCURRENT_ACTIVITIES", "many", "not a whole number"),
        ("SLEUTH_ACTIVITY_THREADS", "2.5", "not a whole number"),
        ("SLEUTH_MAX_CONCURRENT_WORKFLOW_TASKS", "0", "greater than zero"),
        ("SLEUTH_GRACEFUL_SHUTDOWN_SECONDS", "soon", "not a number"),
    ],
)
def test_worker_settings_reject_bad_values(variable: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"{variable}='{value}' .*{message}"):
        WorkerSettings.from_env({variable: value})


def test_no_variables_means_plaintext_without_key() -> None:
    assert ConnectionSecurity.from_env({}) == ConnectionSecurity(tls=False, api_key=None)


def test_api_key_turns_tls_on() -> None:
    security = ConnectionSecurity.from_env({"TEMPORAL_API_KEY": "key-123"})
    assert security == ConnectionSecurity(tls=True, api_key="key-123")


def test_api_key_with_tls_explicitly_off_needs_an_explicit_opt_in() -> None:
    with pytest.raises(ConnectionSettingsError, match="would send the key in plaintext"):
        ConnectionSecurity.from_env({"TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"})
    security = ConnectionSecurity.from_env(
        {"TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false", "TEMPORAL_ALLOW_PLAINTEXT_API_KEY": "1"}
    )
    assert security == ConnectionSecurity(tls=False, api_key="k")


def test_tls_flag_alone_uses_system_roots() -> None:
    assert ConnectionSecurity.from_env({"TEMPORAL_TLS": "TRUE"}).tls is True


def test_mutual_tls_reads_the_certificate_files(tmp_path: Path) -> None:
    cert, key, ca = tmp_path / "client.pem", tmp_path / "client.key", tmp_path / "ca.pem"
    cert.write_bytes(b"CERT")
    key.write_bytes(b"KEY")
    ca.write_bytes(b"CA")
    security = ConnectionSecurity.from_env(
        {
            "TEMPORAL_TLS_CERT": str(cert),
            "TEMPORAL_TLS_KEY": str(key),
            "TEMPORAL_TLS_CA": str(ca),
            "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
        }
    )
    assert security.tls == TLSConfig(
        client_cert=b"CERT",
        client_private_key=b"KEY",
        server_root_ca_cert=b"CA",
        domain="temporal.internal",
    )
    assert security.api_key is None


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"TEMPORAL_TLS_CERT": "/x.pem"}, "set both TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY"),
        ({"TEMPORAL_TLS": "maybe"}, "TEMPORAL_TLS='maybe' is not a boolean"),
        (
            {"TEMPORAL_TLS": "off", "TEMPORAL_TLS_CA": "/ca.pem"},
            "TEMPORAL_TLS=false contradicts",
        ),
        (
            {"TEMPORAL_TLS_CERT": "/no/such.pem", "TEMPORAL_TLS_KEY": "/no/such.key"},
            "TEMPORAL_TLS_CERT=/no/such.pem: cannot read the file",
        ),
    ],
)
def test_bad_security_settings_say_what_to_fix(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectionSettingsError, match=message):
        ConnectionSecurity.from_env(environ)


async def test_connect_applies_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bad TLS setting must stop `connect` before any network call.
    monkeypatch.setenv("TEMPORAL_TLS_CERT", "/only/the/cert.pem")
    with pytest.raises(ConnectionSettingsError, match="TEMPORAL_TLS_KEY"):
        await connect("localhost:1")


async def test_connect_uses_tls_from_the_environment(
    time_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = time_env.client.service_client.config.target_host
    client = await connect(address)
    assert await client.service_client.check_health()
    # The same plaintext server refuses a TLS handshake: proof that TEMPORAL_TLS reached the client.
    monkeypatch.setenv("TEMPORAL_TLS", "true")
    with pytest.raises(RuntimeError):
        await connect(address)


async def test_the_server_probe_uses_the_same_security(
    time_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workers.embedded import temporal_answers

    address = time_env.client.service_client.config.target_host
    assert await temporal_answers(address)
    monkeypatch.setenv("TEMPORAL_TLS", "true")
    assert not await temporal_answers(address)
