"""A workflow input can never take over a worker: the probes of issue #14, one test each.

Who may start a workflow is whoever can reach the Temporal frontend (the dev server has no
authentication), so every input is untrusted: it names things the worker was configured with and
never chooses a path, URL or host; its numbers are bounded; a bad one fails the run at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.workflowservice.v1 import DescribeScheduleRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth import create_deepagent, tool
from sleuth.activities.errors import unwrap_cause
from sleuth.activities.scan_models import ScanRequest
from sleuth.apps.app import App
from sleuth.deepagent import FilesystemBackend, SandboxError, StateBackend, filesystem_tools
from sleuth.deepagent.fs import MAX_FILE_BYTES, MAX_GREP_LINE_CHARS, MAX_LISTED
from sleuth.models.base import ModelResponse, ToolCall
from sleuth.models.scripted import ModelCall, ScriptedModel, text
from sleuth.scans.sinks import SQLiteRowSink, UnknownSinkError, ok_record
from sleuth.workers.cli_worker import register_sinks
from sleuth.workers.client import connect
from sleuth.workers.codec import (
    KEY_ID_METADATA,
    AESGCMCodec,
    EncryptionKeyError,
    configured_keys,
    key_id,
    new_key,
    write_key_file,
)
from sleuth.workers.codec_server import CodecServer
from sleuth.workers.embedded import (
    EmbeddedServerError,
    ServerSettings,
    port_open,
    start_background_server,
)
from sleuth.workers.scans import start_scan
from sleuth.workers.schedules import create_scan_schedule
from sleuth.workers.worker import build_worker
from tests.helpers import browser
from tests.helpers.apps.leaky_app import PROVIDER_STYLE_KEY
from tests.helpers.apps.scan_app import build_app as build_scan_app
from tests.helpers.cli_process import popen_sleuth, run_sleuth
from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]

# -- bad inputs fail the run at once ---------------------------------------------------------

BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    # A scan's input chose where the worker writes: a shell start-up file, another store's
    # database, a relative path, any host.
    ("KnowledgeScanWorkflow", {"provider": "p", "sink": "jsonl:///root/.bashrc"}, "sink"),
    (
        "KnowledgeScanWorkflow",
        {"provider": "p", "sink": "sqlite:///root/.sleuth/stores/python-docs.sqlite"},
        "sink",
    ),
    ("KnowledgeScanWorkflow", {"provider": "p", "sink": "sqlite://relative/x.db"}, "sink"),
    ("KnowledgeScanWorkflow", {"provider": "p", "sink": "opensearch://evil:9200/i"}, "sink"),
    ("KnowledgeScanWorkflow", {"provider": "p", "scan_id": "$(touch /tmp/pwned)"}, "scan id"),
    # Bad settings hung runs forever (the workflow task was retried instead of the run failing).
    (
        "KnowledgeScanWorkflow",
        {"provider": "p", "settings": {"item_timeout_seconds": 0}},
        "item_timeout_seconds",
    ),
    (
        "KnowledgeScanWorkflow",
        {"provider": "p", "settings": {"item_max_attempts": -1}},
        "item_max_attempts",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"model": {"heartbeat_seconds": -3}}},
        "heartbeat_seconds",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"tool": {"retry": {"maximum_attempts": -1}}}},
        "maximum_attempts",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"tool": {"retry": {"backoff_coefficient": 0.5}}}},
        "backoff_coefficient",
    ),
    (
        "AgentWorkflow",
        {"agent": "a", "prompt": "p", "steps": {"model": {"start_to_close_seconds": 0}}},
        "start_to_close_seconds",
    ),
    ("DecomposeWorkflow", {"agent": "a", "task": "t", "max_depth": -1}, "max_depth"),
    ("DecomposeWorkflow", {"agent": "a", "task": "t", "max_fan_out": -2}, "max_fan_out"),
    (
        "DecomposeWorkflow",
        {"agent": "a", "task": "t", "config": {"decide": {"start_to_close_seconds": 0}}},
        "start_to_close_seconds",
    ),
    (
        "DecomposeWorkflow",
        {"agent": "a", "task": "t", "budget": {"max_tool_calls": -5}},
        "max_tool_calls",
    ),
    (
        "PipelineWorkflow",
        {"pipeline": "p", "task": "t", "config": {"stage": {"start_to_close_seconds": 0}}},
        "start_to_close_seconds",
    ),
    (
        "PipelineWorkflow",
        {"pipeline": "p", "task": "t", "config": {"heartbeat_every_seconds": -1}},
        "heartbeat_every_seconds",
    ),
    # The research node settings share the same ActivitySettings model.
    (
        "ResearchWorkflow",
        {"prompt": "p", "nodes": {"execute": {"start_to_close_seconds": -1}}},
        "start_to_close_seconds",
    ),
]


@pytest.mark.parametrize(
    ("workflow_type", "payload", "named"),
    BAD_INPUTS,
    ids=[f"{w}-{named}-{i}" for i, (w, _, named) in enumerate(BAD_INPUTS)],
)
async def test_a_bad_input_fails_the_run_at_once_naming_what_is_wrong(
    dev_env: WorkflowEnvironment, workflow_type: str, payload: dict[str, Any], named: str
) -> None:
    task_queue = str(uuid.uuid4())
    # A workflow id is user input too: the scan-id probe relies on the default (the workflow id).
    workflow_id = payload.pop("scan_id") if "scan_id" in payload else f"bad-{uuid.uuid4()}"
    # An empty App: the run must fail on the input alone, before any name is looked up.
    async with build_worker(dev_env.client, App(), task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            workflow_type, payload, id=workflow_id, task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), timeout=scaled(60))
    message = str(unwrap_cause(failure.value))
    assert named in message
    assert "unknown" not in message, "the input must be refused before any name is looked up"
    # Exactly one workflow task ran: it failed the run instead of being retried.
    history = await handle.fetch_history()
    assert (
        sum(1 for e in history.events if e.HasField("workflow_task_failed_event_attributes")) == 0
    )


# -- tools a model cannot weaponise ----------------------------------------------------------

CATASTROPHIC = "(a+)+$"
"""Exponential for a backtracking engine on 'aaaa…!': 40 characters take Python's `re` hours."""
RELEASE = threading.Event()
STEADY_CALLS: list[str] = []
STEADY_STARTED = threading.Event()


