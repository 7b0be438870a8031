"""A workflow input can never take over a worker: the probes of issue #14, one test each.

Who may start a workflow is whoever can reach the Temporal frontend (the dev server has no
authentication), so every input is untrusted: it names things the worker was configured with and
never chooses a path, URL or host; its numbers are bounded; a bad one fails the run at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from activities.errors import unwrap_cause
from activities.scan_models import ScanRequest
from sleuth import create_deepagent, tool
from sleuth.app import App
from sleuth.deepagent import FilesystemBackend, SandboxError, StateBackend, filesystem_tools
from sleuth.deepagent.fs import MAX_FILE_BYTES
from sleuth.models.base import ModelResponse, ToolCall
from sleuth.models.scripted import ModelCall, ScriptedModel, text
from sleuth.tools import MAX_TOOL_OUTPUT_CHARS, Tool
from tests.apps.leaky_app import PROVIDER_STYLE_KEY
from workers.worker import build_worker

ROOT = Path(__file__).resolve().parent.parent

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
            await asyncio.wait_for(handle.result(), timeout=60)
    message = str(unwrap_cause(failure.value))
    assert named in message
    assert "unknown" not in message, "the input must be refused before any name is looked up"
    # Exactly one workflow task ran: it failed the run instead of being retried.
    history = await handle.fetch_history()
    assert sum(1 for e in history.events if e.HasField("workflow_task_failed_event_attributes")) == 0


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
    RELEASE.wait(timeout=120)
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
        regex_outcome = await asyncio.wait_for(regex.result(), timeout=120)
        RELEASE.set()
        steady_outcome = await asyncio.wait_for(steady.result(), timeout=120)
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


def test_file_reads_writes_and_tool_output_are_capped(tmp_path: Path) -> None:
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
    loud = Tool(lambda: "w" * (MAX_TOOL_OUTPUT_CHARS * 3), name="loud")
    result = asyncio.run(loud.invoke({}))
    assert len(result.content) < MAX_TOOL_OUTPUT_CHARS + 100
    assert result.content.endswith(f"[output cut: {MAX_TOOL_OUTPUT_CHARS * 2:,} more characters]")


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


def _sleuth(env: WorkflowEnvironment, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from workers.cli import main; main()", *args],
        env={
            **os.environ,
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "PYTHONPATH": str(ROOT),
            **extra_env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
async def test_a_gateway_echoing_the_key_leaves_no_key_in_history_rows_or_output(
    dev_env: WorkflowEnvironment, sleuth_home: Path
) -> None:
    secrets = [GATEWAY_KEY, PROVIDER_STYLE_KEY]
    scanned = _sleuth(
        dev_env, "scan", "numbers", "--app", "tests.apps.leaky_app:app", "--task-queue",
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
            await asyncio.wait_for(handle.result(), timeout=60)
    message = str(unwrap_cause(failure.value))
    assert "Configure the sink on the worker" in message and "hunter2" not in message
