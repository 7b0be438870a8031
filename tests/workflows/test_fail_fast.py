"""Bad starts fail the run at once with a message a person can act on (issue 45, part 4).

Every Sleuth workflow type is started from the plain `temporal` CLI without input, with a JSON
string, a list, an object with a wrong field and two inputs: each run must fail (not retry its
workflow task forever) with a message naming the input model, its fields and an example.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from temporalio import workflow as temporal_workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment

import sleuth.workflows
from sleuth import create_deepagent
from sleuth.activities.agent_models import AgentRequest
from sleuth.activities.decompose_models import DecomposeInput
from sleuth.activities.pipeline_models import PipelineInput
from sleuth.activities.research_models import ResearchRequest
from sleuth.activities.scan_models import ScanRequest
from sleuth.apps.app import App
from sleuth.models.scripted import ScriptedModel
from sleuth.rag import InMemoryVectorStore, RAGRetriever
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.input_check import INPUT_ERROR_TYPE, INPUT_EXAMPLES
from sleuth.workers.scans import start_scan
from sleuth.workers.worker import build_worker
from tests.helpers.cli_process import sleuth_command
from tests.helpers.timeouts import scaled

TASK_FAILED = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
WORKFLOW_TYPES = sorted(sleuth.workflows._CLASSES)
BAD_INPUTS: dict[str, list[str]] = {
    "none": [],
    "string": ['"Summarise the CRM market"'],
    "list": ['["Summarise the CRM market"]'],
    "wrong-field": ['{"promptt": "typo", "tsk": "typo"}'],
    "two-inputs": ['{"prompt": "a"}', '{"prompt": "b"}'],
}


def test_every_workflow_type_has_an_example_that_fits_its_input() -> None:
    assert set(INPUT_EXAMPLES) == set(WORKFLOW_TYPES)
    for name in WORKFLOW_TYPES:
        [model] = temporal_workflow._Definition.must_from_class(
            getattr(sleuth.workflows, name)
        ).arg_types
        model.model_validate(INPUT_EXAMPLES[name])


def _cli_start(address: str, task_queue: str, workflow_type: str, inputs: list[str]) -> str:
    workflow_id = f"fail-fast-{workflow_type}-{uuid.uuid4().hex[:8]}"
    command = [str(temporal_cli()), "workflow", "start", "--address", address]
    command += ["--task-queue", task_queue, "--type", workflow_type, "--workflow-id", workflow_id]
    for value in inputs:
        command += ["--input", value]
    started = subprocess.run(command, capture_output=True, text=True, timeout=scaled(60))
    assert started.returncode == 0, started.stderr
    return workflow_id


async def _failure(env: WorkflowEnvironment, workflow_id: str) -> ApplicationError:
    handle = env.client.get_workflow_handle(workflow_id)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=scaled(30))
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    return cause


@pytest.mark.parametrize("workflow_type", WORKFLOW_TYPES)
async def test_a_cli_start_with_bad_input_fails_naming_the_expected_input(
    dev_env: WorkflowEnvironment, workflow_type: str
) -> None:
    address = dev_env.client.service_client.config.target_host
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, App(), task_queue=task_queue):
        started = {
            kind: _cli_start(address, task_queue, workflow_type, inputs)
            for kind, inputs in BAD_INPUTS.items()
        }
        for kind, workflow_id in started.items():
            cause = await _failure(dev_env, workflow_id)
            assert cause.type == INPUT_ERROR_TYPE, (kind, cause)
            assert cause.non_retryable
            message = cause.message
            assert message.startswith(f"{workflow_type} takes one input"), (kind, message)
            assert json.dumps(INPUT_EXAMPLES[workflow_type]) in message, (kind, message)
            assert "required field(s)" in message
            if kind == "none":
                assert "it got no input" in message
            if kind == "two-inputs":
                assert "it got 2 inputs" in message
            if kind == "wrong-field":
                assert "promptt" in message or "tsk" in message, message
            # Failed at its first workflow task: nothing was retried.
            history = await dev_env.client.get_workflow_handle(workflow_id).fetch_history()
            task_failures = [e for e in history.events if e.event_type == TASK_FAILED]
            assert not task_failures, (kind, task_failures)


def _names_app() -> App:
    app = App(name="names")
    app.agent("bad-model", lambda: create_deepagent(model="nosuch:model-x", grounding=False))
    app.agent(
        "bad-store",
        lambda: create_deepagent(model=ScriptedModel(), datastores=["nosuch"], grounding=False),
    )
    return app


@pytest.mark.parametrize(
    ("workflow_type", "payload", "expected"),
    [
        ("AgentWorkflow", {"agent": "nobody", "prompt": "go"}, "unknown agent 'nobody'"),
        ("ResearchWorkflow", {"prompt": "go", "research": "nosuch"}, "unknown research config"),
        ("KnowledgeScanWorkflow", {"provider": "nosuch"}, "unknown provider 'nosuch'"),
        ("AgentWorkflow", {"agent": "bad-store", "prompt": "go"}, "unknown datastore 'nosuch'"),
        ("AgentWorkflow", {"agent": "bad-model", "prompt": "go"}, "unknown model provider"),
    ],
)
async def test_an_unknown_name_is_the_top_level_failure_message(
    dev_env: WorkflowEnvironment, workflow_type: str, payload: dict[str, Any], expected: str
) -> None:
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, _names_app(), task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            workflow_type, payload, id=f"names-{uuid.uuid4()}", task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), timeout=scaled(60))
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert expected in cause.message, cause.message
    assert cause.non_retryable
    assert isinstance(cause.cause, ActivityError), "the activity's failure stays as the cause"


def test_create_deepagent_takes_datastore_names_of_the_current_app() -> None:
    app = App(name="stores")
    app.datastore("guides", RAGRetriever(store=InMemoryVectorStore()), description="how-to")
    app.agent(
        "guide",
        lambda: create_deepagent(model=ScriptedModel(), datastores=["guides"], grounding=False),
    )
    agent = app.new_agent("guide")  # the factory runs with its App active, as in a worker
    assert "search_guides" in agent.tools  # type: ignore[attr-defined]
    assert "how-to" in (agent.system_prompt or "")  # type: ignore[attr-defined]


@pytest.mark.parametrize("datastores", ["guides", 3, [RAGRetriever(store=InMemoryVectorStore())]])
def test_create_deepagent_names_the_accepted_datastore_forms(datastores: Any) -> None:
    with pytest.raises(TypeError, match=r"app\.datastore\(name, retriever\)"):
        create_deepagent(model=ScriptedModel(), datastores=datastores, grounding=False)


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (ResearchRequest, {"prompt": "caf\udce9 market"}),
        (AgentRequest, {"agent": "analyst", "prompt": "lone \ud800 surrogate"}),
        (DecomposeInput, {"agent": "deep", "task": "\udfff"}),
        (PipelineInput, {"pipeline": "report", "task": "x\ud800"}),
        (ScanRequest, {"provider": "p\ud800"}),
    ],
)
def test_text_that_is_not_unicode_is_refused_when_the_input_is_made(
    model: type[BaseModel], fields: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError, match="is not valid Unicode: it has a lone surrogate"):
        model(**fields)


async def test_the_client_helper_refuses_a_lone_surrogate_before_starting(
    time_env: WorkflowEnvironment,
) -> None:
    with pytest.raises(ValidationError, match="not valid Unicode"):
        await start_scan(time_env.client, ScanRequest(provider="\ud800"), task_queue="never")


def test_sleuth_research_refuses_an_argument_that_is_not_utf8() -> None:
    argument = os.fsdecode(b"caf\xe9 market")  # how Python hands an invalid UTF-8 byte over
    done = subprocess.run(
        sleuth_command("research", argument, "--no-wait"),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=scaled(120),
    )
    assert done.returncode != 0
    assert "prompt in ResearchRequest is not valid Unicode" in done.stderr, done.stderr
    assert "U+DCE9" in done.stderr


def test_a_lone_surrogate_escape_in_the_json_input_is_explained() -> None:
    from temporalio.api.common.v1 import Payload
    from temporalio.contrib.pydantic import pydantic_data_converter

    from sleuth.workers.input_check import input_problem

    def problem(data: bytes) -> str | None:
        payload = Payload(metadata={"encoding": b"json/plain"}, data=data)
        return input_problem(
            "ResearchWorkflow",
            ResearchRequest,
            [payload],
            pydantic_data_converter.payload_converter,
        )

    surrogate = problem(b'{"prompt": "a\\ud800"}')
    assert (
        surrogate is not None and "lone surrogate" in surrogate and "not valid Unicode" in surrogate
    )
    broken = problem(b'{"prompt": ')
    assert broken is not None and "surrogate" not in broken and "Invalid JSON" in broken
    assert problem(b'{"prompt": "fine"}') is None