@tool
def wait_for_release(label: str) -> str:
    """Block (in a worker thread) until the test releases it."""
    STEADY_CALLS.append(label)
    STEADY_STARTED.set()
    RELEASE.wait(timeout=scaled(120))
    return f"released {label}"


def _call(call_id: str, name: str, **arguments: Any) -> ModelResponse:
    """A tool-call turn with a fixed id (stable across the run's activities)."""
    return ModelResponse(tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)])


def _step(call: ModelCall) -> int:
    return sum(1 for m in call.messages if m.role == "assistant" and m.tool_calls)


def _tool_outputs(call: ModelCall) -> dict[str, str]:
    return {m.name or "": m.content for m in call.messages if m.role == "tool"}


def _regex_turn(call: ModelCall) -> ModelResponse:
    plan = [
        _call("r0", "write_file", path="a.txt", content="a" * 40 + "!"),
        _call("r1", "grep", pattern=CATASTROPHIC),
    ]
    step = _step(call)
    return plan[step] if step < len(plan) else text(f"grep: {_tool_outputs(call)['grep']}")


def _steady_turn(call: ModelCall) -> ModelResponse:
    if _step(call) == 0:
        return _call("s0", "wait_for_release", label="steady")
    return text(_tool_outputs(call)["wait_for_release"])


def _tool_app() -> App:
    app = App()
    app.agent(
        "regex",
        lambda: create_deepagent(
            model=ScriptedModel(responder=_regex_turn), enable_filesystem=True, grounding=False
        ),
    )
    app.agent(
        "steady",
        lambda: create_deepagent(
            model=ScriptedModel(responder=_steady_turn), tools=[wait_for_release], grounding=False
        ),
    )
    return app


