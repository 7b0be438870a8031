"""The Temporal connection comes from `temporalio.envconfig`: standard variables, TOML profiles,
Sleuth's former variable names as warned aliases, and the checks Sleuth adds on top."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.service import TLSConfig
from temporalio.testing import WorkflowEnvironment

from sleuth.workers.binaries import temporal_cli
from sleuth.workers.client import (
    ConnectionSettingsError,
    DeprecatedVariableWarning,
    connect,
    connect_config,
)
from sleuth.workers.embedded import connect_temporal, temporal_answers
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled


@pytest.fixture
def pem_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    cert, key, ca = tmp_path / "client.pem", tmp_path / "client.key", tmp_path / "ca.pem"
    cert.write_bytes(b"CERT")
    key.write_bytes(b"KEY")
    ca.write_bytes(b"CA")
    return cert, key, ca


def test_nothing_set_means_the_local_server_in_plaintext() -> None:
    assert connect_config(environ={}) == {"target_host": "localhost:7233"}


def test_standard_variables_give_address_namespace_and_api_key_over_tls() -> None:
    config = connect_config(
        environ={
            "TEMPORAL_ADDRESS": "my-ns.a1b2c.tmprl.cloud:7233",
            "TEMPORAL_NAMESPACE": "my-ns.a1b2c",
            "TEMPORAL_API_KEY": "key-123",
        }
    )
    assert config == {
        "target_host": "my-ns.a1b2c.tmprl.cloud:7233",
        "namespace": "my-ns.a1b2c",
        "api_key": "key-123",
        "tls": True,
    }


def test_an_explicit_address_and_namespace_win_over_the_environment() -> None:
    config = connect_config(
        "localhost:9999",
        namespace="other",
        environ={"TEMPORAL_ADDRESS": "far:7233", "TEMPORAL_NAMESPACE": "ns"},
    )
    assert config["target_host"] == "localhost:9999" and config["namespace"] == "other"


def test_the_api_key_is_never_sent_in_plaintext_without_an_explicit_opt_in() -> None:
    environ = {"TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"}
    with pytest.raises(ConnectionSettingsError, match="would send the key in plaintext"):
        connect_config(environ=environ)
    config = connect_config(environ={**environ, "TEMPORAL_ALLOW_PLAINTEXT_API_KEY": "1"})
    assert config["tls"] is False and config["api_key"] == "k"


@pytest.mark.parametrize(("value", "tls_on"), [("TRUE", True), ("on", True), ("off", False)])
def test_tls_flag_words(value: str, tls_on: bool) -> None:
    # envconfig alone reads `off` as "TLS on"; Sleuth normalises the flag first.
    tls = connect_config(environ={"TEMPORAL_TLS": value}).get("tls")
    assert (tls not in (None, False)) is tls_on


def test_mutual_tls_reads_the_standard_certificate_variables(
    pem_files: tuple[Path, Path, Path],
) -> None:
    cert, key, ca = pem_files
    config = connect_config(
        environ={
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(key),
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca),
            "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
        }
    )
    assert config["tls"] == TLSConfig(
        client_cert=b"CERT",
        client_private_key=b"KEY",
        server_root_ca_cert=b"CA",
        domain="temporal.internal",
    )
    assert "api_key" not in config


@pytest.mark.parametrize(
    ("alias", "standard", "field"),
    [
        ("TEMPORAL_TLS_CERT", "TEMPORAL_TLS_CLIENT_CERT_PATH", "client_cert"),
        ("TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CLIENT_KEY_PATH", "client_private_key"),
        ("TEMPORAL_TLS_CA", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "server_root_ca_cert"),
    ],
)
def test_each_former_name_still_works_with_a_warning_naming_the_standard_one(
    pem_files: tuple[Path, Path, Path], alias: str, standard: str, field: str
) -> None:
    cert, key, ca = pem_files
    environ = {
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(key),
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca),
    }
    replacement = {"client_cert": b"NEW-CERT", "client_private_key": b"NEW-KEY"}.get(
        field, b"NEW-CA"
    )
    aliased = cert.parent / f"aliased-{field}"
    aliased.write_bytes(replacement)
    del environ[standard]
    environ[alias] = str(aliased)

    with pytest.warns(DeprecatedVariableWarning, match=f"{alias} is deprecated.*set {standard}"):
        config = connect_config(environ=environ)

    tls = config["tls"]
    assert isinstance(tls, TLSConfig) and getattr(tls, field) == replacement


def test_a_former_name_next_to_its_standard_one_is_ignored_with_a_warning(
    pem_files: tuple[Path, Path, Path],
) -> None:
    cert, key, ca = pem_files
    environ = {
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(key),
        "TEMPORAL_TLS_CA": "/not/read.pem",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca),
    }
    with pytest.warns(DeprecatedVariableWarning, match="TEMPORAL_TLS_CA is ignored"):
        config = connect_config(environ=environ)
    assert isinstance(config["tls"], TLSConfig) and config["tls"].server_root_ca_cert == b"CA"


def test_a_toml_profile_gives_the_connection_and_variables_override_it(
    tmp_path: Path, pem_files: tuple[Path, Path, Path]
) -> None:
    cert, key, ca = pem_files
    config_file = tmp_path / "temporal.toml"
    config_file.write_text(
        f"""
