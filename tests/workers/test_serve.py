"""`sleuth serve` as a real server process, driven by a real HTTP client: start a run, stream its
events as server-sent events while it runs, read its status and result, answer its review, and
errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from tests.helpers.apps import live_app
from tests.helpers.cli_process import popen_sleuth
from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


async def sse_messages(response: httpx.Response) -> AsyncIterator[dict]:
    """The messages of a server-sent event stream, as they arrive."""
    message: dict = {}
    async for line in response.aiter_lines():
        if not line:
            if message:
                yield message
            message = {}
            continue
        if line.startswith(":"):
            continue  # a keep-alive comment
        field, _, value = line.partition(": ")
        message[field] = json.loads(value) if field == "data" else value


@pytest.fixture
async def served(dev_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[str]:
    port = free_ports()
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "PYTHONPATH": str(ROOT),
        live_app.GATE_ENV: str(tmp_path),
    }
    command = [
        "serve",
        "--port",
        str(port),
        "--app",
        "tests.helpers.apps.live_app:app",
        "--task-queue",
        f"serve-{uuid.uuid4()}",
    ]
    log = (tmp_path / "serve.log").open("w")
    process = popen_sleuth(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(600):
                assert process.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    if (await client.get(f"{base}/openapi.json")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            else:
                pytest.fail("sleuth serve did not answer: " + (tmp_path / "serve.log").read_text())
        yield base
    finally:
        process.terminate()
        process.wait(timeout=scaled(30))
        log.close()


async def test_start_a_run_stream_its_events_live_and_read_its_result(
    served: str, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=served, timeout=scaled(60)) as client:
        started = await client.post(
            "/runs",
            json={
                "workflow": "ResearchWorkflow",
                "input": {"prompt": "Price Acme and Globex", "research": "prices"},
            },
        )
        assert started.status_code == 201, started.text
        run = started.json()
        assert run["events_url"] == f"/runs/{run['id']}/events"

        seen = []
        async with client.stream("GET", run["events_url"]) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for message in sse_messages(response):
                seen.append(message)
                data = message["data"]
                if message["event"] == "agent.tool.called" and data["data"]["tool"] == "quick":
                    # `gated` still blocks the execute step: the events arrive while it runs.
                    status = (await client.get(f"/runs/{run['id']}")).json()
                    assert status["status"] == "RUNNING" and status["result"] is None
                    (tmp_path / "release").touch()
        assert seen[-1] == {"event": "end", "data": {}}
        events = seen[:-1]
        assert [int(m["id"]) for m in events] == list(range(len(events)))
        assert events[0]["event"] == "research.node.started"
        assert events[0]["data"]["run_id"] == run["id"]
        assert events[-1]["event"] == "research.finished"

        status = (await client.get(f"/runs/{run['id']}")).json()
        assert status["status"] == "COMPLETED" and status["workflow"] == "ResearchWorkflow"
        assert "Globex $55 per seat" in status["result"]["final_state"]["summary"]

        # A client that reconnects with Last-Event-ID gets what came after.
        async with client.stream(
            "GET", run["events_url"], headers={"Last-Event-ID": "2"}
        ) as response:
            resumed = [m async for m in sse_messages(response)]
        assert [m.get("id") for m in resumed[:-1]] == [m["id"] for m in events[3:]]


async def test_bad_requests_get_clear_answers(served: str, tmp_path: Path) -> None:
    (tmp_path / "release").touch()
    async with httpx.AsyncClient(base_url=served, timeout=scaled(60)) as client:
        typo = await client.post(
            "/runs",
            json={"workflow": "ResearchWorkflow", "input": {"prompt": "x", "max_replan": 1}},
        )
        assert typo.status_code == 422
        assert "unknown field 'max_replan' in ResearchRequest; known fields: prompt," in typo.text
        unknown = await client.post("/runs", json={"workflow": "Nope", "input": {}})
        assert unknown.status_code == 422
        missing = await client.get("/runs/no-such-run")
        assert (missing.status_code, missing.json()["detail"]) == (404, "no run 'no-such-run'")
        assert (await client.get("/runs/no-such-run/events")).status_code == 404

        first = await client.post(
            "/runs",
            json={
                "workflow": "ResearchWorkflow",
                "id": "fixed-id",
                "input": {"prompt": "x", "research": "prices"},
            },
        )
        assert first.status_code == 201
        again = await client.post(
            "/runs",
            json={
                "workflow": "ResearchWorkflow",
                "id": "fixed-id",
                "input": {"prompt": "x", "research": "prices"},
            },
        )
        assert again.status_code == 409 and "pick another id" in again.text


async def wait_for_review(client: httpx.AsyncClient, run_id: str) -> dict:
    """The review the run waits for, once it waits for one (polled; generous deadline)."""
    for _ in range(1200):
        answer = await client.get(f"/runs/{run_id}/review")
        # 409 while no workflow task has run yet (the query has no handler to answer it).
        assert answer.status_code in (200, 409), answer.text
        if answer.status_code == 200 and answer.json() is not None:
            return dict(answer.json())
        await asyncio.sleep(0.1)
    pytest.fail(f"run {run_id} never waited for a review")


async def wait_until_closed(client: httpx.AsyncClient, run_id: str) -> dict:
    for _ in range(1200):
        status = (await client.get(f"/runs/{run_id}")).json()
        if status["status"] != "RUNNING":
            return dict(status)
        await asyncio.sleep(0.1)
    pytest.fail(f"run {run_id} did not end")


async def test_a_reviewed_run_is_approved_or_rejected_over_http(
    served: str, tmp_path: Path
) -> None:
    (tmp_path / "release").touch()
    reviewed = {
        "workflow": "ResearchWorkflow",
        "input": {"prompt": "Price Acme and Globex", "research": "reviewed-prices"},
    }
    async with httpx.AsyncClient(base_url=served, timeout=60) as client:
        approved = (await client.post("/runs", json=reviewed)).json()
        pending = await wait_for_review(client, approved["id"])
        assert pending["kind"] == "summary" and pending["review_id"] == "summary-1"
        assert "Globex $55 per seat" in json.dumps(pending["details"])
        # The run is waiting, not finished.
        assert (await client.get(f"/runs/{approved['id']}")).json()["status"] == "RUNNING"

        # Bad answers are refused with the reason, and the run keeps waiting.
        wrong = await client.post(
            f"/runs/{approved['id']}/review", json={"review_id": "plan-9", "decision": "approve"}
        )
        assert wrong.status_code == 409 and "summary-1" in wrong.json()["detail"], wrong.text
        no_remark = await client.post(
            f"/runs/{approved['id']}/review", json={"review_id": "summary-1", "decision": "revise"}
        )
        assert no_remark.status_code == 422 and "needs a remark" in no_remark.text

        answered = await client.post(
            f"/runs/{approved['id']}/review",
            json={"review_id": "summary-1", "decision": "approve"},
        )
        assert answered.status_code == 200, answered.text
        assert answered.json()["review_id"] == "summary-1"
        status = await wait_until_closed(client, approved["id"])
        assert status["status"] == "COMPLETED", status
        report = status["result"]["final_state"]
        assert report["end_reason"] != "rejected"
        assert [(r["review_id"], r["decision"]) for r in report["reviews"]] == [
            ("summary-1", "approve")
        ]
        assert (await client.get(f"/runs/{approved['id']}/review")).json() is None

        rejected = (await client.post("/runs", json=reviewed)).json()
        pending = await wait_for_review(client, rejected["id"])
        answered = await client.post(
            f"/runs/{rejected['id']}/review",
            json={"review_id": pending["review_id"], "decision": "reject", "remark": "Off topic."},
        )
        assert answered.status_code == 200, answered.text
        status = await wait_until_closed(client, rejected["id"])
        assert status["status"] == "COMPLETED", status
        report = status["result"]["final_state"]
        assert report["end_reason"] == "rejected"
        assert report["reviews"][0]["decision"] == "reject"
        assert report["reviews"][0]["remark"] == "Off topic."

        # A run that takes no reviews says so.
        plain = (
            await client.post(
                "/runs",
                json={
                    "workflow": "ResearchWorkflow",
                    "input": {"prompt": "x", "research": "prices"},
                },
            )
        ).json()
        await wait_until_closed(client, plain["id"])
        assert (await client.get(f"/runs/{plain['id']}/review")).json() is None
