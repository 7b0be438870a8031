"""The fault matrix: every workflow type, killed (SIGKILL to the worker's process group) in every
kind of step, mid-step and right after a tool call returned; then a new worker finishes the runs.

All cells of `tests.helpers.apps.fault_app.CELLS` run at once on one `sleuth worker` process, each stopped
at its point; one SIGKILL hits them all. The after-tool cells are killed as soon as their tool
has returned and the step's checkpoint is durable — before the loop goes on, and long before a
heartbeat could carry the checkpoint (that is the case the journal exists for). Shared by
`tests/workflows/test_fault_matrix.py` and `bench/recovery.py`, on the crash tests' worker helpers.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from sleuth.activities.agent_models import AgentRequest, AgentStepConfig
from sleuth.activities.checkpoints import journal_name, journal_result, read_journal
from sleuth.activities.decompose_models import DecomposeConfig, DecomposeInput
from sleuth.activities.pipeline_models import PipelineConfig, PipelineInput
from sleuth.activities.research_models import ResearchNodeConfig, ResearchRequest
from sleuth.activities.scan_models import ScanRequest, ScanSettings
from sleuth.research import NODES
from sleuth.runtime.artifacts import LocalArtifactStore, default_artifact_store, get_json
from sleuth.workflows import (
    AgentWorkflow,
    DecomposeWorkflow,
    KnowledgeScanWorkflow,
    PipelineWorkflow,
    ResearchWorkflow,
)
from tests.helpers.apps.fault_app import CELLS, FAULT_DIR_ENV, Cell
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import start_sleuth_worker, stop, wait_for

APP = "tests.helpers.apps.fault_app:app"
WORKER_ENV = {
    "SLEUTH_MAX_CONCURRENT_ACTIVITIES": "64",
    "SLEUTH_ACTIVITY_THREADS": "64",
    "SLEUTH_LOG_LEVEL": "WARNING",
}


@dataclass
class CellOutcome:
    """What happened to one cell."""

    cell: Cell
    heartbeat_seconds: float
    """The default heartbeat timeout of the step that was killed."""
    resumed_after: float | None = None
    """Seconds from the SIGKILL to the first activity attempt of the run that started after it."""
    kill_after_return: float | None = None
    """After-tool cells: seconds from the tool's return to the SIGKILL."""
    calls: Counter[str] = field(default_factory=Counter)
    """How often each tool call of the run completed."""
    returns: list[str] = field(default_factory=list)
    """Each completed tool call: topic, activity, attempt and seconds after the kill (a failure
    message shows which attempts ran a call twice)."""
    error: str | None = None
    """Why the run failed, if it did."""

    @property
    def repeated_calls(self) -> int:
        return sum(count - 1 for count in self.calls.values() if count > 1)


@dataclass
class MatrixReport:
    outcomes: list[CellOutcome]
    worker_log: str

    def repeated_calls(self, *, corrupt: bool = False) -> int:
        return sum(o.repeated_calls for o in self.outcomes if o.cell.corrupt == corrupt)

    def runs_lost(self) -> list[str]:
        return [o.cell.name for o in self.outcomes if o.error is not None]


def default_heartbeats() -> dict[str, float]:
    """The default heartbeat timeout of every heartbeating activity, by activity type."""
    research = ResearchNodeConfig()
    agent = AgentStepConfig()
    decompose = DecomposeConfig()
    pipeline = PipelineConfig()
    scan = ScanSettings()
    found: dict[str, float | None] = {
        **{f"research.{node}": research.for_node(node).heartbeat_seconds for node in NODES},
        "agent.model_turn": agent.model.heartbeat_seconds,
        "agent.tool": agent.tool.heartbeat_seconds,
        "agent.subagent": agent.subagent.heartbeat_seconds,
        "decompose.decide": decompose.decide.heartbeat_seconds,
        "decompose.solve": decompose.solve.heartbeat_seconds,
        "decompose.synthesize": decompose.synthesize.heartbeat_seconds,
        "pipeline.stage": pipeline.stage.heartbeat_seconds,
        "pipeline.condition": pipeline.condition.heartbeat_seconds,
        "scan.list_page": scan.list_heartbeat_seconds,
        "scan.research_item": scan.item_heartbeat_seconds,
        "scan.record_failure": scan.record_heartbeat_seconds,
    }
    return {name: seconds or 0.0 for name, seconds in found.items()}


async def start_cell(client: Client, cell: Cell, task_queue: str) -> WorkflowHandle[Any, Any]:
    """Start the cell's run with every setting at its default."""
    tag = f"[cell:{cell.name}]"
    workflow_id = f"fault-{cell.name}-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"id": workflow_id, "task_queue": task_queue}
    if cell.workflow == "research":
        request = ResearchRequest(
            prompt=f"{tag} How many widgets did Acme ship?", research="fault-research"
        )
        return await client.start_workflow(ResearchWorkflow.run, request, **options)
    if cell.workflow == "agent":
        agent = AgentRequest(agent="fault-agent", prompt=f"{tag} Size the CRM market")
        return await client.start_workflow(AgentWorkflow.run, agent, **options)
    if cell.workflow == "scan":
        # The failing item fails on its first attempt, so its failure is recorded at once.
        attempts = 1 if cell.hold == "sink" else ScanSettings().item_max_attempts
        scan = ScanRequest(
            provider=cell.name,
            research="fault-scan",
            scan_id=cell.name,
            sink="fault-rows",
            settings=ScanSettings(item_max_attempts=attempts),
        )
        return await client.start_workflow(KnowledgeScanWorkflow.run, scan, **options)
    if cell.workflow == "decompose":
        task = DecomposeInput(agent="fault-deep", task=f"{tag} Compare vendors")
        return await client.start_workflow(DecomposeWorkflow.run, task, **options)
    pipeline = "fault-loop" if cell.hold == "condition" else "fault-stages"
    run = PipelineInput(pipeline=pipeline, task=f"{tag} Write the report")
    return await client.start_workflow(PipelineWorkflow.run, run, **options)


