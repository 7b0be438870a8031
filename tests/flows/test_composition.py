"""In-process composition pipelines: sequential, parallel (task_map, merges), loops, nesting, events."""

from __future__ import annotations

import asyncio

import pytest

from sleuth import Agent, App, LoopAgent, ParallelPipeline, PipelineResult, SequentialPipeline
from sleuth.flows.composition import follow_up_prompt
from sleuth.models.scripted import ModelCall, ScriptedModel, text
from sleuth.runtime.events import get_event_bus, run_context


def echo_agent(name: str, seen: list[str] | None = None) -> Agent:
    """An agent whose answer is `<name>(<its input>)`; records its inputs in `seen`."""

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if seen is not None:
            seen.append(call.last_user_text)
        return text(f"{name}({call.last_user_text})")

    return Agent(ScriptedModel(responder=respond), name=name)


class Boom:
    """An agent that raises."""

    name = "boom"

    async def arun(self, task: str) -> str:
        raise RuntimeError("the data source is down")


async def test_sequential_feeds_each_output_plus_the_task_forward() -> None:
    seen_draft: list[str] = []
    seen_review: list[str] = []
    pipeline = SequentialPipeline(
        agents=[
            echo_agent("research"),
            echo_agent("draft", seen_draft),
            echo_agent("review", seen_review),
        ]
    )
    result = await pipeline.run("why did conversion drop?")
    assert isinstance(result, PipelineResult) and result.success and result.error is None
    assert result.outputs[0] == "research(why did conversion drop?)"
    assert seen_draft == [follow_up_prompt("why did conversion drop?", result.outputs[0])]
    assert seen_review == [follow_up_prompt("why did conversion drop?", result.outputs[1])]
    assert result.final_output == result.outputs[2] == f"review({seen_review[0]})"


async def test_a_raising_agent_gives_success_false_with_the_error() -> None:
    never: list[str] = []
    pipeline = SequentialPipeline(agents=[echo_agent("first"), Boom(), echo_agent("third", never)])
    result = await pipeline.run("task")
    assert result.success is False
    assert result.error == "stage 'boom' failed: RuntimeError: the data source is down"
    assert result.outputs == ["first(task)"]
    assert never == [] and result.stop_reason == "error"


async def test_parallel_runs_branches_at_once_with_a_task_map_and_concat() -> None:
    in_flight = 0
    peak = 0

    async def branch(task: str) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(3):  # let the other branches start too
            await asyncio.sleep(0)
        in_flight -= 1
        return "" if task == "silent" else f"<{task}>"

    async def web(task: str) -> str:
        return await branch(task)

    async def data(task: str) -> str:
        return await branch(task)

    async def docs(task: str) -> str:
        return await branch(task)

    pipeline = ParallelPipeline(
        agents=[web, data, docs], task_map={1: "SELECT deploys", "docs": "silent"}
    )
    result = await pipeline.run("what changed?")
    assert peak == 3
    assert result.outputs == ["<what changed?>", "<SELECT deploys>", ""]
    assert result.final_output == "<what changed?>\n\n<SELECT deploys>"  # empty output skipped


async def test_parallel_merge_last_and_a_raising_branch() -> None:
    last = await ParallelPipeline(agents=[echo_agent("a"), echo_agent("b")], merge="last").run("q")
    assert last.final_output == "b(q)" and last.outputs == ["a(q)", "b(q)"]

    failed = await ParallelPipeline(agents=[echo_agent("a"), Boom()]).run("q")
    assert failed.success is False and "RuntimeError: the data source is down" in (
        failed.error or ""
    )
    with pytest.raises(ValueError, match="merge must be"):
        ParallelPipeline(agents=[echo_agent("a")], merge="first")  # type: ignore[arg-type]


async def test_loop_ends_when_the_condition_holds() -> None:
    seen: list[str] = []
    drafts = iter(["draft confidence=0.4", "draft confidence=0.9", "never"])

    def reviser(task: str) -> str:
        seen.append(task)
        return next(drafts)

    loop = LoopAgent(agent=reviser, condition=lambda out: "0.9" in out, max_loops=5)
    result = await loop.run("write the report")
    assert result.outputs == ["draft confidence=0.4", "draft confidence=0.9"]
    assert result.final_output == "draft confidence=0.9"
    assert result.stop_reason == "condition_met"
    assert seen == [
        "write the report",
        follow_up_prompt("write the report", "draft confidence=0.4"),
    ]


async def test_loop_ends_at_max_loops() -> None:
    async def never_good(output: str) -> bool:
        return False

    result = await LoopAgent(echo_agent("reviser"), never_good, max_loops=3).run("t")
    assert len(result.outputs) == 3 and result.stop_reason == "max_loops"
    assert result.final_output == result.outputs[-1] and result.success


async def test_pipelines_nest_and_a_nested_failure_fails_the_outer_one() -> None:
    inner = ParallelPipeline(agents=[echo_agent("web"), echo_agent("docs")], name="gather")
    outer = SequentialPipeline(agents=[inner, echo_agent("writer")], name="report")
    result = await outer.run("q")
    assert result.success
    assert result.outputs[0] == "web(q)\n\ndocs(q)"
    assert (
        result.final_output
        == f"writer({follow_up_prompt('q', 'web(q)' + chr(10) * 2 + 'docs(q)')})"
    )

    broken = SequentialPipeline(agents=[SequentialPipeline(agents=[Boom()], name="inner")])
    failed = await broken.run("q")
    assert failed.success is False
    assert failed.error is not None and "the data source is down" in failed.error


async def test_stages_by_registered_name_and_run_sync_agents() -> None:
    class SyncOnly:
        name = "sync"

        def run_sync(self, task: str) -> str:
            return f"sync({task})"

    app = App()
    app.agent("research", lambda: echo_agent("research"))
    app.pipeline("polish", SequentialPipeline(agents=[SyncOnly()]))
    result = await SequentialPipeline(agents=["research", "polish"]).run("q", app=app)
    assert result.success, result.error
    assert result.final_output == f"sync({follow_up_prompt('q', 'research(q)')})"


async def test_composition_events_share_the_bus_with_agent_events() -> None:
    events = []
    remove = get_event_bus().add_listener(events.append)
    try:
        async with run_context() as run_id:
            await SequentialPipeline(
                agents=[
                    ParallelPipeline(agents=[echo_agent("a"), echo_agent("b")]),
                    LoopAgent(echo_agent("c"), max_loops=2),
                ],
                name="outer",
            ).run("q")
    finally:
        remove()
    kinds = [e.event_type for e in events if e.run_id == run_id]
    assert kinds[0] == "composition.pipeline.start"
    assert kinds[-1] == "composition.pipeline.end"
    for expected in (
        "composition.stage.start",
        "composition.stage.end",
        "composition.fanout",
        "composition.merge",
        "composition.loop.iteration",
        "agent.terminate",
    ):
        assert expected in kinds
    assert kinds.count("composition.loop.iteration") == 2
