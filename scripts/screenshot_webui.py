"""Capture docs/webui-timeline.png: a real research run's timeline in the Temporal Web UI.

    python scripts/screenshot_webui.py            # the README demo, on the local model
    python scripts/screenshot_webui.py --scripted # a scripted-model research app: seconds, not minutes

It runs `sleuth research` as a person would, against an embedded Temporal server of its own (a
free port, a temporary $SLEUTH_HOME; model weights are read from $SLEUTH_MODEL_DIR, default
~/.sleuth/models), opens the run's page in the Web UI with headless Chromium over the DevTools
protocol (tests/helpers/browser.py), waits until the timeline has drawn, saves the screenshot, prints the
run's report, and stops the server. Needs the `test` extra (websockets) and Chromium
(`apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sleuth.rag.demo import DEMO_QUESTION  # noqa: E402
from tests.helpers.browser import CHROMIUM, open_page  # noqa: E402
from tests.helpers.cli_process import sleuth_command  # noqa: E402
from tests.helpers.worker_processes import free_port_pair  # noqa: E402

SCRIPTED_APP = ["--app", "tests.helpers.apps.research_app:app", "--research", "crash"]
SCRIPTED_QUESTION = "How many widgets did Acme ship in 2024?"
SCROLL_TO_TIMELINE = """
const heading = [...document.querySelectorAll('h1, h2, h3, h4')]
  .find((element) => element.textContent.trim() === 'Timeline');
if (heading) heading.scrollIntoView({block: 'start'});
"""
RENDER_WAIT_SECONDS = 3.0
"""The Web UI draws the timeline a moment after the event history has loaded."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scripted", action="store_true", help="a scripted model (fast)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "webui-timeline.png")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    parser.add_argument(
        "--header",
        action="store_true",
        help="keep the run's header (summary and current details) above the timeline",
    )
    args = parser.parse_args()
    if CHROMIUM is None:
        print("chromium is not installed: apt-get install chromium", file=sys.stderr)
        return 1
    port = free_port_pair()
    with tempfile.TemporaryDirectory(prefix="sleuth-screenshot-") as home:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "SLEUTH_HOME": home,
            "SLEUTH_MODEL_DIR": os.environ.get(
                "SLEUTH_MODEL_DIR", str(Path("~/.sleuth/models").expanduser())
            ),
            "SLEUTH_EMBEDDED_ADDRESS": f"localhost:{port}",
            "TEMPORAL_ADDRESS": f"localhost:{port}",
            "RESEARCH_TOOL_LOG": str(Path(home) / "tool.log"),
        }
        command = ["research", "--no-events"]
        command += [*SCRIPTED_APP, SCRIPTED_QUESTION] if args.scripted else [DEMO_QUESTION]
        try:
            print(f"running: sleuth {' '.join(command)}", flush=True)
            run = subprocess.run(
                sleuth_command(*command), env=env, cwd=ROOT, capture_output=True, text=True
            )
            print(run.stdout)
            if run.returncode != 0:
                print(run.stderr, file=sys.stderr)
                return run.returncode
            link = re.search(r"^Web UI: (\S+)$", run.stdout, re.MULTILINE)
            workflow = re.search(r"^Workflow: (\S+)$", run.stdout, re.MULTILINE)
            assert link and workflow, "the report names no workflow"
            asyncio.run(screenshot(link.group(1), workflow.group(1), args))
        finally:
            subprocess.run(sleuth_command("server", "--stop"), env=env, capture_output=True)
    print(f"saved {args.out}")
    return 0


async def screenshot(url: str, workflow_id: str, args: argparse.Namespace) -> None:
    async with open_page("about:blank") as page:
        await page.call(
            "Emulation.setDeviceMetricsOverride",
            width=args.width,
            height=args.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        await page.call("Page.navigate", url=url)
        await page.wait_for_text(workflow_id)
        await page.wait_for_text("COMPLETED")
        await page.wait_for_text("Timeline")
        await asyncio.sleep(RENDER_WAIT_SECONDS)
        if not args.header:
            # The run's header first, then its timeline: scroll the page to the timeline's heading.
            await page.call("Runtime.evaluate", expression=SCROLL_TO_TIMELINE)
            await asyncio.sleep(1.0)
        shot = await page.call("Page.captureScreenshot", format="png")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(base64.b64decode(shot["data"]))


if __name__ == "__main__":
    sys.exit(main())