async def test_a_catastrophic_grep_leaves_other_runs_on_the_worker_unaffected(
    dev_env: WorkflowEnvironment,
) -> None:
    RELEASE.clear()
    STEADY_STARTED.clear()
    STEADY_CALLS.clear()
    task_queue = str(uuid.uuid4())
    client = dev_env.client
    async with build_worker(client, _tool_app(), task_queue=task_queue):
        # A run whose tool call is in flight and must keep heartbeating meanwhile.
        steady = await client.start_workflow(
            "AgentWorkflow",
            {"agent": "steady", "prompt": "wait", "steps": {"tool": {"heartbeat_seconds": 5}}},
            id=f"steady-{uuid.uuid4()}",
            task_queue=task_queue,
            result_type=dict,
        )
        assert await asyncio.to_thread(STEADY_STARTED.wait, 60)
        regex = await client.start_workflow(
            "AgentWorkflow",
            {"agent": "regex", "prompt": "search"},
            id=f"regex-{uuid.uuid4()}",
            task_queue=task_queue,
            result_type=dict,
        )
        regex_outcome = await asyncio.wait_for(regex.result(), timeout=scaled(120))
        RELEASE.set()
        steady_outcome = await asyncio.wait_for(steady.result(), timeout=scaled(120))
    assert regex_outcome["message"] == "grep: []"
    assert steady_outcome["message"] == "released steady"
    assert STEADY_CALLS == ["steady"], "the in-flight tool call ran exactly once"
    history = await steady.fetch_history()
    assert not [e for e in history.events if e.HasField("activity_task_timed_out_event_attributes")]


def test_grep_refuses_what_re2_cannot_run_in_linear_time() -> None:
    grep = {t.name: t for t in filesystem_tools(StateBackend({"a.txt": "aa aa"}))}["grep"]
    with pytest.raises(ValueError, match="RE2 syntax: no backreferences"):
        grep.func(r"(a)\1")
    assert grep.func("a{2}") == [{"path": "a.txt", "line": 1, "text": "aa aa"}]


def test_file_reads_writes_listings_and_grep_output_are_capped(tmp_path: Path) -> None:
    backend = FilesystemBackend(tmp_path / "ws")
    tools = {t.name: t for t in filesystem_tools(backend)}
    with pytest.raises(ValueError, match="limited to 1,000,000 bytes"):
        tools["write_file"].func("big.txt", "x" * (MAX_FILE_BYTES + 1))
    (tmp_path / "ws" / "huge.log").write_bytes(b"y" * (MAX_FILE_BYTES + 10))
    with pytest.raises(ValueError, match="limited to 1,000,000 bytes"):
        tools["read_file"].func("huge.log")
    tools["write_file"].func("lines.txt", ("z" * 999 + "\n") * 900)
    shown = tools["read_file"].func("lines.txt")
    assert len(shown) < 101_000 and "read on with offset=100" in shown
    for n in range(MAX_LISTED + 5):
        tools["write_file"].func(f"many/{n:05d}.txt", "line\n")
    listed = tools["glob"].func("many/*")
    assert len(listed) == MAX_LISTED + 1 and listed[-1].startswith("... and 5 more")
    tools["write_file"].func("wide.txt", "q" * 5000)
    [match] = tools["grep"].func("q+", path="wide.txt")
    assert len(match["text"]) == MAX_GREP_LINE_CHARS


# -- FilesystemBackend follows no symlink, with no check-then-use race -----------------------


