"""How Sleuth finds and connects to Temporal: Temporal's own environment configuration.

`connect_config()` loads the connection through `temporalio.envconfig`, so Sleuth reads exactly
what the Temporal CLI and SDKs read: the `TEMPORAL_*` variables (`TEMPORAL_ADDRESS`,
`TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS`, `TEMPORAL_TLS_CLIENT_CERT_PATH`,
`TEMPORAL_TLS_CLIENT_KEY_PATH`, `TEMPORAL_TLS_SERVER_CA_CERT_PATH`, `TEMPORAL_TLS_SERVER_NAME`,
...) and the profiles of a TOML file (`TEMPORAL_CONFIG_FILE`, default
`~/.config/temporalio/temporal.toml`; `TEMPORAL_PROFILE` picks one, default `default`). The same
worker image then runs against the embedded dev server, a cluster with mutual TLS, or Temporal
Cloud. On top of that, Sleuth:

- reads its former names `TEMPORAL_TLS_CERT`, `TEMPORAL_TLS_KEY` and `TEMPORAL_TLS_CA` for one
  more release, warning with the standard name to use instead;
- refuses to send an API key over plaintext unless `TEMPORAL_ALLOW_PLAINTEXT_API_KEY=true`;
- refuses settings that cannot work (a certificate without its key, TLS off with a CA,
  `TEMPORAL_TLS=maybe`, a config file or certificate it cannot read) with a message naming them.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from temporalio.client import Client, Plugin
from temporalio.envconfig import ClientConfigProfile, ClientConnectConfig, DataSource
from temporalio.runtime import Runtime

from sleuth.runtime.errors import SleuthError
from sleuth.runtime.paths import DEFAULT_TEMPORAL_ADDRESS
from sleuth.workers.codec import data_converter
from sleuth.workers.summaries import with_summaries
from sleuth.workers.telemetry import client_interceptors

PLAINTEXT_API_KEY_ENV = "TEMPORAL_ALLOW_PLAINTEXT_API_KEY"
DEPRECATED_VARIABLES = {
    "TEMPORAL_TLS_CERT": "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_KEY": "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_CA": "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
}
"""Sleuth's former TLS variables and the standard ones they stand for (read until the next release)."""
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConnectionSettingsError(SleuthError, ValueError):
    """The Temporal connection settings are inconsistent or point at files that cannot be read."""


class DeprecatedVariableWarning(SleuthError, FutureWarning):
    """A former Sleuth variable name is set; the message names the standard variable to use."""


