"""A user's own project, run the way the README tells a new user to: a folder holding
`myproject/research.py` (an App), `sleuth worker --app myproject.research:app` started from that
folder through the installed `sleuth` console script (whose import path starts with its own bin
directory, not the working directory: the case `python -c` and `python -m` would hide), then a
run started by name from a plain Temporal client, as the Temporal CLI would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import wait_for

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).with_name("sleuth")

RESEARCH_MODULE = textwrap.dedent(
    '''
    """My research: one config, "market-report", answered by a scripted model."""

    from sleuth import App, ScriptedModel, create_research_workflow, tool
    from sleuth.models.scripted import text, tool_call
    from sleuth.research import node_of_request

    FACT = "The CRM market grew 12 percent in 2024 according to Gartner."


    @tool
    def market_notes(topic: str) -> str:
        """Look a topic up in the market notes."""
        import notes  # the project's own module, beside myproject/, imported at the first call

        return notes.lookup(topic)


    def answer(call):
        node = node_of_request(call.messages)
        if node == "execute" and not any(m.role == "tool" for m in call.messages):
            return tool_call("market_notes", topic="crm")
        if node == "plan":
            return text('["How fast did the CRM market grow?"]')
        if node == "grounding_eval":
            return text("Yes")
        return text(FACT)


    app = App(task_queue="TASK_QUEUE", name="myproject")
    app.research(
        "market-report",
        create_research_workflow(
            model=ScriptedModel(responder=answer), tools=[market_notes], causal_inference=False
        ),
    )
    '''
)


@pytest.fixture
def task_queue() -> str:
    return f"myproject-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def project(tmp_path: Path, task_queue: str) -> Path:
    """An empty folder with the user's package in it, as the README lays it out (its App's task
    queue fresh for each test)."""
    folder = tmp_path / "project"
    (folder / "myproject").mkdir(parents=True)
    (folder / "myproject" / "__init__.py").write_text("")
    (folder / "myproject" / "research.py").write_text(
        RESEARCH_MODULE.replace("TASK_QUEUE", task_queue)
    )
    (folder / "notes.py").write_text(
        "def lookup(topic):\n"
        "    return 'The CRM market grew 12 percent in 2024 according to Gartner.'\n"
    )
    return folder


def worker_env(address: str) -> dict[str, str]:
    # PYTHONPATH names this checkout (so the console script runs the code under test), never the
    # project folder: finding `myproject` is the command's job.
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "TEMPORAL_ADDRESS": address,
    }


@pytest.fixture
def user_worker(
    project: Path, dev_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> Iterator[tuple[str, Path]]:
    """`sleuth worker --app myproject.research:app`, the README's command, run from the project
    folder; yields the App's task queue and the worker's log file."""
    assert CONSOLE_SCRIPT.is_file(), f"the console script {CONSOLE_SCRIPT} is not installed"
    log = tmp_path / "worker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                str(CONSOLE_SCRIPT),
                "worker",
                "--app",
                "myproject.research:app",
                "--task-queue",
                task_queue,
            ],
            cwd=project,
            env=worker_env(dev_env.client.service_client.config.target_host),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield task_queue, log
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=scaled(30))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


async def client_of(dev_env: WorkflowEnvironment) -> Client:
    """A plain client with only the pydantic converter: what any Temporal client sends."""
    return await Client.connect(
        dev_env.client.service_client.config.target_host,
        namespace=dev_env.client.namespace,
        data_converter=pydantic_data_converter,
    )


async def serving(log: Path) -> None:
    await wait_for(
        lambda: "sleuth worker: serving app 'myproject'" in log.read_text(),
        "the user's worker to start",
        detail=log.read_text,
    )


async def test_the_worker_imports_the_app_from_the_working_directory_and_serves_a_run(
    user_worker: tuple[str, Path], dev_env: WorkflowEnvironment, project: Path
) -> None:
    task_queue, log = user_worker
    await serving(log)
    assert "research: market-report" in log.read_text()
    client = await client_of(dev_env)
    # The Temporal CLI's `--type ResearchWorkflow --input '{"prompt": …, "research": …}'`.
    outcome = await client.execute_workflow(
        "ResearchWorkflow",
        {"prompt": "Summarise the CRM market", "research": "market-report"},
        id=f"user-project-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=dict,
    )
    assert "12 percent" in outcome["final_state"]["summary"]
    [evidence] = outcome["final_state"]["evidence"]
    assert evidence["tool"] == "market_notes" and evidence["success"], evidence

    # The README's `sleuth research … --app myproject.research:app --research market-report`:
    # it imports the App from the working directory to learn its task queue, and the worker
    # above runs the research.
    research = subprocess.run(
        [
            str(CONSOLE_SCRIPT), "research", "Summarise the CRM market",
            "--app", "myproject.research:app", "--research", "market-report", "--json",
        ],
        cwd=project,
        env=worker_env(dev_env.client.service_client.config.target_host),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )  # fmt: skip
    assert research.returncode == 0, research.stderr
    assert "running one in this process" not in research.stderr  # the worker served it
    assert "12 percent" in json.loads(research.stdout)["final_state"]["summary"]


async def test_an_unknown_research_name_is_one_line_in_the_worker_log(
    user_worker: tuple[str, Path], dev_env: WorkflowEnvironment
) -> None:
    task_queue, log = user_worker
    await serving(log)
    client = await client_of(dev_env)
    with pytest.raises(WorkflowFailureError) as failure:
        await client.execute_workflow(
            "ResearchWorkflow",
            {"prompt": "Summarise the CRM market", "research": "no-such-report"},
            id=f"user-project-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
    assert "no-such-report" in str(failure.value.cause)
    await wait_for(lambda: "no-such-report" in log.read_text(), "the worker to log the bad input")
    text = log.read_text()
    assert "Traceback" not in text, text
    naming = [line for line in text.splitlines() if "no-such-report" in line]
    assert len(naming) == 1, text
    assert "market-report" in naming[0], naming  # what the worker does have

    # A value out of bounds fails the run at its start, and the log stays free of tracebacks.
    with pytest.raises(WorkflowFailureError) as failure:
        await client.execute_workflow(
            "ResearchWorkflow",
            {"prompt": "Summarise the CRM market", "research": "market-report", "max_replans": 99},
            id=f"user-project-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
    assert "max_replans" in str(failure.value.cause)
    assert "Traceback" not in log.read_text(), log.read_text()
