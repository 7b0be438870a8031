"""With `SLEUTH_ENCRYPTION_KEY` set, nothing a run is about reaches the disk in plaintext: neither
the Temporal server's database (payloads, failure messages, stack traces) nor the artifact store
(evidence, conversations, checkpoints). The same runs without the key are the control: there the
marker is on disk, so the greps can fail.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import stat
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sleuth.activities.checkpoints import Pointer, _load_and_claim, journal_name, read_journal
from sleuth.activities.research_models import ResearchRequest
from sleuth.apps.app import App
from sleuth.models.base import ModelResponse, NonRetryableModelError, RetryableModelError
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import create_research_workflow, node_of_request
from sleuth.runtime import artifact_crypto
from sleuth.runtime.artifacts import (
    ArtifactCorruptError,
    LocalArtifactStore,
    get_json,
    object_key,
    put_json,
)
from sleuth.workers import codec
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.codec_server import CodecServer
from sleuth.workers.plugin import SleuthPlugin, SleuthPluginError
from sleuth.workers.search_attributes import dev_server_flags
from sleuth.workflows.research import ResearchWorkflow
from tests.conftest import FAST_DEV_SERVER_ARGS
from tests.helpers import browser
from tests.helpers.ports import free_ports
from tests.helpers.research_scripts import FACT, ResearchScript, tool_rounds
from tests.helpers.timeouts import SERVER_STARTUP, scaled

# -- the artifact store ----------------------------------------------------------------------


def file_of(store: LocalArtifactStore, ref: str) -> Path:
    """The file that holds the artifact `ref` in a local store."""
    return store.root / object_key(ref)


def test_artifacts_are_sealed_with_the_active_key_and_keep_their_plaintext_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalArtifactStore(tmp_path / "artifacts")
    plain_ref = put_json(store, {"finding": "written before the key"})
    old, new = artifact_crypto.new_key(), artifact_crypto.new_key()
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", old)
    assert get_json(store, plain_ref) == {"finding": "written before the key"}, "plaintext reads"

    ref = put_json(store, {"finding": "sealed secret"})
    sealed_file = file_of(store, ref)
    assert b"sealed secret" not in sealed_file.read_bytes()
    old_id = artifact_crypto.key_id(base64.b64decode(old))
    assert artifact_crypto.sealed_key_id(sealed_file.read_bytes()) == old_id
    assert b"written before the key" in file_of(store, plain_ref).read_bytes(), (
        "reads rewrite nothing"
    )
    assert ref == put_json(store, {"finding": "sealed secret"}), "references are unchanged"

    # Rotation: the new key first; the old one still reads, and storing again re-seals.
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", f"{new},{old}")
    assert get_json(store, ref) == {"finding": "sealed secret"}
    put_json(store, {"finding": "sealed secret"})
    new_id = artifact_crypto.key_id(base64.b64decode(new))
    assert artifact_crypto.sealed_key_id(sealed_file.read_bytes()) == new_id
    assert stat.S_IMODE(sealed_file.stat().st_mode) == 0o600

    # The plaintext artifact is sealed once it is stored again with a key.
    put_json(store, {"finding": "written before the key"})
    assert file_of(store, plain_ref).read_bytes().startswith(artifact_crypto.MAGIC)

    # Without the key: a clear error naming the variable, and no plaintext written over it.
    monkeypatch.delenv("SLEUTH_ENCRYPTION_KEY")
    with pytest.raises(artifact_crypto.ArtifactKeyError, match="set SLEUTH_ENCRYPTION_KEY"):
        get_json(store, ref)
    put_json(store, {"finding": "sealed secret"})
    assert artifact_crypto.sealed_key_id(sealed_file.read_bytes()) == new_id

    # With only an unrelated key: the message names the missing key id.
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", artifact_crypto.new_key())
    with pytest.raises(artifact_crypto.ArtifactKeyError, match=f"key id {new_id}, which is not"):
        get_json(store, ref)


def test_an_altered_sealed_artifact_is_corrupt_and_storing_it_again_repairs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", artifact_crypto.new_key())
    store = LocalArtifactStore(tmp_path)
    ref = put_json(store, {"checkpoint": 3})
    path = file_of(store, ref)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactCorruptError, match="corrupt"):
        get_json(store, ref)
    # Another artifact's valid ciphertext under this name is caught as well.
    other = put_json(store, {"checkpoint": 4})
    path.write_bytes(file_of(store, other).read_bytes())
    with pytest.raises(ArtifactCorruptError, match="corrupt"):
        get_json(store, ref)
    put_json(store, {"checkpoint": 3})
    assert get_json(store, ref) == {"checkpoint": 3}


def test_plaintext_that_happens_to_start_with_the_marker_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalArtifactStore(tmp_path)
    lookalike = artifact_crypto.MAGIC + b"0123456789abcdef" + b"n" * 40
    ref = store.put_bytes(lookalike)
    assert store.get_bytes(ref) == lookalike
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", artifact_crypto.new_key())
    assert store.get_bytes(ref) == lookalike


def test_a_worker_without_the_key_stops_at_a_sealed_checkpoint_instead_of_starting_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Starting over would run completed tool calls again: a missing key is not a damaged file.
    store = LocalArtifactStore(tmp_path)
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", artifact_crypto.new_key())
    name = journal_name("default", "wf", "run", "1")
    ref = put_json(store, {"loop": {"step": 7}})
    assert store.swap_pointer(name, None, Pointer(1, [ref]).dumps())
    assert read_journal(store, name) == {"loop": {"step": 7}}
    monkeypatch.delenv("SLEUTH_ENCRYPTION_KEY")
    with pytest.raises(artifact_crypto.ArtifactKeyError, match="SLEUTH_ENCRYPTION_KEY"):
        read_journal(store, name)
    with pytest.raises(artifact_crypto.ArtifactKeyError):
        _load_and_claim(store, name, 2, None)


# -- the data converters ---------------------------------------------------------------------


def test_every_converter_sleuth_builds_encrypts_failure_messages_with_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = codec.data_converter()
    assert plain.payload_codec is None and not codec.encodes_failures(plain), "no key, no codec"
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", codec.new_key())
    assert codec.encodes_failures(codec.data_converter())
    assert not codec.encodes_failures(pydantic_data_converter)

    # The plugin on a client connected with the plain pydantic converter, as a user's is.
    plugin = SleuthPlugin(App())
    converter = plugin.configure_client(
        {"data_converter": pydantic_data_converter}  # type: ignore[typeddict-item]
    )["data_converter"]
    assert isinstance(converter.payload_codec, codec.AESGCMCodec)
    assert codec.encodes_failures(converter)

    class Plain(DefaultFailureConverter):
        pass

    custom = DataConverter(
        payload_converter_class=pydantic_data_converter.payload_converter_class,
        failure_converter_class=Plain,
    )
    with pytest.raises(SleuthPluginError, match="DefaultFailureConverterWithEncodedAttributes"):
        plugin.configure_client({"data_converter": custom})  # type: ignore[typeddict-item]


async def test_a_worker_whose_client_encrypts_payloads_but_not_failures_is_refused(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", codec.new_key())
    payloads_only = dataclasses.replace(
        pydantic_data_converter, payload_codec=codec.configured_codec()
    )
    client = Client(dev_env.client.service_client, data_converter=payloads_only)
    with pytest.raises(SleuthPluginError, match="stores failure messages and stack traces"):
        Worker(client, task_queue="never-polled", plugins=[SleuthPlugin(App())])
    sealed = Client(dev_env.client.service_client, data_converter=codec.data_converter())
    Worker(sealed, task_queue="never-polled", plugins=[SleuthPlugin(App())])


# -- a research run and a failing one, on the real dev server --------------------------------


def _research_app(marker: str) -> App:
    """A research config whose prompt, tool arguments, tool output, tool error and a retried
    model error all quote `marker`, and one whose model fails the run quoting it."""
    script = ResearchScript()
    failed_once: list[str] = []

    def lookup(topic: str) -> str:
        """Look a topic up in the market notes."""
        if topic.endswith("(first)"):
            raise LookupError(f"no notes filed under {topic}")
        return json.dumps({"topic": topic, "text": FACT, "source": f"notes on {marker}"})

    def respond(call: ModelCall) -> ModelResponse:
        node = node_of_request(call.messages)
        if node == "execute":
            rounds = tool_rounds(call)
            if rounds < 2:
                return tool_call("lookup", topic=f"{marker} ({'first' if rounds == 0 else 'next'})")
            return text("Findings: " + FACT)
        if node == "summarize" and not failed_once:
            failed_once.append(node)
            raise RetryableModelError(f"overloaded while summarising {marker}", status_code=529)
        return script(call)

    def refuse(call: ModelCall) -> ModelResponse:
        raise NonRetryableModelError(
            f"400 from provider: prompt mentions {marker}", status_code=400
        )

    app = App()
    app.research(
        "sealed",
        create_research_workflow(model=ScriptedModel(responder=respond), tools=[lookup]),
    )
    app.research(
        "refused", create_research_workflow(model=ScriptedModel(responder=refuse), max_replans=0)
    )
    return app


FAST_RETRY = {"retry": {"initial_interval_seconds": 0.1}}


async def _run_both(target: str, marker: str) -> tuple[str, WorkflowFailureError]:
    """The two runs, through a client and worker built the way a user's are: with the plugin."""
    app = _research_app(marker)
    client = await Client.connect(target, plugins=[SleuthPlugin(app)])
    task_queue = str(uuid.uuid4())
    async with Worker(client, task_queue=task_queue):
        outcome = await asyncio.wait_for(
            client.execute_workflow(
                ResearchWorkflow.run,
                ResearchRequest(
                    prompt=f"How fast did {marker} grow?",
                    research="sealed",
                    nodes={"summarize": FAST_RETRY},
                ),
                id=f"at-rest-{uuid.uuid4()}",
                task_queue=task_queue,
            ),
            timeout=scaled(240),
        )
        assert outcome.final_state["end_reason"] == "grounded"
        failing_id = f"at-rest-failing-{uuid.uuid4()}"
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(
                client.execute_workflow(
                    ResearchWorkflow.run,
                    ResearchRequest(prompt=f"Explain {marker}", research="refused"),
                    id=failing_id,
                    task_queue=task_queue,
                ),
                timeout=scaled(240),
            )
    return failing_id, failure.value


