"""`sleuth serve` behind its guards, and its run page in headless Chromium: the token, the Host
allow-list, the body cap (a 300 MB body refused early), run ids, reads limited to this App's
task queue, CORS off, keep-alive pings; the page loading, steps arriving live, the report, and an
approval from the page resuming the run."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.research_models import ResearchRequest
from tests.helpers.apps import live_app
from tests.helpers.browser import CHROMIUM, open_page
from tests.helpers.cli_process import popen_sleuth, run_sleuth
from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "page-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CAP = 65536


@pytest.fixture
async def served(dev_env: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """(base URL, task queue) of a `sleuth serve` with a token, a small body cap and fast pings."""
    port, task_queue = free_ports(), f"page-{uuid.uuid4()}"
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "PYTHONPATH": str(ROOT),
        live_app.GATE_ENV: str(tmp_path),
        "SLEUTH_SERVE_TOKEN": TOKEN,
        "SLEUTH_SERVE_MAX_BODY_BYTES": str(CAP),
        "SLEUTH_SERVE_SSE_PING_SECONDS": "0.3",
    }
    command = ["serve", "--port", str(port), "--app", "tests.helpers.apps.live_app:app"]
    log = (tmp_path / "serve.log").open("w")
    process = popen_sleuth(
        [*command, "--task-queue", task_queue],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(600):
                assert process.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    await client.get(f"{base}/openapi.json")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        yield base, task_queue
    finally:
        process.terminate()
        process.wait(timeout=scaled(30))
        log.close()


def test_a_public_address_without_a_token_is_refused_at_start() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_SERVE_TOKEN")}
    refused = run_sleuth(["serve", "--host", "0.0.0.0"], cwd=ROOT, env=env, timeout=scaled(60))
    assert refused.returncode == 2
    assert "without a token" in refused.stderr and "SLEUTH_SERVE_TOKEN" in refused.stderr


async def test_the_guards(served: tuple[str, str], dev_env: WorkflowEnvironment) -> None:
    base, task_queue = served
    async with httpx.AsyncClient(base_url=base, timeout=scaled(60)) as client:
        # The token, on every route, reviews included.
        for method, path in [("GET", "/"), ("GET", "/runs"), ("GET", "/runs/x/review")]:
            assert (await client.request(method, path)).status_code == 401, path
        review = await client.post(
            "/runs/x/review", json={"review_id": "plan-1", "decision": "approve"}
        )
        assert review.status_code == 401 and "needs its token" in review.json()["detail"]
        wrong = await client.get("/runs", headers={"Authorization": "Bearer " + "x" * 32})
        assert wrong.status_code == 401 and "wrong token" in wrong.text
        assert (await client.get("/runs", headers=AUTH)).status_code == 200
        # A browser visit with ?token= keeps it in a same-site cookie, out of the address bar.
        visit = await client.get("/?token=" + TOKEN)
        assert visit.status_code == 303 and visit.headers["location"] == "/"
        assert "samesite=strict" in visit.headers["set-cookie"].lower()
        assert (await client.get("/", cookies={"sleuth_serve_token": TOKEN})).status_code == 200

        # DNS rebinding: another Host name is refused, even with the token.
        rebound = await client.get("/runs", headers={**AUTH, "Host": "evil.example"})
        assert rebound.status_code == 400 and "SLEUTH_SERVE_ALLOWED_HOSTS" in rebound.text
        assert (
            await client.get("/runs", headers={**AUTH, "Host": "localhost:1"})
        ).status_code == 200

        # Ids a run cannot have get 422; runs outside this App's task queue are "no run".
        for bad in ["a%00b", "a..b", "-x", "x" * 201, "a%0Ab"]:
            answer = await client.get(f"/runs/{bad}", headers=AUTH)
            assert answer.status_code == 422, (bad, answer.text)
        started = await client.post(
            "/runs",
            headers=AUTH,
            json={"workflow": "ResearchWorkflow", "id": "a/../b", "input": {"prompt": "x"}},
        )
        assert started.status_code == 422 and "run id" in started.text
        elsewhere = await dev_env.client.start_workflow(
            "ResearchWorkflow",
            ResearchRequest(prompt="x", research="prices"),
            id=f"elsewhere-{uuid.uuid4().hex[:8]}",
            task_queue=f"other-{uuid.uuid4()}",
        )
        hidden = await client.get(f"/runs/{elsewhere.id}", headers=AUTH)
        assert hidden.status_code == 404
        await elsewhere.terminate()

        # Bodies: JSON only, and the cap on the declared length.
        form = await client.post(
            "/runs", headers={**AUTH, "Content-Type": "text/plain"}, content=b"{}"
        )
        assert form.status_code == 415
        big = await client.post("/runs", headers=AUTH, json={"input": "x" * CAP})
        assert big.status_code == 413

        # CORS is off: no Access-Control header for another origin.
        cors = await client.options(
            "/runs",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in cors.headers

        # An idle event stream gets keep-alive comments.
        run = await client.post(
            "/runs",
            headers=AUTH,
            json={"workflow": "ResearchWorkflow", "input": {"prompt": "x", "research": "prices"}},
        )
        assert run.status_code == 201, run.text
        async with client.stream("GET", run.json()["events_url"], headers=AUTH) as stream:
            async for line in stream.aiter_lines():
                if line.startswith(":"):
                    break  # a ping while `gated` holds the run
    assert task_queue


def send_huge_body(base: str, *, chunked: bool) -> tuple[bytes, int]:
    """Send a 300 MB POST (declared, or in chunks) and return (the answer, bytes sent)."""
    host, port = base.removeprefix("http://").split(":")
    total, piece = 300 * 1024 * 1024, b"x" * (1024 * 1024)
    head = f"POST /runs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
    head += "Content-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {total}\r\n\r\n"
    sent = 0
    with socket.create_connection((host, int(port)), timeout=scaled(30)) as connection:
        connection.sendall(head.encode())
        try:
            while sent < total:
                chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
                connection.sendall(chunk)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            answer = connection.recv(4096)
        except ConnectionResetError:
            answer = b""
    return answer, sent


async def test_a_300_mb_body_is_refused_without_being_read(served: tuple[str, str]) -> None:
    base, _ = served
    for chunked in (False, True):
        answer, sent = await asyncio.to_thread(send_huge_body, base, chunked=chunked)
        assert sent < 300 * 1024 * 1024, "the server read the whole body"
        assert answer == b"" or b" 413 " in answer.split(b"\r\n", 1)[0], answer[:200]


async def wait_for(page: object, expression: str) -> None:
    for _ in range(480):
        result = await page.call("Runtime.evaluate", expression=expression)  # type: ignore[attr-defined]
        if result.get("result", {}).get("value") is True:
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"{expression} never became true")


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
async def test_the_run_page_follows_a_run_live_and_shows_its_report(
    served: tuple[str, str], tmp_path: Path
) -> None:
    base, _ = served
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=scaled(60)) as client:
        run = (
            await client.post(
                "/runs",
                json={
                    "workflow": "ResearchWorkflow",
                    "input": {"prompt": "Price Acme and Globex", "research": "prices"},
                },
            )
        ).json()
        async with open_page(f"{base}/runs/{run['id']}?token={TOKEN}") as page:
            text = await page.wait_for_text("quick(")  # a step, while `gated` still blocks
            assert run["id"] in text and "running" in text
            assert "Research report" not in text
            (tmp_path / "release").touch()
            text = await page.wait_for_text("Research report")
            assert "Acme charges $40 per seat and Globex $55 per seat." in text
            assert "Claims" in text and "Sources" in text
            listing = f"{base}/"
            await page.call("Page.navigate", url=listing)
            assert run["id"] in await page.wait_for_text(run["id"])


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
async def test_an_approval_from_the_page_resumes_the_run(
    served: tuple[str, str], tmp_path: Path
) -> None:
    base, _ = served
    (tmp_path / "release").touch()
    async with httpx.AsyncClient(base_url=base, headers=AUTH, timeout=scaled(60)) as client:
        run = (
            await client.post(
                "/runs",
                json={
                    "workflow": "ResearchWorkflow",
                    "input": {"prompt": "Price Acme and Globex", "research": "reviewed-prices"},
                },
            )
        ).json()
        async with open_page(f"{base}/runs/{run['id']}?token={TOKEN}") as page:
            await page.wait_for_text("Waiting for your review")
            await page.call(
                "Runtime.evaluate",
                expression="document.querySelector('button[data-decision=approve]').click()",
            )
            text = await page.wait_for_text("Research report")
            assert "summary-1: approve" in text.replace(
                "Review summary-1\tapprove", "summary-1: approve"
            )
        status = (await client.get(f"/runs/{run['id']}")).json()
        assert status["status"] == "COMPLETED"
        assert [r["decision"] for r in status["result"]["final_state"]["reviews"]] == ["approve"]
