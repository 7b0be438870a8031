"""Every `SLEUTH_*` setting in one validated model, read from the environment when needed.

`load_settings()` validates the environment as it is at the call (a test that monkeypatches a
variable sees the new value at once) and raises `SettingsError` naming the variable and the form
it expects. Commands call it before they do anything, so a bad value stops them at start; library
code calls it where it needs a value. Temporal's own `TEMPORAL_*` variables are not here:
`temporalio.envconfig` reads them (see `workers/client.py`).
"""

from __future__ import annotations

import functools
import os
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sleuth.runtime.errors import InvalidSettingError, SleuthError
from sleuth.runtime.redact import has_credentials, redact

ENV_PREFIX = "SLEUTH_"
DEFAULT_HOME = "~/.sleuth"
DEFAULT_TASK_QUEUE = "sleuth"
DEFAULT_EMBEDDED_ADDRESS = "localhost:7233"
DEFAULT_MODEL = "local:qwen2.5-coder-1.5b"
DEFAULT_METRICS_HOST = "127.0.0.1"

LogFormat = Literal["console", "json"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
StructuredOutputSetting = Literal["auto", "json_schema", "json_object", "tool", "prompt"]
VersioningSetting = Literal["pinned", "auto_upgrade"]


class SettingsError(InvalidSettingError):
    """A `SLEUTH_*` variable has a value Sleuth cannot use; the message names it and the form it takes."""


class SleuthSettings(BaseSettings):
    """Sleuth's settings: field `name` is the environment variable `SLEUTH_<NAME>`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
        use_attribute_docstrings=True,
    )

    home: Path | None = None
    """The data directory: Temporal's SQLite file and log, artifacts, stores, rows, model weights (default `~/.sleuth`)."""
    artifacts: Path | str | None = None
    """Where run state (evidence, conversations, checkpoints, workspace files, offloaded payloads) is stored: a folder, or `s3://bucket/prefix` for S3-compatible object storage reached through the standard AWS variables (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`) (default `$SLEUTH_HOME/artifacts`); workers on several machines must share it."""
    payload_offload: bool = True
    """Whether payloads over `payload_offload_bytes` go to the artifact store (Temporal External Storage) with only a reference in the workflow history, instead of being refused by the server's 2 MiB limit."""
    payload_offload_bytes: int = Field(default=256 * 1024, ge=1024, le=2 * 1024 * 1024)
    """A payload of at least this many bytes (default 256 KiB) is offloaded to the artifact store; Temporal warns from 512 KiB and refuses 2 MiB."""
    max_payload_bytes: int = Field(default=50 * 1024 * 1024, ge=1024 * 1024)
    """The largest payload a step may produce even offloaded (default 50 MiB); a bigger one fails the step at once with a non-retryable `PayloadTooLarge` error naming it."""
    workspace_max_bytes: PositiveInt = 50_000_000
    """Total bytes a deep agent's in-memory workspace may hold (default 50 MB); a write past it is refused with a tool error the model sees."""
    workspace_max_files: PositiveInt = 1000
    """Files a deep agent's in-memory workspace may hold (default 1000)."""
    workspace_max_depth: PositiveInt = 32
    """Folders a workspace path may be nested in (default 32)."""
    workspace_max_path_chars: PositiveInt = 512
    """Characters a workspace path may have (default 512)."""
    task_queue: str | None = None
    """The task queue workers poll and commands start runs on (default: the App's queue, `sleuth`)."""
    embedded_address: str = DEFAULT_EMBEDDED_ADDRESS
    """The address the embedded dev server is started on when nothing answers there; its Web UI is 1000 ports up."""
    web_ui: str | None = None
    """The Web UI address used in the links commands print (default: a local Temporal's gRPC port + 1000)."""
    log_format: LogFormat = "console"
    """`console` for people, `json` for machines."""
    log_level: LogLevel = "INFO"
    """The lowest level of Sleuth's own log lines."""
    temporal_log_level: LogLevel = "WARNING"
    """The lowest level of the Temporal SDK's log lines."""
    model: str = DEFAULT_MODEL
    """The model used wherever none is named: `local:NAME`, `openai:NAME` or `anthropic:NAME`."""
    model_dir: Path | None = None
    """Where local model weights are assembled (default `$SLEUTH_HOME/models`)."""
    local_threads: PositiveInt | None = None
    """llama.cpp threads for the local model (default: all cores)."""
    model_timeout_seconds: PositiveFloat = 60.0
    """How long one request to an OpenAI, OpenAI-compatible or Anthropic model may take before it fails as retryable; raise it for a slow local server."""
    openai_structured_output: StructuredOutputSetting = "auto"
    """How an OpenAI-compatible server is asked for schema-valid JSON; `auto` tries each mode until one works."""
    sinks: Annotated[dict[str, str], NoDecode] = {}
    """Row sinks this worker serves by name: `name=URL` pairs separated by commas."""
    sink_dirs: Annotated[list[Path], NoDecode] = []
    """Directories besides `$SLEUTH_HOME` where file sinks may live, separated by `:`."""
    encryption_key: SecretStr | None = None
    """Base64 AES-256 keys, comma-separated: the first encrypts every payload and failure message sent to Temporal and every artifact stored, all decrypt."""
    encryption_key_file: Path | None = None
    """A file (mode 0600) with one such key per line, the encrypting key first."""
    max_concurrent_activities: PositiveInt = 16
    """Activities one worker runs at once; model calls mostly wait, so this can exceed the cores."""
    max_concurrent_workflow_tasks: PositiveInt = 64
    """Workflow tasks one worker processes at once."""
    activity_threads: PositiveInt = 16
    """Threads for synchronous activities."""
    graceful_shutdown_seconds: PositiveFloat = 30.0
    """On SIGTERM or Ctrl-C a worker stops polling and gives running activities this long to finish."""
    max_activities_per_second: PositiveFloat | None = None
    """Activities one worker starts per second at most (unset: no limit); each worker counts its own."""
    max_task_queue_activities_per_second: PositiveFloat | None = None
    """Activities the Temporal server hands out per second on the task queue, across every worker polling it (unset: no limit): one number for the whole fleet, so it stays under a model provider's rate limit however many workers run. Every worker on the queue should set the same value; the server keeps the one it heard last."""
    worker_versioning: bool = False
    """Whether workers join a Temporal worker deployment (Worker Versioning) as `deployment_name`/`build_id`, so a run stays on the build that started it during a rolling upgrade (docs/deploy.md). Setting `deployment_name` or `build_id` turns it on too."""
    deployment_name: str | None = Field(default=None, min_length=1, max_length=200)
    """The worker deployment a versioned worker joins (default: its task queue). All builds of one worker fleet share it."""
    build_id: str | None = Field(default=None, min_length=1, max_length=200)
    """This worker's build within its deployment (default: Sleuth's version, `sleuth.__version__`); give each image you roll out its own, e.g. its git commit or image tag."""
    versioning_behavior: VersioningSetting = "pinned"
    """How a versioned run moves between builds: `pinned` (it finishes on the build that started it; old workers stay until their runs drain) or `auto_upgrade` (its next workflow task moves to the current build)."""
    sticky_queue_timeout_seconds: PositiveFloat = 10.0
    """A run's next workflow task waits this long for the worker that cached the run before any worker may take it (after a worker crash, its runs pause this long)."""
    heartbeat_throttle_seconds: PositiveFloat = 2.0
    """The worker sends a running activity's heartbeats to the server at most this often. The Temporal SDK's own throttle (0.8 × the heartbeat timeout: 16 s of 20) leaves a busy worker 4 s before the server declares a live attempt dead and runs the step again beside it."""
    prices: Path | None = None
    """A TOML or JSON file of model prices (USD per million tokens) over the built-in ones (default `$SLEUTH_HOME/prices.toml` if it exists)."""
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    """`sleuth worker` serves Prometheus metrics on this port (the Temporal SDK's and Sleuth's); unset, none."""
    metrics_host: str = DEFAULT_METRICS_HOST
    """The interface the metrics endpoint listens on; `0.0.0.0` in a container."""
    serve_token: SecretStr | None = None
    """The bearer token `sleuth serve` requires on every request (`Authorization: Bearer …`, or its page's cookie); required when it listens on anything but loopback. At least 16 characters."""
    serve_token_file: Path | None = None
    """A file (mode 0600) holding that token on its first line, instead of `SLEUTH_SERVE_TOKEN`."""
    serve_allowed_hosts: Annotated[list[str], NoDecode] = []
    """Host names `sleuth serve` answers to besides loopback's (`localhost`, `127.0.0.1`, `::1`) and the address it listens on, separated by commas; a request naming another `Host` is refused (DNS rebinding). `*` allows any."""
    serve_max_body_bytes: PositiveInt = 1_048_576
    """The largest request body `sleuth serve` reads; a larger one is refused with 413 before or while it arrives, never read whole."""
    serve_cors_origins: Annotated[list[str], NoDecode] = []
    """Origins whose pages may call `sleuth serve` from a browser (CORS), separated by commas; none by default."""
    serve_sse_ping_seconds: PositiveFloat = 15.0
    """`sleuth serve` sends a keep-alive comment on an idle event stream this often, so proxies keep it open."""

    @field_validator(
        "log_format", "log_level", "temporal_log_level", "versioning_behavior", mode="before"
    )
    @classmethod
    def _any_case(cls, value: Any, info: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip()
        lower = info.field_name in ("log_format", "versioning_behavior")
        return text.lower() if lower else text.upper()

    @property
    def versioned(self) -> bool:
        """Whether workers use Worker Versioning (`worker_versioning`, or a deployment name or build id given)."""
        return (
            self.worker_versioning or self.deployment_name is not None or self.build_id is not None
        )

    @field_validator("artifacts", mode="before")
    @classmethod
    def _folder_or_url(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if "://" not in value:
            return Path(value)
        scheme, _, rest = value.partition("://")
        if scheme != "s3":
            raise ValueError(f"{scheme}:// is not a supported store; use a folder or s3://")
        if not rest.split("/", 1)[0]:
            raise ValueError("the URL names no bucket")
        return value

    @field_validator("sinks", mode="before")
    @classmethod
    def _sink_pairs(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return parse_sink_settings(value)

    @field_validator("serve_allowed_hosts", "serve_cors_origins", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return [part.strip() for part in value.split(",") if part.strip()]

    @field_validator("sink_dirs", mode="before")
    @classmethod
    def _directory_list(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return [Path(part) for part in value.split(os.pathsep) if part.strip()]

    @property
    def home_dir(self) -> Path:
        """`home`, or the default, with `~` expanded (not created; see `sleuth.runtime.paths.sleuth_home`)."""
        return (self.home or Path(DEFAULT_HOME)).expanduser()


class UnknownSinkError(SleuthError, ValueError):
    """A sink name that the worker does not know, or a sink URL the worker refuses."""


DEFAULT_SINK = "rows"
"""The sink a scan writes to when its input names none: `$SLEUTH_HOME/rows.sqlite`."""
SINKS_ENV = "SLEUTH_SINKS"
"""Worker-configured sinks: `name=URL` pairs separated by commas."""
SINK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_sink_name(value: str) -> str:
    """`value` if it is a sink name (letters, digits, `.`, `_`, `-`; at most 64), else a
    ValueError saying how to configure a sink. Credentials in a refused value are not echoed."""
    if SINK_NAME.match(value):
        return value
    shown = "a URL with credentials" if has_credentials(value) else repr(redact(value[:80]))
    raise InvalidSettingError(
        f"sink {shown} refused: a scan names a sink (letters, digits, '.', '_', '-'; at most 64), "
        "it never gives a path, URL or host. Configure the sink on the worker "
        f"({SINKS_ENV}=name=URL or `sleuth worker --sink name=URL`) or register it with "
        f"app.sink(name, sink), then pass its name (default {DEFAULT_SINK!r})"
    )


def parse_sink_settings(text: str) -> dict[str, str]:
    """`{"audit": "jsonl:///srv/a.jsonl"}` from `"audit=jsonl:///srv/a.jsonl,..."`."""
    sinks: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, url = entry.partition("=")
        if not sep or not url.strip():
            raise UnknownSinkError(
                f"sink setting {redact(entry)!r} must look like name=URL, e.g. "
                "audit=jsonl:///srv/rows/audit.jsonl"
            )
        try:
            sinks[check_sink_name(name.strip())] = url.strip()
        except ValueError as exc:
            raise UnknownSinkError(str(exc)) from None
    return sinks


def env_name(field: str) -> str:
    """The environment variable of a settings field: `max_concurrent_activities` → `SLEUTH_MAX_CONCURRENT_ACTIVITIES`."""
    return f"{ENV_PREFIX}{field.upper()}"


ENV_VARIABLES: tuple[str, ...] = tuple(env_name(name) for name in SleuthSettings.model_fields)
"""Every variable the settings model reads."""
_SECRET_FIELDS = frozenset({"encryption_key", "serve_token"})


def load_settings() -> SleuthSettings:
    """The settings the environment gives now, validated (`SettingsError` names a bad variable)."""
    snapshot = tuple(
        sorted(
            (key, value) for key, value in os.environ.items() if key.upper().startswith(ENV_PREFIX)
        )
    )
    return _validated(snapshot)


@functools.lru_cache(maxsize=16)
def _validated(snapshot: tuple[tuple[str, str], ...]) -> SleuthSettings:
    # Keyed on the SLEUTH_* variables, so a changed variable is read again and an unchanged
    # environment is validated once, however often library code asks.
    try:
        return SleuthSettings()
    except ValidationError as exc:
        raise SettingsError("; ".join(_describe(error) for error in exc.errors())) from None


def _describe(error: Any) -> str:
    field = str(error["loc"][0]) if error["loc"] else ""
    if field not in SleuthSettings.model_fields:
        return str(error["msg"])
    variable = env_name(field)
    raw = os.environ.get(variable, str(error.get("input", "")))
    shown = "(hidden)" if field in _SECRET_FIELDS else repr(redact(raw))
    reason = str(error["msg"]).removeprefix("Value error, ")
    return f"{variable}={shown} is not valid ({reason}); expected {expected_form(field)}"


def expected_form(field: str) -> str:
    """What a variable takes, in words: `a whole number greater than 0`, `one of: console, json`."""
    if field == "artifacts":
        return "a folder, or s3://bucket/prefix"
    info = SleuthSettings.model_fields[field]
    annotation = _without_none(info.annotation)
    metadata = list(info.metadata)
    if typing.get_origin(annotation) is Annotated:
        annotation, *extras = typing.get_args(annotation)
        metadata += extras
    bound = next((m.gt for m in metadata if hasattr(m, "gt")), None)
    lowest = next((m.ge for m in metadata if hasattr(m, "ge")), None)
    highest = next((m.le for m in metadata if hasattr(m, "le")), None)
    above = f" greater than {bound}" if bound is not None else ""
    if lowest is not None and highest is not None:
        above = f" from {lowest} to {highest}"
    if typing.get_origin(annotation) is Literal:
        return "one of: " + ", ".join(str(choice) for choice in typing.get_args(annotation))
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return f"a whole number{above}"
    if annotation is float:
        return f"a number{above}"
    if annotation is Path:
        return "a path"
    if typing.get_origin(annotation) is list:
        if typing.get_args(annotation) == (str,):
            return "names separated by commas"
        return f"paths separated by {os.pathsep!r}"
    if typing.get_origin(annotation) is dict:
        return "name=URL pairs separated by commas, e.g. audit=jsonl:///srv/rows/audit.jsonl"
    return "text"


def _without_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation
