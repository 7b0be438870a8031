"""Tracing and metrics for Sleuth's processes: OpenTelemetry from the standard `OTEL_*`
variables, Temporal's tracing interceptor, and a Prometheus endpoint on request.

Tracing: every client Sleuth connects carries `temporalio.contrib.opentelemetry`'s
`TracingInterceptor`, and workers built from it inherit it, so a run is one trace from the
client that started it through the workflow to each activity, where Sleuth's own spans (research
nodes, model calls, tool calls: `sleuth.runtime.telemetry`) nest. `configure_tracing()` (the `sleuth`
command calls it) installs a tracer provider when the environment asks for one:

| variable | meaning |
| --- | --- |
| `OTEL_TRACES_EXPORTER` | `otlp`, `console` or `none`, comma-separated (default `otlp` when an OTLP endpoint is set, else none) |
| `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | where the OTLP exporter sends spans |
| `OTEL_EXPORTER_OTLP_PROTOCOL` | `grpc` (default) or `http/protobuf` |
| `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | the resource (service name default `sleuth`) |
| `OTEL_SDK_DISABLED` | `true` turns it all off |

The exporters read their own standard variables (headers, timeouts, certificates, batching).

Metrics: `SLEUTH_METRICS_PORT` makes `sleuth worker` serve Prometheus metrics at
`http://$SLEUTH_METRICS_HOST:$SLEUTH_METRICS_PORT/metrics` (host default 127.0.0.1; set
`0.0.0.0` in a container): the Temporal SDK's own, plus Sleuth's (`sleuth.workflows.metrics`). Both are
fields of `sleuth.runtime.settings.SleuthSettings`, validated with the other `SLEUTH_*` settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TypeVar

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from temporalio.client import Interceptor
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.settings import SleuthSettings, load_settings
from sleuth.workflows.metrics import HISTOGRAM_BUCKETS

DEFAULT_SERVICE_NAME = "sleuth"
_EXPORTERS = ("otlp", "console", "none")
_OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

_provider: TracerProvider | None = None
AnyInterceptor = TypeVar("AnyInterceptor")


def client_interceptors() -> list[Interceptor]:
    """The interceptors every Sleuth client (and the workers built on it) carries."""
    return [TracingInterceptor()]


def has_tracing(interceptors: Sequence[object]) -> bool:
    """Whether `interceptors` hold Temporal's OpenTelemetry `TracingInterceptor`."""
    return any(isinstance(interceptor, TracingInterceptor) for interceptor in interceptors)


def with_tracing(
    interceptors: Sequence[AnyInterceptor],
) -> list[AnyInterceptor | TracingInterceptor]:
    """`interceptors` plus a `TracingInterceptor` unless they hold one (two would trace every
    call twice)."""
    if has_tracing(interceptors):
        return list(interceptors)
    return [*interceptors, TracingInterceptor()]


def configure_tracing(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """Install the tracer provider the `OTEL_*` variables ask for (`tracer_provider_from_env`);
    None, and nothing installed, when they ask for none. Once per process: a later call returns
    the first provider."""
    global _provider
    if _provider is None:
        _provider = tracer_provider_from_env(environ)
        if _provider is not None:
            trace.set_tracer_provider(_provider)
    return _provider


def tracer_provider_from_env(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A tracer provider exporting to what `OTEL_TRACES_EXPORTER` names (batched), with the
    resource of `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`; None when no exporter is asked
    for or `OTEL_SDK_DISABLED=true`."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = [_exporter(name, env) for name in _exporter_names(env)]
    if not exporters:
        return None
    service = env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    resource = Resource.create({SERVICE_NAME: service})
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def shutdown_tracing() -> None:
    """Send the spans still buffered (the `sleuth` command exits without interpreter cleanup)."""
    if _provider is not None:
        _provider.force_flush()


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    raw = env.get("OTEL_TRACES_EXPORTER")
    if raw is None or not raw.strip():
        return ["otlp"] if any(env.get(name) for name in _OTLP_ENDPOINTS) else []
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in _EXPORTERS]
    if unknown:
        raise InvalidSettingError(
            f"OTEL_TRACES_EXPORTER={raw!r}: {', '.join(unknown)} is not an exporter Sleuth "
            f"knows; use {', '.join(_EXPORTERS)}"
        )
    return [name for name in names if name != "none"]


def _exporter(name: str, env: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    ).strip()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter()
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HTTPSpanExporter,
            )

            http_exporter: SpanExporter = HTTPSpanExporter()
            return http_exporter
    except ImportError as exc:
        raise InvalidSettingError(
            f"the OTLP exporter for {protocol!r} is not installed ({exc.name}); install it with: "
            'pip install "sleuth[otlp]"'
        ) from None
    raise InvalidSettingError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: use grpc or http/protobuf"
    )


def metrics_address(settings: SleuthSettings | None = None) -> str | None:
    """`host:port` of the Prometheus endpoint `SLEUTH_METRICS_PORT` asks for (None: none), from
    `settings` (default: the environment's, `sleuth.runtime.settings.load_settings`)."""
    settings = settings or load_settings()
    if settings.metrics_port is None:
        return None
    return f"{settings.metrics_host}:{settings.metrics_port}"


def metrics_runtime(settings: SleuthSettings | None = None) -> Runtime | None:
    """A Temporal runtime that serves Prometheus metrics where `SLEUTH_METRICS_PORT` says (None
    when it is unset): connect the worker's client with it."""
    address = metrics_address(settings)
    if address is None:
        return None
    try:
        return Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(
                    bind_address=address, histogram_bucket_overrides=HISTOGRAM_BUCKETS
                )
            )
        )
    except Exception as exc:
        raise InvalidSettingError(
            f"cannot serve metrics at {address} ({exc}); free the port or choose another "
            "SLEUTH_METRICS_PORT"
        ) from exc
