"""No payload can wedge a run: large workspace files are claim-checked, large payloads offloaded,
workspace quotas refuse with tool errors, and a payload too large even so fails its step at once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment

from sleuth import App, create_deepagent
from sleuth.activities.agent_models import AgentRequest
from sleuth.agent.state import LoopState
from sleuth.deepagent import FilesystemBackend, StateBackend, WorkspaceQuota, filesystem_tools
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.runtime.artifacts import default_artifact_store, get_json
from sleuth.workers.payload_storage import PAYLOAD_TOO_LARGE
from sleuth.workers.plugin import SleuthPlugin
from sleuth.workers.worker import build_worker
from sleuth.workflows import AgentWorkflow

FILES = 6
FILE_CHARS = 900_000
"""Six files of ~0.9 MB: within the per-file cap, 5.4 MB together."""
RUN_LIMIT_SECONDS = 120
"""Only a bound so a wedged run fails the test instead of hanging it."""


def six_files(call: ModelCall):
    written = sum(1 for m in call.messages if m.role == "tool")
    if written < FILES:
        content = f"file {written}\n" + str(written) * FILE_CHARS
        return tool_call("write_file", {"path": f"data/f{written}.txt", "content": content})
    return text(f"wrote {FILES} files")


async def plugin_client(env: WorkflowEnvironment, app: App) -> Client:
    """A client connected as `sleuth worker` connects: through the plugin, so its workers offload."""
    return await Client.connect(
        env.client.service_client.config.target_host, plugins=[SleuthPlugin(app)]
    )


async def run(client: Client, agent: str) -> tuple[WorkflowHandle, object]:
    task_queue = str(uuid.uuid4())
    async with build_worker(client, task_queue=task_queue):
        handle = await client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent=agent, prompt="go"),
            id=f"payloads-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        try:
            return handle, await asyncio.wait_for(handle.result(), RUN_LIMIT_SECONDS)
        except WorkflowFailureError as exc:
            return handle, exc


async def history_payloads(handle: WorkflowHandle) -> list[Payload]:
    found: list[Payload] = []

    def collect(message) -> None:  # type: ignore[no-untyped-def]
        for descriptor, value in message.ListFields():
            if descriptor.type != descriptor.TYPE_MESSAGE:
                continue
            if hasattr(value, "ListFields"):
                values = [value]
            elif hasattr(value, "keys"):
                values = list(value.values())
            else:
                values = list(value)
            for item in values:
                if isinstance(item, Payload):
                    found.append(item)
                elif hasattr(item, "ListFields"):
                    collect(item)

    async for event in handle.fetch_history_events():
        collect(event)
    return found


async def test_six_one_megabyte_files_complete_durably(dev_env: WorkflowEnvironment) -> None:
    app = App(name="six-files")
    app.agent(
        "writer",
        lambda: create_deepagent(
            model=ScriptedModel(responder=six_files), enable_filesystem=True, grounding=False
        ),
    )
    handle, outcome = await run(await plugin_client(dev_env, app), "writer")
    assert not isinstance(outcome, BaseException), outcome
    assert outcome.message == f"wrote {FILES} files"  # type: ignore[attr-defined]

    # The files are in the artifact store, by reference in the state; every one reads back.
    store = default_artifact_store()
    state = LoopState.model_validate(get_json(store, outcome.state_ref))  # type: ignore[attr-defined]
    layer = state.layers["filesystem"]
    assert layer["files"] == {} and len(layer["refs"]) == FILES
    restored = StateBackend(store=store)
    restored.load_state(layer)
    assert restored.read("data/f5.txt").startswith("file 5\n5555")

    # No payload in the history comes near Temporal's limits: the large ones were offloaded.
    payloads = await history_payloads(handle)
    largest = max(p.ByteSize() for p in payloads)
    assert largest < 512 * 1024, f"a {largest:,}-byte payload stayed in the history"


async def test_a_payload_too_large_even_offloaded_fails_its_step_at_once(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_MAX_PAYLOAD_BYTES", str(1024 * 1024))
    app = App(name="huge-answer")
    app.agent(
        "huge",
        lambda: create_deepagent(
            model=ScriptedModel(responder=lambda call: text("a" * 1_500_000)), grounding=False
        ),
    )
    handle, outcome = await run(await plugin_client(dev_env, app), "huge")
    assert isinstance(outcome, WorkflowFailureError)
    assert isinstance(outcome.cause, ActivityError)
    error = outcome.cause.cause
    assert isinstance(error, ApplicationError) and error.type == PAYLOAD_TOO_LARGE
    assert error.non_retryable
    assert (
        "activity agent.model_turn" in str(error)
        and "AgentWorkflow" in str(error)
        and "SLEUTH_MAX_PAYLOAD_BYTES" in str(error)
    )
    attempts = [
        e.activity_task_started_event_attributes.attempt
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert attempts and set(attempts) == {1}, "no step was retried"


QUOTA = WorkspaceQuota(max_bytes=10_000, max_files=3, max_depth=4, max_path_chars=80)


async def test_quota_refusals_are_tool_errors_the_model_sees() -> None:
    script = [
        tool_call("write_file", path="a.md", content="x" * 6000),
        tool_call("write_file", path="b.md", content="y" * 6000),
        tool_call("write_file", path="b.md", content="y" * 10),
        tool_call("write_file", path="c.md", content="z"),
        tool_call("write_file", path="d.md", content="w"),
        tool_call("write_file", path="a/b/c/d/e/f.md", content="deep"),
        tool_call("write_file", path="n" * 100, content="long"),
        text("done"),
    ]
    model = ScriptedModel(script)
    backend = StateBackend(quota=QUOTA)
    agent = create_deepagent(model=model, backend=backend, grounding=False)
    result = await agent.arun("write")
    assert result.message == "done"
    seen = [
        next(m.content for m in reversed(call.messages) if m.role == "tool")
        for call in model.calls[1:]
    ]
    assert "wrote" in seen[0]
    assert "SLEUTH_WORKSPACE_MAX_BYTES" in seen[1] and "12,000 bytes" in seen[1]
    assert "wrote" in seen[2] and "wrote" in seen[3]
    assert "SLEUTH_WORKSPACE_MAX_FILES" in seen[4]
    assert "SLEUTH_WORKSPACE_MAX_DEPTH" in seen[5] and "5 folders deep" in seen[5]
    assert "SLEUTH_WORKSPACE_MAX_PATH_CHARS" in seen[6]
    assert backend.paths() == ["a.md", "b.md", "c.md"]
    failed = [e for e in result.state.evidence if e.tool == "write_file" and not e.success]
    assert len(failed) == 4


async def test_a_path_3000_folders_deep_is_refused_and_listing_stays_bounded(
    tmp_path: Path,
) -> None:
    deep = "/".join(["d"] * 3000) + "/x.txt"
    for backend in (StateBackend(), FilesystemBackend(tmp_path / "ws")):
        tools = {t.name: t for t in filesystem_tools(backend)}
        await tools["write_file"].invoke({"path": "notes/plan.md", "content": "step one"})
        refused = await tools["write_file"].invoke({"path": deep, "content": "deep"})
        assert not refused.ok and "SLEUTH_WORKSPACE_MAX_PATH_CHARS" in refused.content
        flat_deep = "/".join(["d"] * 40) + "/x.txt"
        refused = await tools["write_file"].invoke({"path": flat_deep, "content": "deep"})
        assert not refused.ok and "SLEUTH_WORKSPACE_MAX_DEPTH" in refused.content
        assert (await tools["ls"].invoke({})).content == '["notes/"]'
        assert "notes/plan.md" in (await tools["glob"].invoke({"pattern": "**/*.md"})).content
        grep = await tools["grep"].invoke({"pattern": "step"})
        assert grep.ok and "notes/plan.md" in grep.content


def test_a_tree_deeper_than_the_quota_made_outside_the_tools_is_not_walked(
    tmp_path: Path,
) -> None:
    backend = FilesystemBackend(tmp_path / "ws")
    backend.write("top.md", "top")
    # 3,000 nested folders made behind the tools' back (a shell, a mounted volume).
    try:
        fd = os.open(backend.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(3000):
                os.mkdir("d", dir_fd=fd)
                child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = child
            os.close(os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        finally:
            os.close(fd)
        assert backend.paths() == ["top.md"]
    finally:
        remove_chain(backend.root)


def remove_chain(root: Path) -> None:
    """Remove a `d/d/d/…` chain one level at a time (shutil.rmtree recurses, and would overflow)."""
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while True:
            try:
                os.rename("d/d", "next", src_dir_fd=top, dst_dir_fd=top)
            except FileNotFoundError:
                break
            os.rmdir("d", dir_fd=top)
            os.rename("next", "d", src_dir_fd=top, dst_dir_fd=top)
        with contextlib.suppress(FileNotFoundError):
            os.unlink("d/deep.md", dir_fd=top)
        with contextlib.suppress(FileNotFoundError):
            os.rmdir("d", dir_fd=top)
    finally:
        os.close(top)
