"""The SQLite-backed dev server (`sleuth server`) stopped mid-run and started again: a research run,
an agent run, a decomposition and a pipeline each complete afterwards, every tool call once."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter
from pathlib import Path

import pytest

from sleuth.workers.client import connect
from tests.helpers.apps.fault_app import CELLS, FAULT_DIR_ENV
from tests.helpers.fault_matrix import APP, WORKER_ENV, marker, read_ledger, start_cell
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import (
    free_port_pair,
    start_foreground_server,
    start_sleuth_worker,
    stop,
    stop_foreground_server,
    wait_for,
)

pytestmark = pytest.mark.slow

RUNS = ["research-summarize-mid", "agent-model-mid", "decompose-decide-mid", "pipeline-stage-mid"]
"""One run per workflow type, each waiting inside a step while the server goes away."""


async def test_runs_complete_after_the_dev_server_restarts(tmp_path: Path) -> None:
    port = free_port_pair()
    address = f"localhost:{port}"
    server_args = ("--port", str(port), "--ui-port", str(port + 1000))
    server_args += ("--db-file", str(tmp_path / "server" / "temporal.sqlite"))
    folder = tmp_path / "fault"
    folder.mkdir()
    cells = [CELLS[name] for name in RUNS]
    log = folder / "worker.log"
    server, _ = start_foreground_server(*server_args)
    worker = None
    try:
        client = await connect(address)
        task_queue = f"restart-{uuid.uuid4()}"
        env = {**WORKER_ENV, FAULT_DIR_ENV: str(folder)}
        worker = start_sleuth_worker(APP, address, task_queue, env=env, log=log)
        handles = [await start_cell(client, cell, task_queue) for cell in cells]
        await wait_for(
            lambda: all(marker(folder, "arrived", c) for c in cells),
            "every run inside its step",
            timeout=scaled(120),
            detail=log.read_text,
        )

        stop_foreground_server(server)
        # The steps finish while the server is away: their results wait for it, or are lost and
        # the steps retried from their journals.
        (folder / "release").touch()
        server, _ = start_foreground_server(*server_args)

        client = await connect(address)
        results = await asyncio.wait_for(
            asyncio.gather(*(client.get_workflow_handle(h.id).result() for h in handles)), 180
        )
    finally:
        stop(worker, signal.SIGTERM)
        stop_foreground_server(server)

    research, agent, decomposition, pipeline = results
    assert research["final_state"]["end_reason"] == "grounded"
    assert agent["stop_reason"] == "completed"
    assert decomposition["outcome"] == "completed" and "synth" in decomposition["answer"]
    assert pipeline["success"] and "Report" in pipeline["final_output"]
    calls = Counter(entry["topic"] for entry in read_ledger(folder))
    assert calls and set(calls.values()) == {1}, calls
