"""Capture docs/run-page.png: a finished research run on `sleuth serve`'s run page.

    python scripts/screenshot_run_page.py

It starts a Temporal dev server of its own (in memory, a free port), runs `sleuth serve` with a
scripted-model research app (`tests.helpers.apps.live_app`, seconds, no model weights), starts a
run through the HTTP API as an application would, waits for it to finish, opens `/runs/<id>` in
headless Chromium over the DevTools protocol (tests/helpers/browser.py) and saves the screenshot.
Needs the `test` extra (websockets) and Chromium (`apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from sleuth.workers.binaries import temporal_cli  # noqa: E402
from tests.helpers.browser import CHROMIUM, open_page  # noqa: E402
from tests.helpers.cli_process import sleuth_command  # noqa: E402
from tests.helpers.ports import free_ports  # noqa: E402

QUESTION = "What do Acme and Globex charge per seat?"
TOKEN = "screenshot-token-0123456789abcdef"
STEPS_LISTED = "document.getElementById('step-list').children.length > 0"
RENDER_WAIT_SECONDS = 1.5
"""The page draws its chart and claims a moment after the report has arrived."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "run-page.png")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=1100)
    args = parser.parse_args()
    if CHROMIUM is None:
        print("chromium is not installed: apt-get install chromium", file=sys.stderr)
        return 1
    asyncio.run(capture(args))
    print(f"saved {args.out}")
    return 0


async def capture(args: argparse.Namespace) -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()), data_converter=pydantic_data_converter
    )
    port = free_ports()
    with tempfile.TemporaryDirectory(prefix="sleuth-screenshot-") as home:
        variables = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "SLEUTH_HOME": home,
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "SLEUTH_SERVE_TOKEN": TOKEN,
        }
        command = sleuth_command(
            "serve", "--port", str(port), "--app", "tests.helpers.apps.live_app:app"
        )
        serve = subprocess.Popen(command, cwd=ROOT, env=variables)
        base = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
            ) as client:
                await _wait_until_up(client, serve)
                started = await client.post(
                    "/runs",
                    json={
                        "workflow": "ResearchWorkflow",
                        "input": {"prompt": QUESTION, "research": "prices"},
                    },
                )
                started.raise_for_status()
                run_id = started.json()["id"]
                await _wait_until_done(client, run_id)
            await _screenshot(f"{base}/runs/{run_id}?token={TOKEN}", args)
        finally:
            serve.terminate()
            serve.wait(timeout=30)
            await env.shutdown()


async def _wait_until_up(client: httpx.AsyncClient, serve: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if serve.poll() is not None:
            raise SystemExit(f"sleuth serve exited with {serve.returncode}")
        try:
            await client.get("/openapi.json")
            return
        except httpx.TransportError:
            await asyncio.sleep(0.1)
    raise SystemExit("sleuth serve did not start within a minute")


async def _wait_until_done(client: httpx.AsyncClient, run_id: str) -> None:
    for _ in range(1200):
        status = (await client.get(f"/runs/{run_id}")).json()["status"]
        if status != "RUNNING":
            if status != "COMPLETED":
                raise SystemExit(f"run {run_id} ended {status}")
            return
        await asyncio.sleep(0.1)
    raise SystemExit(f"run {run_id} did not finish within two minutes")


async def _screenshot(url: str, args: argparse.Namespace) -> None:
    async with open_page("about:blank") as page:
        await page.call(
            "Emulation.setDeviceMetricsOverride",
            width=args.width,
            height=args.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        await page.call("Page.navigate", url=url)
        await page.wait_for_text("Research report")
        for _ in range(600):  # the steps, read back from the run's event stream
            listed = await page.call("Runtime.evaluate", expression=STEPS_LISTED)
            if listed.get("result", {}).get("value") is True:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(RENDER_WAIT_SECONDS)
        shot = await page.call("Page.captureScreenshot", format="png")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(base64.b64decode(shot["data"]))


if __name__ == "__main__":
    sys.exit(main())
