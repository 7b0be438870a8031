"""A gateway that echoes the caller's API key in its error bodies, met by durable research runs
through `SLEUTH_MODEL=openai:…` + `OPENAI_BASE_URL`: the key reaches neither the workflow history
nor the output of `sleuth research`."""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth import App, create_research_workflow
from sleuth.activities.research_models import ResearchRequest
from sleuth.models.openai_compat import MEMORY
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# Shaped like no known key format: only the adapter's knowledge of its own key can mask it.
GATEWAY_KEY = "gwk_7d1e4a9c2f5b8e3a6d0c9f2b5e8a1d4c"


class EchoingGateway:
    """An OpenAI-style gateway on a free loopback port that answers every request with an error
    quoting the request's credentials: first `statuses` in turn, then 401 forever."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.seen = 0
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("content-length") or 0))
                authorization = self.headers.get("authorization", "")
                key = authorization.removeprefix("Bearer ")
                status = gateway.statuses.pop(0) if gateway.statuses else 401
                gateway.seen += 1
                body = json.dumps(
                    {
                        "error": {
                            "message": f"Invalid API key provided: {key}. Your request carried "
                            f"'Authorization: {authorization}'",
                            "type": "invalid_request_error",
                        }
                    }
                ).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[EchoingGateway]:
    """A 500 first (a retried attempt), then 401s; the worker's model points at it."""
    echoing = EchoingGateway([500])
    echoing.thread.start()
    monkeypatch.setenv("SLEUTH_MODEL", "openai:gateway-model")
    monkeypatch.setenv("OPENAI_BASE_URL", echoing.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", GATEWAY_KEY)
    MEMORY.forget()
    yield echoing
    echoing.server.shutdown()
    echoing.server.server_close()


async def test_the_key_stays_out_of_the_history_of_a_failed_durable_run(
    dev_env: WorkflowEnvironment, gateway: EchoingGateway
) -> None:
    app = App()
    app.research("gateway", create_research_workflow(tools=[], max_iterations=1))
    task_queue = str(uuid.uuid4())
    request = ResearchRequest(
        prompt="What does the gateway say?",
        research="gateway",
        nodes={"execute": {"retry": {"maximum_attempts": 2, "initial_interval_seconds": 0.1}}},
    )
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run, request, id=f"gateway-{task_queue}", task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        history = json.dumps((await handle.fetch_history()).to_json_dict())

    assert gateway.seen == 2  # the 500 was retried once, the 401 was not
    assert "HTTP 500 (transient)" in history and "HTTP 401" in history
    assert "[REDACTED]" in history
    assert GATEWAY_KEY not in history


def test_the_key_stays_out_of_sleuth_research_output(
    dev_env: WorkflowEnvironment, gateway: EchoingGateway
) -> None:
    gateway.statuses.clear()
    finished = run_sleuth(
        ["research", "What does the gateway say?", "--task-queue", str(uuid.uuid4())],
        cwd=ROOT,
        env={
            **os.environ,
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "PYTHONPATH": str(ROOT),
        },
        timeout=scaled(300),
    )

    output = finished.stdout + finished.stderr
    assert finished.returncode == 1, output
    assert "failed" in finished.stderr and "HTTP 401" in finished.stderr
    assert "[REDACTED]" in finished.stderr
    assert GATEWAY_KEY not in output
