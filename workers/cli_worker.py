"""`sleuth worker`: serve an App's workflows and activities until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import signal
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import WorkerDeploymentVersion

from sleuth.apps.app import App
from sleuth.runtime.errors import MissingFileError, NotAvailableError
from sleuth.runtime.settings import SleuthSettings, load_settings, parse_sink_settings
from sleuth.scans.sinks import open_sink_url
from sleuth.workers.embedded import connect_temporal
from sleuth.workers.plugin import SleuthPlugin
from sleuth.workers.session import add_session_arguments, cli_app, resolve_task_queue
from sleuth.workers.telemetry import metrics_address, metrics_runtime
from sleuth.workers.versioning import set_current_build
from sleuth.workers.worker import build_worker


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="run a worker for an App until Ctrl-C",
        description=(
            "Serve every Sleuth workflow and the App's activities on a task queue. Starts the "
            "embedded Temporal server first if nothing answers at localhost:7233."
        ),
    )
    add_session_arguments(parser)
    parser.add_argument(
        "--config",
        type=Path,
        metavar="AGENTS.YAML",
        help="also register the agents declared in this YAML file",
    )
    parser.add_argument(
        "--sink",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="serve a row sink under NAME for scans: sqlite:///path or jsonl:///path (inside "
        "$SLEUTH_HOME or $SLEUTH_SINK_DIRS) or opensearch://host:9200/index; repeatable",
    )
    versioning = parser.add_argument_group(
        "worker versioning",
        "Join a Temporal worker deployment, so a rolling upgrade never hands a run to a build "
        "that cannot finish it (docs/deploy.md). The first build of a deployment becomes its "
        "current build by itself; later builds serve new runs once promoted.",
    )
    versioning.add_argument(
        "--versioning",
        action="store_true",
        default=None,
        help="use Worker Versioning with the default deployment name and build id "
        "($SLEUTH_WORKER_VERSIONING)",
    )
    versioning.add_argument(
        "--deployment-name",
        metavar="NAME",
        help="the worker deployment to join (default: $SLEUTH_DEPLOYMENT_NAME, else the task "
        "queue); implies --versioning",
    )
    versioning.add_argument(
        "--build-id",
        metavar="ID",
        help="this worker's build (default: $SLEUTH_BUILD_ID, else Sleuth's version); implies "
        "--versioning",
    )
    versioning.add_argument(
        "--promote",
        action="store_true",
        help="make this build the deployment's current one as soon as it polls: new runs go to "
        "it, runs pinned to older builds stay there",
    )
    parser.set_defaults(func=run_worker_command)


def worker_settings(args: argparse.Namespace) -> SleuthSettings:
    """The `SLEUTH_*` settings with `sleuth worker`'s own flags over them."""
    flags = {
        "worker_versioning": args.versioning,
        "deployment_name": args.deployment_name,
        "build_id": args.build_id,
    }
    return load_settings().model_copy(
        update={name: value for name, value in flags.items() if value is not None}
    )


def register_sinks(app: App, settings: list[str]) -> None:
    """Register the `--sink NAME=URL` sinks in `app`: scans then name them."""
    for name, url in parse_sink_settings(",".join(settings)).items():
        app.sink(name, open_sink_url(url))


def load_agent_config(app: App, path: Path) -> None:
    """Register the agents a YAML file declares (`sleuth.apps.yaml_agents`) into `app`."""
    try:
        yamlconfig = importlib.import_module("sleuth.apps.yaml_agents")
    except ModuleNotFoundError as exc:
        if exc.name != "sleuth.apps.yaml_agents":
            raise
        raise NotAvailableError(
            f"--config {path}: YAML agent configs are not supported by this installation "
            "(sleuth.apps.yaml_agents is missing); declare the agents in your --app module instead"
        ) from None
    if not path.is_file():
        raise MissingFileError(f"--config {path}: no such file")
    yamlconfig.load_agents_into(app, path)


def describe_app(app: App) -> str:
    """One line naming what the App registers, so a person can check the worker serves it."""
    kinds = {
        "research": app.research_names,
        "agents": app.agent_names,
        "providers": app.provider_names,
        "datastores": app.datastore_names,
        "pipelines": app.pipeline_names,
        "sinks": app.sink_names,
    }
    listed = [f"{kind}: {', '.join(names)}" for kind, names in kinds.items() if names]
    return "; ".join(listed) or "the app registers no research configs, agents or providers yet"


async def run_worker_command(args: argparse.Namespace) -> int:
    app = cli_app(args.app)
    if args.config is not None:
        load_agent_config(app, args.config)
    register_sinks(app, args.sink)
    client = await connect_temporal(plugins=[SleuthPlugin(app)], runtime=metrics_runtime())
    address = client.service_client.config.target_host
    task_queue = resolve_task_queue(args.task_queue, app)
    settings = worker_settings(args)
    worker = build_worker(client, task_queue=task_queue, settings=settings)
    deployment = worker.config(active_config=True).get("deployment_config")

    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop_requested.set)
    print(
        f"sleuth worker: serving app {app.name!r} on task queue {task_queue!r} at {address} "
        f"(Ctrl-C stops)",
        flush=True,
    )
    print(f"  {describe_app(app)}", flush=True)
    metrics = metrics_address()
    if metrics is not None:
        print(f"  Prometheus metrics: http://{metrics}/metrics", flush=True)
    if deployment is not None:
        version = deployment.version
        print(
            f"  worker deployment {version.deployment_name!r}, build {version.build_id!r} "
            f"({settings.versioning_behavior} runs)",
            flush=True,
        )
    run_task = asyncio.create_task(worker.run())
    promote_task = None
    if deployment is not None:
        promote_task = asyncio.create_task(
            _promote(client, deployment.version, only_if_none=not args.promote)
        )
    stop_task = asyncio.create_task(stop_requested.wait())
    await asyncio.wait({run_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    if promote_task is not None:
        promote_task.cancel()
    if run_task.done():
        stop_task.cancel()
        run_task.result()
        return 1
    print("sleuth worker: stopping (running activities get time to finish)…", flush=True)
    await worker.shutdown()
    await run_task
    print("sleuth worker: stopped.", flush=True)
    return 0


async def _promote(client: Client, version: WorkerDeploymentVersion, *, only_if_none: bool) -> None:
    """Make this worker's build current (`--promote`), or only when its deployment has none."""
    try:
        changed = await set_current_build(client, version, only_if_none=only_if_none)
    except Exception as exc:  # the worker serves its pinned runs even so
        print(
            f"sleuth worker: could not make build {version.build_id!r} current: {exc}", flush=True
        )
        return
    if changed:
        print(
            f"sleuth worker: build {version.build_id!r} is now the current build of "
            f"{version.deployment_name!r}: new runs start on it",
            flush=True,
        )