def temporal_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `TEMPORAL_*` variables as `envconfig` should read them.

    Empty values count as unset, `TEMPORAL_TLS` is normalised to `true`/`false` (envconfig would
    read `off` or `maybe` as "TLS on"), and each deprecated name is copied to its standard one
    (unless that is set too), with a `DeprecatedVariableWarning`.
    """
    source = os.environ if environ is None else environ
    env = {key: value for key, value in source.items() if value.strip()}
    for old, new in DEPRECATED_VARIABLES.items():
        if old not in env:
            continue
        if new in env:
            message = f"{old} is ignored because {new} is set; unset {old}"
        else:
            env[new] = env[old]
            message = f"{old} is deprecated and will stop working in the next release; set {new}"
        warnings.warn(message, DeprecatedVariableWarning, stacklevel=3)
    if "TEMPORAL_TLS" in env:
        env["TEMPORAL_TLS"] = "true" if _flag(env["TEMPORAL_TLS"], "TEMPORAL_TLS") else "false"
    return env


def connect_config(
    address: str | None = None,
    *,
    namespace: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientConnectConfig:
    """The keyword arguments of `Client.connect` for this environment (see the module docstring).

    `address` and `namespace`, when given, replace what the profile and variables say; the
    address defaults to localhost:7233.
    """
    env = temporal_environment(environ)
    config_file = env.get("TEMPORAL_CONFIG_FILE")
    if config_file and not Path(config_file).expanduser().is_file():
        raise ConnectionSettingsError(
            f"TEMPORAL_CONFIG_FILE={config_file}: no such file; point it at your Temporal "
            "client TOML file, or unset it to use ~/.config/temporalio/temporal.toml"
        )
    try:
        profile = ClientConfigProfile.load(override_env_vars=env)
    except RuntimeError as exc:  # the SDK bridge's ConfigError: a bad file or unknown profile
        raise ConnectionSettingsError(
            f"Temporal client configuration: {exc}; check TEMPORAL_PROFILE and the profiles in "
            f"{config_file or '~/.config/temporalio/temporal.toml'}"
        ) from None
    _check_tls(profile, env)
    try:
        config = profile.to_client_connect_config()
    except OSError as exc:
        raise ConnectionSettingsError(
            f"cannot read {exc.filename} ({exc.strerror}): fix the TLS file paths "
            "(TEMPORAL_TLS_*_PATH or the profile's tls table)"
        ) from None
    if address:
        config["target_host"] = address
    config.setdefault("target_host", DEFAULT_TEMPORAL_ADDRESS)
    if namespace:
        config["namespace"] = namespace
    return config


def _check_tls(profile: ClientConfigProfile, env: Mapping[str, str]) -> None:
    tls = profile.tls
    if tls is not None:
        if (tls.client_cert is None) != (tls.client_private_key is None):
            raise ConnectionSettingsError(
                "set both TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH (a client "
                "certificate and its private key, for mutual TLS), or neither; in a TOML profile, "
                "tls.client_cert_path and tls.client_key_path"
            )
        if tls.disabled and (tls.client_cert is not None or tls.server_root_ca_cert is not None):
            raise ConnectionSettingsError(
                "TLS is turned off (TEMPORAL_TLS=false or tls.disabled) but a client certificate "
                "or server CA is set; unset one"
            )
        _check_readable(tls.client_cert, "TEMPORAL_TLS_CLIENT_CERT_PATH")
        _check_readable(tls.client_private_key, "TEMPORAL_TLS_CLIENT_KEY_PATH")
        _check_readable(tls.server_root_ca_cert, "TEMPORAL_TLS_SERVER_CA_CERT_PATH")
    plaintext = tls is not None and tls.disabled
    if (
        profile.api_key
        and plaintext
        and not _flag(env.get(PLAINTEXT_API_KEY_ENV), PLAINTEXT_API_KEY_ENV)
    ):
        raise ConnectionSettingsError(
            "TEMPORAL_API_KEY with TLS turned off (TEMPORAL_TLS=false or tls.disabled) would send "
            "the key in plaintext: turn TLS back on (an API key turns it on by itself), or set "
            f"{PLAINTEXT_API_KEY_ENV}=true if the connection is protected otherwise"
        )


def _check_readable(source: DataSource | None, variable: str) -> None:
    if not isinstance(source, Path):
        return
    try:
        source.expanduser().read_bytes()
    except OSError as exc:
        raise ConnectionSettingsError(
            f"{variable}={source}: cannot read the file ({exc.strerror})"
        ) from None


def _flag(value: str | None, variable: str) -> bool:
    if value is None or not value.strip():
        return False
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConnectionSettingsError(f"{variable}={value!r} is not a boolean; use true or false")


async def connect(
    address: str | None = None,
    *,
    namespace: str | None = None,
    plugins: Sequence[Plugin] = (),
    runtime: Runtime | None = None,
) -> Client:
    """Connect to Temporal as configured (`connect_config`), with Sleuth's data converter.

    Payloads are pydantic JSON, encrypted when a key is configured (`sleuth.workers.codec`). Pass
    `plugins=[SleuthPlugin(app)]` to make every `Worker` built on this client serve the App.
    The client (and every worker built on it) traces through OpenTelemetry
    (`sleuth.workers.telemetry`); `runtime` is the Temporal runtime to use (a worker's, serving
    metrics: `sleuth.workers.telemetry.metrics_runtime`).
    """
    return await Client.connect(
        **connect_config(address, namespace=namespace),
        data_converter=data_converter(),
        plugins=plugins,
        interceptors=with_summaries(client_interceptors()),
        runtime=runtime,
    )
