"""`SleuthPlugin`: everything a Temporal client and worker need to run Sleuth, in one object.

```python
client = await Client.connect("localhost:7233", plugins=[SleuthPlugin(app)])
worker = Worker(client, task_queue="sleuth")   # inherits the plugin: Sleuth's workflows and activities
```

The plugin gives the client the pydantic data converter (with the AES-GCM codec and the failure
converter that encrypts failure messages and stack traces when an encryption key is configured,
see `workers/codec.py`), and every worker built on that client
Sleuth's workflows, the App's activities, the exception types that fail a run instead of retrying
its workflow task, a check that fails a run whose start input does not fit its workflow
(`workers/input_check.py`), an interceptor that makes an unknown name or bad setting the run's
top-level failure (`workers/failures.py`), the sandbox passthroughs for Sleuth's own modules, and
a heartbeat throttle short enough for checkpointed activities (`SLEUTH_HEARTBEAT_THROTTLE_SECONDS`,
the setting `sleuth worker` reads), and the worker settings a fleet shares: Worker Versioning
(`workers/versioning.py`) and the activity rate limits. A worker whose client was connected
without it can take
it directly: `Worker(client, task_queue=..., plugins=[SleuthPlugin(app)])`; its client must then
already use the pydantic data converter.

Tracing comes with it: the client and its workers carry `temporalio.contrib.opentelemetry`'s
`TracingInterceptor` (one per client, none added where the client already has one), so a run is
one trace from the client that starts it through the workflow to each activity (exporters:
`sleuth.workers.telemetry`). Further interceptors that should wrap every Sleuth client and worker go in
`interceptors=`: client interceptors reach the client, worker interceptors every worker.
"""

from __future__ import annotations

import dataclasses
import pkgutil
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.client import ClientConfig
from temporalio.client import Interceptor as ClientInterceptor
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultPayloadConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Interceptor as WorkerInterceptor
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

import sleuth.workflows as workflow_classes
from sleuth.activities import build_activities
from sleuth.apps.app import App
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.settings import SleuthSettings, load_settings
from sleuth.workers import codec
from sleuth.workers.failures import FailureCauseInterceptor, log_failures_in_one_line
from sleuth.workers.input_check import checking_inputs
from sleuth.workers.payload_storage import configured_external_storage
from sleuth.workers.summaries import with_summaries
from sleuth.workers.telemetry import has_tracing, with_tracing
from sleuth.workers.versioning import deployment_config

PLUGIN_NAME = "sleuth.SleuthPlugin"


def _sdk_modules() -> tuple[str, ...]:
    """Every part of the `sleuth` namespace but its workflow modules: the SDK, the activities and
    the worker code. Passing `sleuth` itself through would pass `sleuth.workflows` through too (the
    sandbox matches by prefix), and a workflow module must be re-imported in the sandbox to be
    checked there."""
    import sleuth

    return tuple(
        f"sleuth.{module.name}"
        for module in pkgutil.iter_modules(sleuth.__path__)
        if module.name != "workflows"
    )


PASSTHROUGH_MODULES = _sdk_modules()
"""Modules the workflow sandbox shares with the worker instead of re-importing them per run: the
`sleuth` namespace but `sleuth.workflows`, never a name outside it (a user's own `activities`
module stays sandboxed as the SDK would have it)."""
FAILURE_EXCEPTION_TYPES: tuple[type[BaseException], ...] = (ValidationError, SleuthError)
"""Raised in workflow code, these fail the run with their message. Otherwise the SDK fails the
workflow *task*, and the server retries it forever: a workflow input that does not fit its model
(a typo in `temporal workflow start --input`) would never end."""


class SleuthPluginError(SleuthError, ValueError):
    """The plugin cannot be combined with the client or worker it was given; the message says why."""


