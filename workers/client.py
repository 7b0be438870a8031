"""Temporal clients, always with the pydantic data converter (encrypting when a key is set).

Connection security comes from the environment, so the same worker image runs against a local
dev server, a self-hosted cluster with mutual TLS, or Temporal Cloud:

| variable | meaning |
| --- | --- |
| `TEMPORAL_TLS_CERT`, `TEMPORAL_TLS_KEY` | paths to a client certificate and its key (mTLS); set both |
| `TEMPORAL_TLS_CA` | path to the server's root CA, when it is not a public one |
| `TEMPORAL_TLS_SERVER_NAME` | the name to verify on the server certificate, when it differs |
| `TEMPORAL_TLS` | `true` for TLS with the system's roots; `false` to force plaintext |
| `TEMPORAL_API_KEY` | an API key (Temporal Cloud); turns TLS on |
| `TEMPORAL_ALLOW_PLAINTEXT_API_KEY` | `true` to send the API key with `TEMPORAL_TLS=false` anyway (a proxy that terminates TLS on the same host); refused otherwise |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from sleuth.config import temporal_address, temporal_namespace
from sleuth.errors import SleuthError
from workers.codec import data_converter
from workers.telemetry import client_interceptors

PLAINTEXT_API_KEY_ENV = "TEMPORAL_ALLOW_PLAINTEXT_API_KEY"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConnectionSettingsError(SleuthError, ValueError):
    """The TLS / API-key environment variables are inconsistent or point at missing files."""


@dataclass(frozen=True)
class ConnectionSecurity:
    """TLS and API-key settings for `Client.connect` (see the module docstring for variables)."""

    tls: bool | TLSConfig = False
    api_key: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ConnectionSecurity:
        """Read the `TEMPORAL_TLS*` and `TEMPORAL_API_KEY` variables; raise on a bad combination."""
        env = os.environ if environ is None else environ
        cert, key = env.get("TEMPORAL_TLS_CERT"), env.get("TEMPORAL_TLS_KEY")
        ca, server_name = env.get("TEMPORAL_TLS_CA"), env.get("TEMPORAL_TLS_SERVER_NAME")
        api_key = env.get("TEMPORAL_API_KEY") or None
        tls_flag = _flag(env.get("TEMPORAL_TLS"))
        if bool(cert) != bool(key):
            raise ConnectionSettingsError(
                "set both TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY (client certificate and its "
                "private key) for mutual TLS, or neither"
            )
        if tls_flag is False:
            if cert or ca:
                raise ConnectionSettingsError(
                    "TEMPORAL_TLS=false contradicts TEMPORAL_TLS_CERT/TEMPORAL_TLS_CA; unset one"
                )
            if api_key and not _flag(env.get(PLAINTEXT_API_KEY_ENV), PLAINTEXT_API_KEY_ENV):
                raise ConnectionSettingsError(
                    "TEMPORAL_API_KEY with TEMPORAL_TLS=false would send the key in plaintext: "
                    "unset TEMPORAL_TLS (an API key turns TLS on), or set "
                    f"{PLAINTEXT_API_KEY_ENV}=true if the connection is protected otherwise"
                )
            return cls(tls=False, api_key=api_key)
        if cert or ca or server_name:
            return cls(
                tls=TLSConfig(
                    client_cert=_read("TEMPORAL_TLS_CERT", cert),
                    client_private_key=_read("TEMPORAL_TLS_KEY", key),
                    server_root_ca_cert=_read("TEMPORAL_TLS_CA", ca),
                    domain=server_name or None,
                ),
                api_key=api_key,
            )
        return cls(tls=bool(tls_flag) or api_key is not None, api_key=api_key)


def _flag(value: str | None, variable: str = "TEMPORAL_TLS") -> bool | None:
    if value is None or not value.strip():
        return None
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ConnectionSettingsError(f"{variable}={value!r} is not a boolean; use true or false")


def _read(variable: str, path: str | None) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ConnectionSettingsError(f"{variable}={path}: cannot read the file ({exc})") from exc


async def connect(
    address: str | None = None,
    *,
    namespace: str | None = None,
    security: ConnectionSecurity | None = None,
    runtime: Runtime | None = None,
) -> Client:
    """Connect to Temporal at `address` (default `$TEMPORAL_ADDRESS` or localhost:7233).

    TLS and the API key come from `security`, else from the environment
    (`ConnectionSecurity.from_env`). Payloads are encrypted when an encryption key is configured
    (`workers.codec`). The client (and every worker built on it) traces through OpenTelemetry
    (`workers.telemetry`); `runtime` is the Temporal runtime to use (a worker's, serving
    metrics: `workers.telemetry.metrics_runtime`).
    """
    security = security or ConnectionSecurity.from_env()
    return await Client.connect(
        address or temporal_address(),
        namespace=namespace or temporal_namespace(),
        data_converter=data_converter(),
        tls=security.tls,
        api_key=security.api_key,
        interceptors=client_interceptors(),
        runtime=runtime,
    )
