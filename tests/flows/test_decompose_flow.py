"""`next_decompose_step`: a decomposition node's one control flow, as a pure function (no model)."""

from __future__ import annotations

from sleuth.flows.decompose_flow import (
    NOT_RUN_TEXT,
    AwaitSubtasks,
    Decide,
    Decision,
    Finished,
    NodeOutcome,
    NodeRun,
    SkipSubtask,
    Solve,
    StartSubtask,
    Synthesize,
    TaskNode,
    next_decompose_step,
)
from sleuth.usage.budget import Budget, Spend


def node_run(depth: int = 0, max_depth: int = 2, fan_out: int = 4, **budget: int) -> NodeRun:
    return NodeRun(
        node=TaskNode(task="root", depth=depth),
        max_depth=max_depth,
        max_fan_out=fan_out,
        allowance=Budget(**budget),
    )


def split(*subtasks: str, input_tokens: int = 0) -> Decision:
    return Decision(direct=False, subtasks=list(subtasks), spent=Spend(input_tokens=input_tokens))


def step_and_start(run: NodeRun):  # type: ignore[no-untyped-def]
    step = next_decompose_step(run)
    run.start(step)
    return step


def test_decides_then_solves_directly_within_what_the_decision_left() -> None:
    run = node_run(max_input_tokens=100)
    decide = step_and_start(run)
    assert decide == Decide(task="root", allowance=Budget(max_input_tokens=100))
    assert run.node.status == "deciding"
    run.record_decision(Decision(direct=True, spent=Spend(input_tokens=30)))
    solve = step_and_start(run)
    assert solve == Solve(task="root", allowance=Budget(max_input_tokens=70))
    assert (run.node.status, run.node.mode) == ("solving", "direct")
    run.record_answer(NodeOutcome(text="42", spent=Spend(input_tokens=50, tool_calls=1)))
    finished = next_decompose_step(run)
    assert isinstance(finished, Finished)
    assert finished.outcome.text == "42"
    assert finished.outcome.spent == Spend(input_tokens=80, tool_calls=1)
    assert run.node.status == "done" and run.node.spent == finished.outcome.spent


def test_at_max_depth_a_node_solves_without_a_decision() -> None:
    assert isinstance(next_decompose_step(node_run(depth=2, max_depth=2)), Solve)


def test_a_split_starts_subtasks_up_to_the_fan_out_then_synthesises_in_order() -> None:
    run = node_run(fan_out=2)
    step_and_start(run)
    run.record_decision(split("a", "b", "c"))
    assert [c.task for c in run.node.children] == ["a", "b", "c"]
    assert (run.node.status, run.node.mode) == ("running", "decomposed")

    first, second = step_and_start(run), step_and_start(run)
    assert isinstance(first, StartSubtask) and (first.index, first.task, first.depth) == (0, "a", 1)
    assert isinstance(second, StartSubtask) and second.index == 1
    assert step_and_start(run) == AwaitSubtasks(running=[0, 1])  # fan-out of 2 reached

    run.record_subtask(1, NodeOutcome(text="B"), TaskNode(task="b", depth=1, status="done"))
    third = step_and_start(run)
    assert isinstance(third, StartSubtask) and third.index == 2
    for index, text in ((0, "A"), (2, "C")):
        run.record_subtask(index, NodeOutcome(text=text), TaskNode(task="?", depth=1))
    synthesis = step_and_start(run)
    assert isinstance(synthesis, Synthesize)
    assert synthesis.results == [("a", "A"), ("b", "B"), ("c", "C")]
    assert run.node.status == "synthesizing"
    assert run.node.children[1].status == "done"  # a finished subtask's own tree replaces it

    run.record_answer(NodeOutcome(text="all of it"))
    assert next_decompose_step(run) == Finished(outcome=NodeOutcome(text="all of it"))


def test_the_pool_shares_the_budget_and_skips_what_it_cannot_fund() -> None:
    run = node_run(fan_out=2, max_tool_calls=1)
    step_and_start(run)
    run.record_decision(split("a", "b", "c"))
    first = step_and_start(run)
    assert isinstance(first, StartSubtask) and first.allowance.max_tool_calls == 1
    # Nothing is free while the first subtask holds the only call: wait for it.
    assert step_and_start(run) == AwaitSubtasks(running=[0])
    run.record_subtask(0, NodeOutcome(text="A", spent=Spend(tool_calls=1)), run.node.children[0])
    assert step_and_start(run) == SkipSubtask(index=1)
    assert step_and_start(run) == SkipSubtask(index=2)
    assert run.node.children[2].status == "skipped"
    synthesis = step_and_start(run)
    assert isinstance(synthesis, Synthesize) and synthesis.grant is None
    assert synthesis.allowance == Budget(max_tool_calls=0)
    assert synthesis.results[1] == ("b", NOT_RUN_TEXT)
    run.record_answer(NodeOutcome(text="digest"))
    finished = next_decompose_step(run)
    assert isinstance(finished, Finished)
    assert finished.outcome.budget_exhausted and finished.outcome.spent.tool_calls == 1


def test_next_step_is_pure_and_the_state_is_plain_json() -> None:
    run = node_run(fan_out=3, max_input_tokens=900)
    step_and_start(run)
    run.record_decision(split("a", "b", input_tokens=90))
    step_and_start(run)  # the first subtask holds a share now
    before = run.model_dump()
    step = next_decompose_step(run)
    assert run.model_dump() == before  # reading the next step reserves nothing
    assert next_decompose_step(run) == step
    assert isinstance(step, StartSubtask) and step.index == 1
    assert next_decompose_step(NodeRun.model_validate_json(run.model_dump_json())) == step