def _sandbox(tmp_path: Path) -> tuple[FilesystemBackend, Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    return FilesystemBackend(root), root, outside


def test_a_symlink_swapped_in_after_the_path_was_walked_leads_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, root, outside = _sandbox(tmp_path)
    real_open = os.open

    def open_then_swap(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, *args, **kwargs)
        if path == "sub" and kwargs.get("dir_fd") is not None:
            # The attacker's move, right after the backend reached `sub`: `sub` becomes a link out.
            (root / "sub").rename(root / "sub-moved")
            (root / "sub").symlink_to(outside)
        return fd

    monkeypatch.setattr(os, "open", open_then_swap)
    backend.write("sub/note.txt", "pwned?")
    monkeypatch.setattr(os, "open", real_open)
    assert list(outside.iterdir()) == []
    assert (root / "sub-moved" / "note.txt").read_text() == "pwned?"
    with pytest.raises(SandboxError, match="'sub' is a symlink"):
        backend.read("sub/note.txt")


def test_a_symlink_flipping_during_writes_never_lets_one_out(tmp_path: Path) -> None:
    backend, root, outside = _sandbox(tmp_path)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                (root / "sub").rename(root / "sub-real")
                (root / "sub").symlink_to(outside)
                (root / "sub").unlink()
                (root / "sub-real").rename(root / "sub")

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        for n in range(300):
            with contextlib.suppress(SandboxError, FileNotFoundError):
                backend.write(f"sub/f{n}.txt", "x")
    finally:
        stop.set()
        flipper.join()
    assert list(outside.iterdir()) == []


# -- secrets stay out of history, rows and output --------------------------------------------

GATEWAY_KEY = "gw-live-4f9a1c7e2b8d6053aa"


def _sleuth(
    env: WorkflowEnvironment, *args: str, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    return run_sleuth(
        [*args],
        env={
            **os.environ,
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "PYTHONPATH": str(ROOT),
            **extra_env,
        },
        timeout=scaled(300),
    )


@pytest.mark.slow
async def test_a_gateway_echoing_the_key_leaves_no_key_in_history_rows_or_output(
    dev_env: WorkflowEnvironment, sleuth_home: Path
) -> None:
    secrets = [GATEWAY_KEY, PROVIDER_STYLE_KEY]
    scanned = _sleuth(
        dev_env, "scan", "numbers", "--app", "tests.helpers.apps.leaky_app:app", "--task-queue",
        str(uuid.uuid4()), "--scan-id", "leaky", "--follow", GATEWAY_API_KEY=GATEWAY_KEY,
    )  # fmt: skip
    assert scanned.returncode == 0, scanned.stderr
    assert "3 failed" in scanned.stdout and "401 from gateway" in scanned.stdout
    table = _sleuth(dev_env, "rows", "leaky")
    as_json = _sleuth(dev_env, "rows", "leaky", "--json")
    assert "401 from gateway" in as_json.stdout and "[REDACTED]" in as_json.stdout
    for output in (scanned.stdout, scanned.stderr, table.stdout, as_json.stdout):
        assert not [s for s in secrets if s in output], output

    rows = b"".join(p.read_bytes() for p in sleuth_home.glob("rows.sqlite*"))
    assert b"401 from gateway" in rows
    assert not [s for s in secrets if s.encode() in rows]

    history = await dev_env.client.get_workflow_handle("scan-leaky").fetch_history()
    text_of_history = history.to_json()
    assert "401 from gateway" in text_of_history
    assert not [s for s in secrets if s in text_of_history]


async def test_a_sink_url_with_credentials_is_refused_without_echoing_them(
    dev_env: WorkflowEnvironment,
) -> None:
    url = "opensearch://admin:hunter2-Pa55word@search.internal:9200/rows"
    with pytest.raises(ValueError) as refused:
        ScanRequest(provider="p", sink=url)
    assert "a URL with credentials" in str(refused.value)
    assert "hunter2" not in str(refused.value)
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, App(), task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            "KnowledgeScanWorkflow",
            {"provider": "p", "sink": url},
            id=f"creds-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), timeout=scaled(60))
    message = str(unwrap_cause(failure.value))
    assert "Configure the sink on the worker" in message and "hunter2" not in message


# -- encryption at rest ----------------------------------------------------------------------


def test_the_codec_round_trips_rotates_keys_and_refuses_tampering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = base64.b64decode(new_key()), base64.b64decode(new_key())
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'{"prompt": "secret plan"}')
    sealed_by_old = AESGCMCodec([old]).encrypt(payload)
    assert b"secret plan" not in sealed_by_old.SerializeToString()
    assert sealed_by_old.metadata[KEY_ID_METADATA] == key_id(old).encode()

    rotated = AESGCMCodec([new, old])
    assert rotated.decrypt(sealed_by_old) == payload, "old keys still decrypt"
    assert rotated.encrypt(payload).metadata[KEY_ID_METADATA] == key_id(new).encode()
    with pytest.raises(EncryptionKeyError, match="not configured"):
        AESGCMCodec([new]).decrypt(sealed_by_old)
    tampered = Payload()
    tampered.CopyFrom(sealed_by_old)
    tampered.data = tampered.data[:-1] + bytes([tampered.data[-1] ^ 1])
    with pytest.raises(EncryptionKeyError, match="altered"):
        rotated.decrypt(tampered)

    key_file = write_key_file(tmp_path / "keys" / "sleuth.key")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY_FILE", str(key_file))
    assert len(configured_keys()) == 1
    key_file.chmod(0o644)
    with pytest.raises(EncryptionKeyError, match="readable by others"):
        configured_keys()
    monkeypatch.delenv("SLEUTH_ENCRYPTION_KEY_FILE")
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", "too-short")
    with pytest.raises(EncryptionKeyError, match="32 random bytes in base64"):
        configured_keys()


def _post(url: str, body: bytes, origin: str | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if origin:
        request.add_header("Origin", origin)
    try:
        with urllib.request.urlopen(request, timeout=scaled(30)) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_the_codec_server_round_trips_over_http_with_cors_for_the_web_ui() -> None:
    codec = AESGCMCodec([base64.b64decode(new_key())])
    ui = "http://localhost:8233"
    server = CodecServer("127.0.0.1", 0, codec, [ui])
    server.start_in_thread()
    try:
        plain = Payloads(payloads=[Payload(metadata={"encoding": b"json/plain"}, data=b'"hi"')])
        status, headers, body = _post(
            f"{server.url}/encode", json_format.MessageToJson(plain).encode(), origin=ui
        )
        assert status == 200 and headers["Access-Control-Allow-Origin"] == ui
        encoded = json_format.Parse(body, Payloads())
        assert encoded.payloads[0].metadata["encoding"] == b"binary/encrypted"
        status, _, body = _post(f"{server.url}/decode", body)
        assert status == 200 and json_format.Parse(body, Payloads()) == plain

        preflight = urllib.request.Request(f"{server.url}/decode", method="OPTIONS")
        preflight.add_header("Origin", "http://evil.example")
        with urllib.request.urlopen(preflight, timeout=scaled(30)) as response:
            assert "Access-Control-Allow-Origin" not in response.headers
        assert _post(f"{server.url}/decode", b"not json")[0] == 400
    finally:
        server.shutdown()
        server.server_close()


def _wait_for_port(port: int) -> bool:
    """Whether something listens on `port` within a minute (the codec process starts on its own)."""
    for _ in range(600):
        if port_open("127.0.0.1", port):
            return True
        threading.Event().wait(0.1)
    return False


def _start_server(tmp_path: Path, db_file: Path, **env: str) -> tuple[subprocess.Popen[str], int]:
    """`sleuth server` in the foreground on free ports (gRPC P, Web UI P+1, codec P+2)."""
    port = free_ports(1, 2)
    process = popen_sleuth(
        ["server", "--port", str(port), "--ui-port", str(port + 1), "--db-file", str(db_file)],
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith("Ctrl-C stops it."):
            return process, port
    process.kill()
    raise AssertionError("`sleuth server` never became ready:\n" + "".join(seen))


def _stop_server(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=scaled(60))


async def _start_with_prompt(port: int, prompt: str) -> str:
    client = await connect(f"localhost:{port}")
    workflow_id = f"at-rest-{uuid.uuid4()}"
    await client.start_workflow(
        "AgentWorkflow", {"agent": "nobody", "prompt": prompt}, id=workflow_id, task_queue="none"
    )
    return workflow_id


def _database_bytes(db_file: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db_file.parent.glob(db_file.name + "*"))


@pytest.mark.slow
async def test_with_a_key_the_database_holds_no_plaintext_and_the_web_ui_decrypts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"PLAINTEXT-PROMPT-{uuid.uuid4().hex}"
    key = new_key()

    # Without a key the prompt is in the server's file as it was typed: the probe's finding.
    plain_db = tmp_path / "plain" / "temporal.sqlite"
    process, port = _start_server(tmp_path, plain_db)
    try:
        await _start_with_prompt(port, marker)
    finally:
        _stop_server(process)
    assert marker.encode() in _database_bytes(plain_db)

    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", key)
    sealed_db = tmp_path / "sealed" / "temporal.sqlite"
    process, port = _start_server(tmp_path, sealed_db, SLEUTH_ENCRYPTION_KEY=key)
    try:
        workflow_id = await _start_with_prompt(port, marker)
        # The Web UI is pointed at the codec server, which decrypts what the server stored.
        ui = f"http://localhost:{port + 1}"
        with urllib.request.urlopen(f"{ui}/api/v1/settings", timeout=scaled(30)) as response:
            codec_endpoint = json.loads(response.read())["Codec"]["Endpoint"]
        assert codec_endpoint == f"http://localhost:{port + 2}"
        raw = await Client.connect(f"localhost:{port}")
        history = await raw.get_workflow_handle(workflow_id).fetch_history()
        stored = history.events[0].workflow_execution_started_event_attributes.input
        assert marker.encode() not in stored.SerializeToString()
        status, headers, body = _post(
            f"{codec_endpoint}/decode", json_format.MessageToJson(stored).encode(), origin=ui
        )
        assert status == 200 and headers["Access-Control-Allow-Origin"] == ui
        assert marker.encode() in json_format.Parse(body, Payloads()).payloads[0].data
    finally:
        _stop_server(process)
    assert not [p for p in sealed_db.parent.glob("*") if marker.encode() in p.read_bytes()], (
        "no plaintext prompt in the database, its journals or the log"
    )


@pytest.mark.slow
@pytest.mark.skipif(browser.CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
async def test_the_web_ui_shows_an_encrypted_input_decrypted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"UI-PROMPT-{uuid.uuid4().hex}"
    key = new_key()
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", key)
    process, port = _start_server(tmp_path, tmp_path / "temporal.sqlite", SLEUTH_ENCRYPTION_KEY=key)
    try:
        workflow_id = await _start_with_prompt(port, marker)
        raw = await Client.connect(f"localhost:{port}")
        history = await raw.get_workflow_handle(workflow_id).fetch_history()
        stored = history.events[0].workflow_execution_started_event_attributes.input
        assert marker.encode() not in stored.SerializeToString(), "the server holds ciphertext"
        page_url = f"http://127.0.0.1:{port + 1}/namespaces/default/workflows/{workflow_id}"
        async with browser.open_page(page_url) as page:
            shown = await page.wait_for_text(marker)
        assert "AgentWorkflow" in shown
    finally:
        _stop_server(process)


# -- private files, one server per database --------------------------------------------------


@pytest.mark.slow
async def test_server_files_are_private_and_a_second_server_on_the_database_is_refused(
    sleuth_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_ports(1, 2)
    monkeypatch.setenv("SLEUTH_EMBEDDED_ADDRESS", f"localhost:{port}")
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", new_key())
    record = await start_background_server(ServerSettings(port=port, ui_port=port + 1))
    database = Path(record.database or "")
    # With a key, the detached server's Web UI decrypts through a detached codec server.
    assert record.codec_pid is not None
    with urllib.request.urlopen(f"{record.ui_url}/api/v1/settings", timeout=scaled(30)) as response:
        assert json.loads(response.read())["Codec"]["Endpoint"] == f"http://localhost:{port + 2}"
    assert await asyncio.to_thread(_wait_for_port, port + 2)
    rows = SQLiteRowSink()
    rows.put(ok_record("s", "i", "I", {"a": 1}))
    modes = {}
    for path in sleuth_home.iterdir():
        # SQLite's rollback journal (`temporal.sqlite-journal`) comes and goes as the server
        # writes: a file listed a moment ago may be gone.
        with contextlib.suppress(FileNotFoundError):
            modes[path.name] = stat.S_IMODE(path.stat().st_mode)
    assert stat.S_IMODE(sleuth_home.stat().st_mode) == 0o700
    assert modes["temporal.sqlite"] == 0o600 and modes["temporal.log"] == 0o600
    assert modes["temporal.pid"] == 0o600 and modes["rows.sqlite"] == 0o600
    assert {name: mode for name, mode in modes.items() if mode & 0o077} == {}

    # The lock is held by the detached server itself: the command that started it is long done.
    other = free_ports(1)
    with pytest.raises(EmbeddedServerError, match="another Temporal server .* uses"):
        await start_background_server(ServerSettings(port=other, ui_port=other + 1))
    foreground = run_sleuth(["server", "--port", str(other), "--ui-port", str(other + 1), "--db-file", str(database)], env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=scaled(120))  # fmt: skip
    assert foreground.returncode == 1
    assert f"another Temporal server (pid {record.pid}) uses {database}" in foreground.stderr
    assert not port_open("127.0.0.1", other)


async def test_workers_and_schedules_built_from_the_cli_client_encrypt_too(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", new_key())
    client = await connect(dev_env.client.service_client.config.target_host)
    task_queue = str(uuid.uuid4())
    request = ScanRequest(provider="numbers", scan_id=f"sealed-{uuid.uuid4().hex[:8]}")
    async with build_worker(client, build_scan_app(3), task_queue=task_queue):
        handle = await start_scan(client, request, task_queue=task_queue)
        outcome = await asyncio.wait_for(handle.result(), timeout=scaled(120))
    assert outcome.rows_written == 3, "the worker decrypts what the client encrypted"
    # What the server holds, read without the key: ciphertext everywhere.
    history = await dev_env.client.get_workflow_handle(handle.id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.input.payloads[0].metadata["encoding"] == b"binary/encrypted"
    results = [
        e.activity_task_completed_event_attributes.result.payloads[0]
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
    ]
    assert results and {p.metadata["encoding"] for p in results} == {b"binary/encrypted"}

    name = f"sealed-{uuid.uuid4().hex[:8]}"
    await create_scan_schedule(client, name, request, cron="0 2 * * *", task_queue=task_queue)
    try:
        described = await dev_env.client.workflow_service.describe_schedule(
            DescribeScheduleRequest(namespace="default", schedule_id=name)
        )
        action_input = described.schedule.action.start_workflow.input.payloads[0]
        assert action_input.metadata["encoding"] == b"binary/encrypted"
        assert b"numbers" not in action_input.data
    finally:
        await client.get_schedule_handle(name).delete()


def test_worker_configured_sinks_stay_inside_the_allowed_folders(
    sleuth_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App()
    register_sinks(app, [f"audit=jsonl://{sleuth_home}/exports/audit.jsonl"])
    assert app.get_sink("audit").location == f"{sleuth_home}/exports/audit.jsonl"
    for url, reason in [
        (f"jsonl://{tmp_path}/elsewhere.jsonl", "must lie inside $SLEUTH_HOME"),
        (f"sqlite://{sleuth_home}/stores/python-docs.sqlite", "must lie inside $SLEUTH_HOME"),
        (f"sqlite://{sleuth_home}/temporal.sqlite", "must lie inside $SLEUTH_HOME"),
        ("sqlite://relative/x.db", "three slashes"),
        (f"jsonl://{sleuth_home}/../escape.jsonl", "must lie inside $SLEUTH_HOME"),
    ]:
        with pytest.raises(UnknownSinkError, match=re.escape(reason)):
            register_sinks(App(), [f"bad={url}"])
    # Credentials configured on the worker never reach memos, outcomes or CLI output.
    register_sinks(app, ["search=opensearch://admin:s3cret-Pass@search:9200/rows"])
    assert app.get_sink("search").location == "http://[REDACTED]@search:9200/rows"
    monkeypatch.setenv("SLEUTH_SINK_DIRS", str(tmp_path / "shared"))
    register_sinks(app, [f"shared=jsonl://{tmp_path}/shared/rows.jsonl"])
    assert stat.S_IMODE((tmp_path / "shared").stat().st_mode) == 0o700