def read_ledger(folder: Path) -> list[dict[str, Any]]:
    path = folder / "ledger.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def marker(folder: Path, kind: str, cell: Cell) -> dict[str, Any] | None:
    path = folder / kind / cell.name
    return json.loads(path.read_text()) if path.exists() else None


def step_journal(identity: dict[str, Any]) -> str:
    return journal_name(
        identity["namespace"], identity["workflow_id"], identity["run_id"], identity["activity_id"]
    )


def journal_holds(name: str, text: str) -> bool:
    """Whether the step's durable checkpoint (or the result it points at) contains `text`."""
    store = default_artifact_store()
    result = journal_result(store, name)
    if result is not None:
        return text in json.dumps(get_json(store, result))
    return text in json.dumps(read_journal(store, name))


def gated_call(folder: Path, cell: Cell) -> dict[str, Any] | None:
    """The ledger entry of the after-tool cell's gated call, once it has returned."""
    topic = f"{cell.name}/{cell.hold.removeprefix('gate:')}"
    return next((e for e in read_ledger(folder) if e["topic"] == topic), None)


def damage_newest_checkpoint(identity: dict[str, Any]) -> None:
    store = default_artifact_store()
    assert isinstance(store, LocalArtifactStore)
    raw = store.read_pointer(step_journal(identity))
    assert raw is not None, "the step has no journal to damage"
    digest = json.loads(raw)["checkpoints"][0].removeprefix("sha256:")
    (store.root / digest[:2] / digest[2:]).write_bytes(b'{"loop": "damaged on disk"')


async def first_start_after(
    client: Client, identity: dict[str, Any], kill_time: float
) -> float | None:
    """Seconds from the kill to the first activity attempt of the killed step's workflow run
    that started after it (the retried step, or the next one if the step had completed)."""
    handle = client.get_workflow_handle(identity["workflow_id"], run_id=identity["run_id"])
    starts = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_started_event_attributes"):
            starts.append(event.event_time.seconds + event.event_time.nanos / 1e9)
    later = [start - kill_time for start in starts if start > kill_time]
    return min(later) if later else None


async def run_matrix(
    client: Client,
    folder: Path,
    cells: list[Cell] | None = None,
    *,
    arrival_timeout: float | None = None,
    completion_timeout: float | None = None,
) -> MatrixReport:
    """Run the cells, kill their worker, start another and wait for every run (see the module
    docstring). `folder` is the cells' control folder; the worker's log is written there."""
    cells = cells if cells is not None else list(CELLS.values())
    address = client.service_client.config.target_host
    task_queue = f"fault-{uuid.uuid4()}"
    env = {**WORKER_ENV, FAULT_DIR_ENV: str(folder)}
    log = folder / "worker.log"
    first = start_sleuth_worker(APP, address, task_queue, env=env, log=log)
    second = None
    heartbeats = default_heartbeats()
    outcomes = [CellOutcome(cell, heartbeats[cell.activity]) for cell in cells]
    try:
        handles = [await start_cell(client, cell, task_queue) for cell in cells]

        def missing() -> list[str]:
            return [c.name for c in cells if marker(folder, "arrived", c) is None]

        await wait_for(
            lambda: not missing(),
            "every cell at its point",
            timeout=arrival_timeout or scaled(240),
            detail=lambda: f"not there: {missing()}\n{log.read_text()[-3000:]}",
        )
        after = [c for c in cells if c.kill == "after-tool"]
        (folder / "gate").touch()

        def checkpointed() -> bool:
            for cell in after:
                entry = gated_call(folder, cell)
                if entry is None or not journal_holds(step_journal(entry), entry["topic"] + ":"):
                    return False
            return True

        await wait_for(checkpointed, "the gated tool calls' checkpoints", timeout=scaled(60))
        kill_time = time.time()
        stop(first, signal.SIGKILL)
        for cell in cells:
            if cell.corrupt:
                identity = marker(folder, "arrived", cell)
                assert identity is not None
                damage_newest_checkpoint(identity)
        (folder / "release").touch()
        second = start_sleuth_worker(APP, address, task_queue, env=env, log=log)
        results = await asyncio.wait_for(
            asyncio.gather(*(h.result() for h in handles), return_exceptions=True),
            completion_timeout or scaled(300),
        )
    finally:
        stop(first, signal.SIGKILL)
        stop(second)
    ledger = read_ledger(folder)
    for outcome, result in zip(outcomes, results, strict=True):
        cell = outcome.cell
        if isinstance(result, BaseException):
            outcome.error = f"{type(result).__name__}: {result}"
        mine = [e for e in ledger if e["topic"].startswith(cell.name + "/")]
        outcome.calls = Counter(e["topic"] for e in mine)
        outcome.returns = [
            f"{e['topic']} {e.get('activity_type')}#{e.get('activity_id')} "
            f"attempt {e.get('attempt')} at {e['returned_at'] - kill_time:+.1f} s"
            for e in mine
        ]
        identity = marker(folder, "arrived", cell)
        assert identity is not None
        outcome.resumed_after = await first_start_after(client, identity, kill_time)
        entry = gated_call(folder, cell) if cell.kill == "after-tool" else None
        if entry is not None:
            outcome.kill_after_return = kill_time - entry["returned_at"]
    return MatrixReport(outcomes, log.read_text())