[profile.default]
address = "localhost:7233"

[profile.prod]
address = "prod.example.com:7233"
namespace = "prod-ns"

[profile.prod.tls]
client_cert_path = "{cert}"
client_key_path = "{key}"
server_ca_cert_path = "{ca}"
server_name = "prod.internal"
"""
    )
    environ = {"TEMPORAL_CONFIG_FILE": str(config_file)}
    assert connect_config(environ=environ) == {"target_host": "localhost:7233"}

    prod = connect_config(environ={**environ, "TEMPORAL_PROFILE": "prod"})
    assert prod["target_host"] == "prod.example.com:7233" and prod["namespace"] == "prod-ns"
    assert prod["tls"] == TLSConfig(
        client_cert=b"CERT",
        client_private_key=b"KEY",
        server_root_ca_cert=b"CA",
        domain="prod.internal",
    )
    overridden = connect_config(
        environ={**environ, "TEMPORAL_PROFILE": "prod", "TEMPORAL_NAMESPACE": "staging"}
    )
    assert overridden["namespace"] == "staging"

    with pytest.raises(ConnectionSettingsError, match="Profile 'nope' not found.*TEMPORAL_PROFILE"):
        connect_config(environ={**environ, "TEMPORAL_PROFILE": "nope"})


def test_a_profile_with_tls_off_and_an_api_key_is_refused(tmp_path: Path) -> None:
    config_file = tmp_path / "temporal.toml"
    config_file.write_text(
        '[profile.default]\naddress = "h:7233"\napi_key = "k"\n[profile.default.tls]\n'
        "disabled = true\n"
    )
    with pytest.raises(ConnectionSettingsError, match="would send the key in plaintext"):
        connect_config(environ={"TEMPORAL_CONFIG_FILE": str(config_file)})


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"TEMPORAL_TLS_CLIENT_CERT_PATH": "/x.pem"},
            "set both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH",
        ),
        ({"TEMPORAL_TLS": "maybe"}, "TEMPORAL_TLS='maybe' is not a boolean"),
        (
            {"TEMPORAL_TLS": "off", "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/ca.pem"},
            "TLS is turned off .* but a client certificate or server CA is set",
        ),
        (
            {
                "TEMPORAL_TLS_CLIENT_CERT_PATH": "/no/such.pem",
                "TEMPORAL_TLS_CLIENT_KEY_PATH": "/no/such.key",
            },
            "TEMPORAL_TLS_CLIENT_CERT_PATH=/no/such.pem: cannot read the file",
        ),
        ({"TEMPORAL_CONFIG_FILE": "/no/such/temporal.toml"}, "TEMPORAL_CONFIG_FILE=.*no such file"),
    ],
)
def test_bad_connection_settings_say_what_to_fix(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectionSettingsError, match=message):
        connect_config(environ=environ)


async def test_connect_checks_the_environment_before_any_network_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEMPORAL_TLS_CERT", "/only/the/cert.pem")
    with (
        pytest.warns(DeprecatedVariableWarning),
        pytest.raises(ConnectionSettingsError, match="TEMPORAL_TLS_CLIENT_KEY_PATH"),
    ):
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


async def test_commands_reach_the_server_a_toml_profile_names(
    time_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = time_env.client.service_client.config.target_host
    config_file = tmp_path / "temporal.toml"
    config_file.write_text(f'[profile.local]\naddress = "{address}"\nnamespace = "default"\n')
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(config_file))
    monkeypatch.setenv("TEMPORAL_PROFILE", "local")
    client = await connect_temporal()
    assert client.service_client.config.target_host == address
    assert await client.service_client.check_health()


def test_a_profile_the_temporal_cli_writes_is_the_one_sleuth_and_the_cli_use(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    config_file = tmp_path / "temporal.toml"
    env = {
        **os.environ,
        "TEMPORAL_CONFIG_FILE": str(config_file),
        "TEMPORAL_PROFILE": "sleuth-test",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    address = dev_env.client.service_client.config.target_host
    for prop, value in (("address", address), ("namespace", "default")):
        subprocess.run(
            [str(temporal_cli()), "config", "set", "--profile", "sleuth-test"]
            + ["--prop", prop, "--value", value],
            env=env,
            check=True,
            capture_output=True,
        )
    task_queue = f"nobody-{uuid.uuid4()}"
    started = run_sleuth(
        ["research", "q?", "--no-wait", "--task-queue", task_queue, "--json"],
        env=env,
        timeout=scaled(120),
    )
    assert started.returncode == 0, started.stderr
    assert "started the embedded server" not in started.stderr
    found = re.search(r"research run (\S+)", started.stdout + started.stderr)
    assert found, started.stdout + started.stderr
    workflow_id = found.group(1)
    described = subprocess.run(
        [str(temporal_cli()), "workflow", "describe", "--workflow-id", workflow_id, "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["executionConfig"]["taskQueue"]["name"] == task_queue


async def test_the_server_probe_uses_the_same_security(
    time_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = time_env.client.service_client.config.target_host
    assert await temporal_answers(address)
    monkeypatch.setenv("TEMPORAL_TLS", "true")
    assert not await temporal_answers(address)
