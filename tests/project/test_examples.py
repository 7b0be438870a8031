"""Every example in `examples/` runs as its README says, against a real Temporal dev server, with
the default model pointed at a local OpenAI-compatible server that answers from a script (the
examples name no model, so `SLEUTH_MODEL` and `OPENAI_BASE_URL` choose it, as for any user)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.helpers.doc_commands import page_script, run_script
from tests.helpers.openai_server import openai_server, research_responder
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
pytestmark = pytest.mark.slow  # runs the examples' commands in subprocesses

ACME = "Acme charges $40 per seat per month for its CRM."


@dataclass
class Example:
    answer: str
    expected: list[str]
    """Lines (regular expressions) the README's commands must print, in this order."""
    tool: str | None = None
    tool_arguments: dict[str, Any] | None = None
    own_task_queue: bool = True
    """Whether the example's CLI commands get a fresh task queue (`SLEUTH_TASK_QUEUE`); the
    Python examples name their own queue."""
    files: list[str] = field(default_factory=list)
    """Files the commands must leave behind."""
    asks_the_model: bool = True
    """Whether the example's default model answers (False: it scripts its own)."""


CASES: dict[str, Example] = {
    "deep_agent_quickstart": Example(
        answer=ACME,
        expected=[r"stopped: \S+", r"tools called: .*search_notes.*submit", "answer: "],
    ),
    "research_own_files": Example(
        answer="Customers may ask for a full refund within 30 days of purchase.",
        expected=[r"handbook: 2 files \(2 added\)", r"research run research-handbook-"],
        files=["report.md"],
    ),
    "samples_worker": Example(
        answer=ACME,
        tool="price_list",
        expected=[
            "ticket: Customer asks whether Acme's CRM costs more than \\$40 per seat.",
            f"research: grounded - {re.escape(ACME)}",
        ],
        own_task_queue=False,
    ),
    "nightly_scan": Example(
        answer="Acme Corp's contract renews in March and its SOC 2 report is dated 2025.",
        tool="vendor_file",
        expected=[r"acme", r"globex", r"nightly-vendors"],
    ),
    "human_review": Example(
        answer=ACME,
        tool="price_list",
        expected=[
            r"waiting for review: summary-1 - ",
            f"ended: grounded - {re.escape(ACME)}",
            r"decisions: \['approve'\]",
        ],
        own_task_queue=False,
    ),
    "serve_sse": Example(
        answer=ACME,
        tool="price_list",
        expected=[
            r"started research-",
            r"event research\.node\.started",
            r"event research\.finished",
            r"status COMPLETED",
            f'summary "{re.escape(ACME)}"',
        ],
    ),
    "child_workflow": Example(
        answer=ACME,
        tool="price_list",
        expected=[f"research: grounded - {re.escape(ACME)}", f"analyst: {re.escape(ACME)}"],
        own_task_queue=False,
    ),
    "testing_kit": Example(answer=ACME, expected=[r"1 passed"], asks_the_model=False),
    "yaml_agent": Example(
        answer="Customers may ask for a full refund within 30 days of purchase.",
        expected=[r"within 30 days"],
        tool="read-handbook",
        tool_arguments={"path": "refunds.md"},
    ),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_example_has_a_readme_and_is_listed() -> None:
    index = (EXAMPLES / "README.md").read_text()
    folders = sorted(path.name for path in EXAMPLES.iterdir() if path.is_dir())
    for name in folders:
        assert (EXAMPLES / name / "README.md").is_file(), f"examples/{name} needs a README"
        assert f"`{name}/`" in index, f"examples/README.md must list {name}"
    assert set(CASES) <= set(folders)


@pytest.mark.parametrize("name", sorted(CASES))
async def test_the_example_runs_as_its_readme_says(
    name: str, dev_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    case = CASES[name]
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / name, folder)
    script = page_script((folder / "README.md").read_text())
    assert script.strip(), f"examples/{name}/README.md shows no command"
    responder = research_responder(case.answer, tool=case.tool, tool_arguments=case.tool_arguments)
    with openai_server(responder) as model:
        env = {
            **os.environ,
            **model.env(),
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "PORT": str(free_port()),
        }
        env.pop("SLEUTH_TASK_QUEUE", None)
        if case.own_task_queue:
            env["SLEUTH_TASK_QUEUE"] = f"{name}-{uuid.uuid4().hex[:8]}"
        done = run_script(script, cwd=folder, env=env, timeout=scaled(300))
        asked = len(model.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    assert asked > 0 or not case.asks_the_model, "the example never asked the model"
    position = 0
    for pattern in case.expected:
        found = re.compile(pattern).search(done.stdout, position)
        assert found, f"{pattern!r} not printed (after position {position}):\n{done.stdout}"
        position = found.end()
    for name_of_file in case.files:
        assert (folder / name_of_file).is_file()


async def test_the_readme_hello_world_runs(dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Hello world", 1)[1].split("\n## ", 1)[0]
    script = page_script(section)
    assert "cat > hello.py" in script and "sleuth research " in script
    with openai_server(
        research_responder("Acme charges $40 per seat.", tool="price_list")
    ) as model:
        env = {
            **os.environ,
            **model.env(),
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "SLEUTH_TASK_QUEUE": f"hello-{uuid.uuid4().hex[:8]}",
        }
        done = run_script(script, cwd=tmp_path, env=env, timeout=scaled(300))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Acme charges $40 per seat." in done.stdout
    assert re.search(r"Grounding score: 100% of claims grounded", done.stdout), done.stdout