class SleuthPlugin(SimplePlugin):
    """Adds Sleuth to a Temporal client and its workers (see the module docstring)."""

    def __init__(
        self,
        app: App | Callable[[], App],
        *,
        interceptors: Sequence[ClientInterceptor | WorkerInterceptor] = (),
        tracing: bool = True,
        settings: SleuthSettings | None = None,
        deployment_name: str | None = None,
        build_id: str | None = None,
    ) -> None:
        """`app` is the App whose activities workers serve; a function returning it defers loading
        the App until a worker is built (a client that only starts runs never loads it).
        `tracing=False` adds no `TracingInterceptor` (one the client already has stays).
        `settings` are the `SLEUTH_*` settings its workers follow (default: the environment's
        when each worker is built, as `sleuth worker` reads them).

        `deployment_name` and `build_id` put its workers in a Temporal worker deployment (over
        `SLEUTH_DEPLOYMENT_NAME` / `SLEUTH_BUILD_ID`; see `workers/versioning.py`); a worker given
        its own `deployment_config` keeps it."""
        self._tracing = tracing
        self._settings = settings
        self._deployment_name = deployment_name
        self._build_id = build_id
        self._app: App | None = app if isinstance(app, App) else None
        self._load_app: Callable[[], App] = (lambda: app) if isinstance(app, App) else app
        super().__init__(
            PLUGIN_NAME,
            data_converter=_sleuth_data_converter,
            interceptors=[*interceptors, FailureCauseInterceptor()],
            # Read when a worker is built: a client alone never imports the workflow modules.
            workflows=lambda existing: [*(existing or []), *workflow_classes.ALL_WORKFLOWS],
            activities=self._with_activities,
            workflow_runner=_with_passthroughs,
            workflow_failure_exception_types=list(FAILURE_EXCEPTION_TYPES),
        )

    @property
    def app(self) -> App:
        """The App this plugin serves, loaded on first use."""
        if self._app is None:
            self._app = self._load_app()
        return self._app

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        """The pydantic (and codec) data converter, tracing unless the client traces already, and
        a `static_summary` on every run it starts (`sleuth.workers.summaries`)."""
        config = super().configure_client(config)
        if self._tracing:
            config["interceptors"] = with_tracing(config.get("interceptors", []))
        config["interceptors"] = with_summaries(config.get("interceptors", []))
        return config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """Sleuth's workflows and activities, after checking the client's data converter; tracing
        when the client does not trace (a worker inherits its client's tracing); input errors
        logged in one line (`workers/failures.py`)."""
        client = config["client"]
        _require_sleuth_converter(client.data_converter)
        config = super().configure_worker(config)
        log_failures_in_one_line()
        client_traces = has_tracing(client.config(active_config=True).get("interceptors", []))
        if self._tracing and not client_traces:
            config["interceptors"] = with_tracing(config.get("interceptors", []))
        settings = self._settings or load_settings()
        throttle = timedelta(seconds=settings.heartbeat_throttle_seconds)
        current = config.get("max_heartbeat_throttle_interval")
        # The SDK holds heartbeats back for up to 0.8 x the heartbeat timeout; sending each timer
        # beat (every third of the timeout) keeps the server's view of a live attempt fresh, so a
        # short server restart does not declare it dead. Checkpoints never depend on it. A
        # shorter interval the worker was given stays.
        if current is None or current > throttle:
            config["max_heartbeat_throttle_interval"] = throttle
        return self._with_fleet_settings(config)

    def _with_fleet_settings(self, config: WorkerConfig) -> WorkerConfig:
        """Worker Versioning and the activity rate limits from the `SLEUTH_*` settings, where the
        worker was not given its own."""
        settings = self._settings or load_settings()
        overrides = {"deployment_name": self._deployment_name, "build_id": self._build_id}
        settings = settings.model_copy(
            update={key: value for key, value in overrides.items() if value is not None}
        )
        if config.get("deployment_config") is None and not config.get("use_worker_versioning"):
            deployment = deployment_config(settings, config["task_queue"])
            if deployment is not None:
                config["deployment_config"] = deployment
        if config.get("max_activities_per_second") is None:
            config["max_activities_per_second"] = settings.max_activities_per_second
        if config.get("max_task_queue_activities_per_second") is None:
            config["max_task_queue_activities_per_second"] = (
                settings.max_task_queue_activities_per_second
            )
        if config.get("max_task_queue_activities_per_second") is not None:
            # An eager activity goes back to its workflow's worker with the workflow task's
            # completion, past the task queue and so past the server's limit.
            config["disable_eager_activity_execution"] = True
        return config

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        """The App's MCP servers run while the worker runs: started, their tools listed once at
        start, stopped at the end (`sleuth.tools.mcp`). A replayer starts none."""
        async with self.app.mcp.running():
            await super().run_worker(worker, next)

    def _with_activities(self, existing: Sequence[Callable[..., Any]] | None) -> list[Any]:
        return [*(existing or []), *build_activities(self.app)]


