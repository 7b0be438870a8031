"""The getting-started page works as written: its shell commands run in order, in an empty
folder, against a real Temporal dev server, and end with a grounded report over the files the page
creates.

The page's model is the default one (`SLEUTH_MODEL`), which the page says how to point anywhere;
here it points at a local OpenAI-compatible server answering from a script, so no real model
runs. The install block is the one thing not run: Sleuth is already installed where the tests run,
and pip cannot reach a checkout from a temporary folder.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.helpers.doc_commands import page_script, run_script
from tests.helpers.openai_server import openai_server, research_responder
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"
pytestmark = pytest.mark.slow  # runs the CLI in subprocesses

ANSWER = "Acme charges $40 per seat per month for its CRM."


def test_the_page_script_keeps_every_command_in_order() -> None:
    script = page_script(PAGE.read_text(), install_blocks=1)
    steps = [
        "mkdir -p my-research/notes",
        "sleuth ingest notes --store notes",
        "cat > research.py",
        "sleuth research ",
        "sleuth runs",
    ]
    positions = [script.index(step) for step in steps]
    assert positions == sorted(positions)


async def test_the_getting_started_page_runs_from_an_empty_folder(
    dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    with openai_server(research_responder(ANSWER)) as model:
        env = {
            **os.environ,
            **model.env(),
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "SLEUTH_TASK_QUEUE": f"getting-started-{uuid.uuid4().hex[:8]}",
        }
        script = page_script(PAGE.read_text(), install_blocks=1)
        done = run_script(script, cwd=folder, env=env, timeout=scaled(300))
        requests = model.requests
    assert done.returncode == 0, done.stdout + done.stderr

    project = folder / "my-research"
    assert (project / "research.py").is_file()
    assert "notes: 1 files (1 added)" in done.stdout
    report = (project / "report.md").read_text()
    assert "**Question:** What does Acme charge per seat?" in report
    assert ANSWER in report
    assert "/notes/pricing.md#chars " in report  # the claim cites the user's file
    # The search found the user's file, and the writer was shown its passage.
    shown = [str(message["content"]) for body in requests for message in body["messages"]]
    assert any("notes/pricing.md" in text and "Acme charges $40 per seat" in text for text in shown)
    assert any(
        tool["function"]["name"] == "search_notes"
        for body in requests
        for tool in body.get("tools") or []
    )
    # `sleuth runs` lists the run.
    assert re.search(r"research-notes-\S+\s+research\s+completed", done.stdout)
