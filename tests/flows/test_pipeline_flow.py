"""`next_pipeline_step`: the pipelines' one control flow, as a pure function (no agents, no I/O)."""

from __future__ import annotations

import pytest

from sleuth.flows.pipeline import (
    CheckCondition,
    Done,
    PipelineRun,
    RunStages,
    StageCall,
    StageOutcome,
    drive_pipeline,
    follow_up_prompt,
    next_pipeline_step,
    record_condition,
    record_stages,
)


def ok(output: str) -> StageOutcome:
    return StageOutcome(output=output)


def failed(stage: str) -> StageOutcome:
    return StageOutcome(error=f"stage {stage!r} failed: RuntimeError: down")


def test_sequential_runs_stages_in_order_feeding_each_output_forward() -> None:
    run = PipelineRun(kind="sequential", task="why?", stages=["research", "draft"])
    first = next_pipeline_step(run)
    assert first == RunStages(calls=[StageCall(index=0, name="research", task="why?")])
    run = record_stages(run, [ok("r")])
    second = next_pipeline_step(run)
    assert second == RunStages(
        calls=[StageCall(index=1, name="draft", task=follow_up_prompt("why?", "r"))]
    )
    run = record_stages(run, [ok("d")])
    done = next_pipeline_step(run)
    assert isinstance(done, Done)
    assert done.result.final_output == "d" and done.result.outputs == ["r", "d"]
    assert done.result.success and done.result.stop_reason == "completed"


def test_a_failed_stage_ends_the_run_without_its_output() -> None:
    run = PipelineRun(kind="sequential", task="t", stages=["a", "boom", "c"])
    run = record_stages(record_stages(run, [ok("a-out")]), [failed("boom")])
    done = next_pipeline_step(run)
    assert isinstance(done, Done)
    assert done.result.success is False and done.result.stop_reason == "error"
    assert done.result.error == "stage 'boom' failed: RuntimeError: down"
    assert done.result.outputs == ["a-out"] and done.result.final_output == ""


def test_parallel_runs_every_branch_at_once_then_merges() -> None:
    run = PipelineRun(
        kind="parallel",
        task="what changed?",
        stages=["web", "data", "docs"],
        branch_tasks=[None, "SELECT deploys", None],
    )
    step = next_pipeline_step(run)
    assert isinstance(step, RunStages)
    assert [(c.index, c.task) for c in step.calls] == [
        (0, "what changed?"),
        (1, "SELECT deploys"),
        (2, "what changed?"),
    ]
    merged = next_pipeline_step(record_stages(run, [ok("w"), ok(""), ok("d")]))
    assert isinstance(merged, Done) and merged.result.final_output == "w\n\nd"
    last = run.model_copy(update={"merge": "last"})
    kept = next_pipeline_step(record_stages(last, [ok("w"), ok("x"), ok("d")]))
    assert isinstance(kept, Done) and kept.result.final_output == "d"


def test_a_failed_branch_keeps_an_empty_output_and_joins_the_errors() -> None:
    run = PipelineRun(kind="parallel", task="q", stages=["a", "b", "c"])
    run = record_stages(run, [failed("a"), ok("b-out"), failed("c")])
    done = next_pipeline_step(run)
    assert isinstance(done, Done) and done.result.outputs == ["", "b-out", ""]
    assert done.result.error == (
        "stage 'a' failed: RuntimeError: down; stage 'c' failed: RuntimeError: down"
    )


def test_loop_checks_each_output_until_the_condition_holds() -> None:
    run = PipelineRun(kind="loop", task="write", stages=["reviser"], max_loops=5)
    assert next_pipeline_step(run) == RunStages(
        calls=[StageCall(index=0, name="reviser", task="write", loop=1)]
    )
    run = record_stages(run, [ok("draft 1")])
    assert next_pipeline_step(run) == CheckCondition(output="draft 1", loop=1)
    run = record_condition(run, met=False)
    assert next_pipeline_step(run) == RunStages(
        calls=[
            StageCall(index=0, name="reviser", task=follow_up_prompt("write", "draft 1"), loop=2)
        ]
    )
    run = record_condition(record_stages(run, [ok("draft 2")]), met=True)
    done = next_pipeline_step(run)
    assert isinstance(done, Done) and done.result.stop_reason == "condition_met"
    assert done.result.final_output == "draft 2" and done.result.outputs == ["draft 1", "draft 2"]


def test_loop_stops_at_max_loops_and_on_a_failing_condition() -> None:
    run = PipelineRun(kind="loop", task="t", stages=["r"], max_loops=2)
    for output in ("one", "two"):
        run = record_condition(record_stages(run, [ok(output)]), met=False)
    capped = next_pipeline_step(run)
    assert isinstance(capped, Done) and capped.result.stop_reason == "max_loops"
    assert capped.result.final_output == "two"

    broken = record_stages(PipelineRun(kind="loop", task="t", stages=["r"]), [ok("one")])
    broken = record_condition(broken, met=False, error="stage 'condition' failed: KeyError: x")
    done = next_pipeline_step(broken)
    assert isinstance(done, Done) and done.result.success is False
    assert done.result.outputs == ["one"] and "KeyError" in (done.result.error or "")


@pytest.mark.parametrize("kind", ["sequential", "parallel", "loop"])
def test_next_step_is_pure_and_the_state_is_plain_json(kind: str) -> None:
    run = PipelineRun(kind=kind, task="t", stages=["a", "b"] if kind != "loop" else ["a"])  # type: ignore[arg-type]
    run = record_stages(run, [ok("x")] * (2 if kind == "parallel" else 1))
    before = run.model_dump()
    step = next_pipeline_step(run)
    assert run.model_dump() == before  # reading the next step changes nothing
    assert next_pipeline_step(run) == step
    assert next_pipeline_step(PipelineRun.model_validate_json(run.model_dump_json())) == step


async def test_drive_pipeline_asks_its_runner_for_each_step_and_nothing_else() -> None:
    asked: list[object] = []

    class Recorder:
        async def run_stage(self, call: StageCall) -> StageOutcome:
            asked.append(call)
            return ok(f"out{call.loop}")

        async def check_condition(self, step: CheckCondition) -> tuple[bool, str | None]:
            asked.append(step)
            return step.output == "out2", None

    run = PipelineRun(kind="loop", task="t", stages=["r"], max_loops=5)
    result = await drive_pipeline(run, Recorder())
    assert [type(a).__name__ for a in asked] == [
        "StageCall",
        "CheckCondition",
        "StageCall",
        "CheckCondition",
    ]
    assert result.stop_reason == "condition_met" and result.outputs == ["out1", "out2"]