def _messages(error: BaseException | None) -> str:
    """Every message down the cause chain, as the client decoded them."""
    parts = []
    while error is not None:
        parts.append(str(error))
        error = error.__cause__
    return " | ".join(parts)


def _hits(paths: list[Path], marker: str) -> dict[str, int]:
    needle = marker.encode()
    return {
        str(path): path.read_bytes().count(needle)
        for path in paths
        if path.is_file() and needle in path.read_bytes()
    }


def _web_ui_history(ui_port: int, workflow_id: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{ui_port}/api/v1/namespaces/default/workflows/{workflow_id}/history"
    with urllib.request.urlopen(url, timeout=scaled(30)) as response:
        loaded: dict[str, Any] = json.loads(response.read())
    return loaded


def _encoded_attributes(node: Any, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "encodedAttributes":
                found.append(value)
            else:
                _encoded_attributes(value, found)
    elif isinstance(node, list):
        for value in node:
            _encoded_attributes(value, found)
    return found


def _decode_as_the_web_ui_does(server: CodecServer, ui_origin: str, payload: Any) -> Any:
    """POST one failure's `encodedAttributes` to /decode as the Web UI sends it (`{"payloads":
    [...]}` with the JSON of the server's HTTP API), and parse the answer as it does."""
    request = urllib.request.Request(
        f"{server.url}/decode",
        data=json.dumps({"payloads": [payload]}).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "X-Namespace": "default", "Origin": ui_origin},
    )
    with urllib.request.urlopen(request, timeout=scaled(30)) as response:
        assert response.headers["Access-Control-Allow-Origin"] == ui_origin
        [decoded] = json.loads(response.read())["payloads"]
    return json.loads(base64.b64decode(decoded["data"]))


@pytest.mark.slow
async def test_with_a_key_no_marker_reaches_the_server_database_or_the_artifacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sealed_marker = f"SEALED-{uuid.uuid4().hex}"
    plain_marker = f"PLAIN-{uuid.uuid4().hex}"
    database = tmp_path / "server" / "temporal.sqlite"
    database.parent.mkdir()
    port = free_ports(1000)
    env = await WorkflowEnvironment.start_local(
        port=port,
        ui=True,
        ui_port=port + 1000,
        dev_server_existing_path=str(temporal_cli()),
        dev_server_database_filename=str(database),
        dev_server_extra_args=[*FAST_DEV_SERVER_ARGS, *dev_server_flags()],
        dev_server_startup_timeout=SERVER_STARTUP,
    )
    target = f"127.0.0.1:{port}"
    key = codec.new_key()
    try:
        monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", key)
        monkeypatch.setenv("SLEUTH_ARTIFACTS", str(tmp_path / "artifacts-sealed"))
        failing_id, failure = await _run_both(target, sealed_marker)
        # Encrypted, not dropped: the client holding the key reads the whole failure.
        assert f"prompt mentions {sealed_marker}" in _messages(failure)

        # The Web UI's own view of the failed run: each failure's message and stack trace is
        # an encoded attribute, which the codec server decodes.
        history = _web_ui_history(port + 1000, failing_id)
        assert sealed_marker not in json.dumps(history)
        attributes = _encoded_attributes(history, [])
        assert attributes, "failures carry their message in encodedAttributes"
        ui_origin = f"http://localhost:{port + 1000}"
        server = CodecServer("127.0.0.1", 0, codec.configured_codec(), [ui_origin])  # type: ignore[arg-type]
        server.start_in_thread()
        try:
            decoded = [_decode_as_the_web_ui_does(server, ui_origin, a) for a in attributes]
        finally:
            server.shutdown()
            server.server_close()
        assert any(sealed_marker in item["message"] for item in decoded), decoded
        assert all(set(item) == {"message", "stack_trace"} for item in decoded)

        monkeypatch.delenv("SLEUTH_ENCRYPTION_KEY")
        monkeypatch.setenv("SLEUTH_ARTIFACTS", str(tmp_path / "artifacts-plain"))
        await _run_both(target, plain_marker)
    finally:
        await env.shutdown()

    server_files = sorted(database.parent.glob("*"))
    sealed_artifacts = sorted((tmp_path / "artifacts-sealed").rglob("*"))
    plain_artifacts = sorted((tmp_path / "artifacts-plain").rglob("*"))
    assert len([p for p in sealed_artifacts if p.is_file()]) > 5, "the run stored its artifacts"
    # The control: without the key, the marker is all over both.
    assert _hits(server_files, plain_marker), "without a key the database holds the marker"
    assert _hits(plain_artifacts, plain_marker), "without a key the artifacts hold it"
    print(
        f"control hits: database {_hits(server_files, plain_marker)}, artifacts "
        f"{sum(_hits(plain_artifacts, plain_marker).values())} in "
        f"{len(_hits(plain_artifacts, plain_marker))} files"
    )
    assert _hits(server_files, sealed_marker) == {}
    assert _hits(sealed_artifacts, sealed_marker) == {}


@pytest.mark.slow
@pytest.mark.skipif(browser.CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
async def test_the_web_ui_shows_an_encrypted_failure_message_decrypted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = f"UI-FAILURE-{uuid.uuid4().hex}"
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", codec.new_key())
    port = free_ports(1000)
    ui_port = port + 1000
    origins = [f"http://127.0.0.1:{ui_port}", f"http://localhost:{ui_port}"]
    server = CodecServer("127.0.0.1", 0, codec.configured_codec(), origins)  # type: ignore[arg-type]
    server.start_in_thread()
    env = await WorkflowEnvironment.start_local(
        port=port,
        ui=True,
        ui_port=ui_port,
        dev_server_existing_path=str(temporal_cli()),
        dev_server_extra_args=[*FAST_DEV_SERVER_ARGS, "--ui-codec-endpoint", server.url],
        dev_server_startup_timeout=SERVER_STARTUP,
    )
    try:
        app = _research_app(marker)
        client = await Client.connect(f"127.0.0.1:{port}", plugins=[SleuthPlugin(app)])
        workflow_id = f"ui-failure-{uuid.uuid4()}"
        async with Worker(client, task_queue="ui-failure"):
            with pytest.raises(WorkflowFailureError):
                await asyncio.wait_for(
                    client.execute_workflow(
                        ResearchWorkflow.run,
                        ResearchRequest(prompt="Explain it", research="refused"),
                        id=workflow_id,
                        task_queue="ui-failure",
                    ),
                    timeout=scaled(240),
                )
        raw = await Client.connect(f"127.0.0.1:{port}")
        history = await raw.get_workflow_handle(workflow_id).fetch_history()
        failed = history.events[-1].workflow_execution_failed_event_attributes.failure
        assert failed.message == "Encoded failure" and marker not in str(failed)
        page_url = f"http://127.0.0.1:{ui_port}/namespaces/default/workflows/{workflow_id}"
        async with browser.open_page(page_url) as page:
            # The failure's encodedAttributes, decoded by the codec server: message and stack.
            shown = await page.wait_for_text(f"prompt mentions {marker}")
        assert "stack_trace" in shown
    finally:
        await env.shutdown()
        server.shutdown()
        server.server_close()
