"""Fail a Sleuth run whose start input does not fit its workflow, at its first workflow task.

The SDK decodes a workflow's input and calls its `__init__` outside the code a workflow can guard:
a start with no input (`temporal workflow start` without `--input`), with two inputs, or with
input the SDK cannot turn into the input model raised a `TypeError` or `RuntimeError` there,
which fails the workflow *task*, and the server retries that task forever. `InputCheckingRunner`
sits between the worker and the sandbox: on the activation that starts a run of one of Sleuth's
workflows it decodes the input as the workflow would, and when that fails it answers the
activation itself with a command that fails the run, naming the expected input model, its fields
and an example start command. The check is a pure function of the history's first event, so a
replay makes the same decision.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import temporalio.workflow
from pydantic import BaseModel, ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import PayloadConverter
from temporalio.exceptions import ApplicationError
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

INPUT_ERROR_TYPE = "InvalidWorkflowInput"
"""The `ApplicationError` type of a run failed for its start input."""

INPUT_EXAMPLES: Mapping[str, Mapping[str, Any]] = {
    "ResearchWorkflow": {"prompt": "Summarise the CRM market", "research": "default"},
    "AgentWorkflow": {"agent": "analyst", "prompt": "Compare the three largest CRM vendors"},
    "KnowledgeScanWorkflow": {"provider": "assets", "research": "default"},
    "DecomposeWorkflow": {"agent": "deep-researcher", "task": "Map the CRM market"},
    "PipelineWorkflow": {"pipeline": "report", "task": "Write a CRM market report"},
}
"""An input that fits each Sleuth workflow's model, shown in the failure message. Only the
workflows named here are checked; a user's own workflows on the same worker are left alone."""

_MAX_LISTED_PROBLEMS = 5


def input_problem(
    workflow_type: str,
    model: type[BaseModel],
    arguments: Sequence[Payload],
    converter: PayloadConverter,
) -> str | None:
    """Why `arguments` cannot start `workflow_type` (whose input is `model`), or None if they can."""
    if len(arguments) != 1:
        got = "no input" if not arguments else f"{len(arguments)} inputs"
        return _explain(workflow_type, model, f"it got {got}")
    try:
        converter.from_payloads(list(arguments), type_hints=[model])
    except ValidationError as exc:
        return _explain(workflow_type, model, _validation_problems(exc))
    except Exception as exc:
        return _explain(workflow_type, model, f"its input could not be read ({exc})")
    return None


def _validation_problems(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_input=False, include_url=False)[:_MAX_LISTED_PROBLEMS]:
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"]
        if error["type"] == "json_invalid" and "escape" in message:
            message += " (a lone surrogate such as \\ud800 is not valid Unicode, nor JSON text)"
        problems.append(f"{where}: {message}" if where else message)
    more = exc.error_count() - len(problems)
    listed = "; ".join(problems) + (f"; and {more} more" if more > 0 else "")
    return f"its input does not fit: {listed}"


def _explain(workflow_type: str, model: type[BaseModel], problem: str) -> str:
    required = [name for name, field in model.model_fields.items() if field.is_required()]
    optional = [name for name, field in model.model_fields.items() if not field.is_required()]
    fields = f"required field(s) {', '.join(required) or 'none'}"
    if optional:
        fields += f"; optional: {', '.join(optional)}"
    example = json.dumps(INPUT_EXAMPLES.get(workflow_type, {}))
    return (
        f"{workflow_type} takes one input, a JSON object for {model.__name__} ({fields}), but "
        f"{problem}. Example: temporal workflow start --type {workflow_type} "
        f"--task-queue <queue> --input '{example}'"
    )


def _input_model(defn: temporalio.workflow._Definition) -> type[BaseModel] | None:
    if defn.name not in INPUT_EXAMPLES or not defn.arg_types or len(defn.arg_types) != 1:
        return None
    model = defn.arg_types[0]
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


class _InputCheckingInstance(WorkflowInstance):
    """Delegates to the real instance unless the run's start input does not fit."""

    def __init__(self, inner: WorkflowInstance, det: WorkflowInstanceDetails) -> None:
        self._inner = inner
        self._det = det
        self._problem: str | None = None

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        start = next((job for job in act.jobs if job.HasField("initialize_workflow")), None)
        model = _input_model(self._det.defn)
        if start is not None and model is not None:
            self._problem = input_problem(
                self._det.defn.name or "",
                model,
                start.initialize_workflow.arguments,
                self._det.payload_converter_factory(),
            )
        if self._problem is None:
            return self._inner.activate(act)
        return self._fail(act, self._problem, start is not None)

    def _fail(
        self, act: WorkflowActivation, problem: str, starting: bool
    ) -> WorkflowActivationCompletion:
        completion = WorkflowActivationCompletion(run_id=act.run_id)
        completion.successful.SetInParent()
        converter = self._det.payload_converter_factory()
        failure_converter = self._det.failure_converter_class()
        error = ApplicationError(problem, type=INPUT_ERROR_TYPE, non_retryable=True)
        if starting:
            command = completion.successful.commands.add()
            failure_converter.to_failure(error, converter, command.fail_workflow_execution.failure)
        for job in act.jobs:
            if job.HasField("query_workflow"):
                command = completion.successful.commands.add()
                command.respond_to_query.query_id = job.query_workflow.query_id
                failure_converter.to_failure(error, converter, command.respond_to_query.failed)
        return completion

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()


@dataclasses.dataclass(frozen=True)
class InputCheckingSandboxedRunner(SandboxedWorkflowRunner):
    """The SDK's sandboxed runner, with Sleuth's start-input check in front of each instance."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _InputCheckingInstance(super().create_instance(det), det)


class InputCheckingRunner(WorkflowRunner):
    """Any other runner (e.g. `UnsandboxedWorkflowRunner`), with the start-input check in front."""

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _InputCheckingInstance(self.inner.create_instance(det), det)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


def checking_inputs(runner: WorkflowRunner) -> WorkflowRunner:
    """`runner` with the start-input check (once: a runner that has it is returned as it is)."""
    if isinstance(runner, InputCheckingSandboxedRunner | InputCheckingRunner):
        return runner
    if type(runner) is SandboxedWorkflowRunner:
        fields = {f.name: getattr(runner, f.name) for f in dataclasses.fields(runner) if f.init}
        checked = InputCheckingSandboxedRunner(**fields)
        checked.set_worker_level_failure_exception_types(
            runner._worker_level_failure_exception_types
        )
        return checked
    return InputCheckingRunner(runner)


__all__ = [
    "INPUT_ERROR_TYPE",
    "INPUT_EXAMPLES",
    "InputCheckingRunner",
    "InputCheckingSandboxedRunner",
    "checking_inputs",
    "input_problem",
]
