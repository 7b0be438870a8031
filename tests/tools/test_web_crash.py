"""A worker process killed (SIGKILL) in the middle of a web search or a page fetch: only the call in
flight is made again, on a fresh worker, and the run completes with what both calls returned.

Real dev server, `sleuth worker` as a separate process serving `tests.helpers.apps.web_app`, the
search provider and the page on a loopback server that holds the request until the worker dies.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.agent_models import AgentRequest
from sleuth.workflows import AgentWorkflow
from tests.helpers.apps.web_app import PAGE_ENV
from tests.helpers.timeouts import scaled
from tests.helpers.web_server import LocalWebServer
from tests.helpers.worker_processes import start_sleuth_worker, stop, wait_for

pytestmark = pytest.mark.slow

APP = "tests.helpers.apps.web_app:app"
DATA = Path(__file__).parent / "data"
SEARCH = "/res/v1/web/search"
PAGE = "/tech/crm-prices"


@pytest.mark.parametrize("killed_in", [SEARCH, PAGE])
async def test_killing_the_worker_mid_call_redoes_only_that_call(
    dev_env: WorkflowEnvironment, tmp_path: Path, killed_in: str
) -> None:
    address = dev_env.client.service_client.config.target_host
    task_queue = f"web-crash-{uuid.uuid4()}"
    log = tmp_path / "worker.log"
    with LocalWebServer() as server:
        server.reply(
            SEARCH, body=(DATA / "brave.json").read_bytes(), content_type="application/json"
        )
        server.reply(
            PAGE, body=(DATA / "article.html").read_bytes(), content_type="text/html; charset=utf-8"
        )
        server.hold(killed_in)
        extra = {
            "SLEUTH_BRAVE_URL": server.url + SEARCH,
            "BRAVE_API_KEY": "brv-test-key",
            PAGE_ENV: server.url + PAGE,
            "SLEUTH_STICKY_QUEUE_TIMEOUT_SECONDS": str(scaled(1)),
        }
        first = start_sleuth_worker(APP, address, task_queue, env=extra, log=log)
        second = None
        try:
            handle = await dev_env.client.start_workflow(
                AgentWorkflow.run,
                AgentRequest(
                    agent="researcher",
                    prompt="What does Acme cost per seat?",
                    steps={
                        "tool": {"heartbeat_seconds": 2, "retry": {"initial_interval_seconds": 0.5}}
                    },
                ),
                id=f"web-crash-{uuid.uuid4()}",
                task_queue=task_queue,
            )
            await wait_for(lambda: server.hits(killed_in) == 1, "the call", detail=log.read_text)
            stop(first, signal.SIGKILL)
            second = start_sleuth_worker(APP, address, task_queue, env=extra, log=log)
            await wait_for(lambda: server.hits(killed_in) == 2, "the retry", detail=log.read_text)
            server.release(killed_in)
            outcome = await asyncio.wait_for(handle.result(), timeout=scaled(120))
        finally:
            stop(first, signal.SIGKILL)
            stop(second)

        assert outcome.message == "Acme costs $40 a seat per month."
        # The call in flight was made twice (its answer never reached the killed worker); the
        # call completed before or after the crash was made once.
        other = PAGE if killed_in == SEARCH else SEARCH
        assert server.hits(killed_in) == 2
        assert server.hits(other) == 1