def _sleuth_data_converter(existing: DataConverter | None) -> DataConverter:
    """The client's converter with pydantic payloads (in place of the default JSON ones), large
    payloads offloaded to the artifact store (`workers/payload_storage.py`) and, when a key is
    configured, Sleuth's codec."""
    if existing is None:
        return codec.data_converter()
    if existing.payload_converter_class is DefaultPayloadConverter:
        existing = dataclasses.replace(existing, payload_converter_class=PydanticPayloadConverter)
    _require_pydantic(existing)
    if existing.external_storage is None:
        storage = configured_external_storage()
        if storage is not None:
            existing = dataclasses.replace(existing, external_storage=storage)
    ours = codec.configured_codec()
    if ours is None:
        return existing
    if existing.payload_codec is not None and not isinstance(
        existing.payload_codec, codec.AESGCMCodec
    ):
        raise SleuthPluginError(
            "the client has a payload codec of its own and an encryption key is configured "
            f"({codec.KEY_ENV} / {codec.KEY_FILE_ENV}): chain the two codecs yourself, or unset "
            "the key"
        )
    encrypting = codec.encrypting(existing, ours)
    _require_encoded_failures(encrypting, "the client's")
    return encrypting


def _require_pydantic(converter: DataConverter) -> None:
    if not issubclass(converter.payload_converter_class, PydanticPayloadConverter):
        name = converter.payload_converter_class.__name__
        raise SleuthPluginError(
            f"Sleuth's workflows exchange pydantic models, but this client's payload converter "
            f"is {name}: "
            "connect it with plugins=[SleuthPlugin(app)] (its workers then inherit the plugin), "
            "or with temporalio.contrib.pydantic's pydantic_data_converter"
        )


def _require_sleuth_converter(converter: DataConverter) -> None:
    _require_pydantic(converter)
    if converter.payload_codec is None and codec.configured_codec() is not None:
        raise SleuthPluginError(
            f"an encryption key is configured ({codec.KEY_ENV} / {codec.KEY_FILE_ENV}) but this "
            "worker's client does not encrypt: connect the client with "
            "plugins=[SleuthPlugin(app)] so the worker inherits the codec"
        )
    if converter.payload_codec is not None and codec.configured_codec() is not None:
        _require_encoded_failures(converter, "this worker's client's")


def _require_encoded_failures(converter: DataConverter, whose: str) -> None:
    # Failure messages and stack traces quote prompts, tool arguments and tool output.
    if not codec.encodes_failures(converter):
        name = converter.failure_converter_class.__name__
        raise SleuthPluginError(
            f"an encryption key is configured ({codec.KEY_ENV} / {codec.KEY_FILE_ENV}) but "
            f"{whose} failure converter ({name}) stores failure messages and stack traces in "
            "plaintext: use temporalio.converter.DefaultFailureConverterWithEncodedAttributes "
            "(or a subclass), or connect the client with plugins=[SleuthPlugin(app)]"
        )


def _with_passthroughs(runner: WorkflowRunner | None) -> WorkflowRunner:
    if runner is None:
        raise SleuthPluginError("the worker has no workflow runner for SleuthPlugin to configure")
    if isinstance(runner, SandboxedWorkflowRunner):
        runner = dataclasses.replace(
            runner,
            restrictions=runner.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES),
        )
    return checking_inputs(runner)


def client_plugin(plugins: Sequence[Any]) -> SleuthPlugin | None:
    """The SleuthPlugin among a client's plugins (`client.config()["plugins"]`), if any."""
    return next((plugin for plugin in plugins if isinstance(plugin, SleuthPlugin)), None)
