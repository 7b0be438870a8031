"""The in-process event bus, and the `agent.*` events an agent run publishes."""

from __future__ import annotations

import asyncio

from sleuth.agent import Agent
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.runtime.events import Event, current_run_id, emit, get_event_bus, run_context
from sleuth.tools import tool


@tool
def search(query: str) -> str:
    """Search."""
    return f"results for {query}"


async def subscribed(run_id: str) -> asyncio.Task[list[Event]]:
    """A task collecting the run's events; the subscription is live when this returns."""
    stream = get_event_bus().subscribe(run_id)

    async def collect() -> list[Event]:
        return [event async for event in stream]

    return asyncio.create_task(collect())


async def test_run_context_scopes_a_run_id() -> None:
    assert current_run_id() is None
    async with run_context() as rid:
        assert rid and current_run_id() == rid
        async with run_context("inner-run") as inner:
            assert inner == "inner-run" and current_run_id() == "inner-run"
        assert current_run_id() == rid
    assert current_run_id() is None


async def test_subscribers_get_their_runs_events_until_close_stream() -> None:
    bus = get_event_bus()
    async with run_context() as rid:
        first, second = await subscribed(rid), await subscribed(rid)
        emit("custom.one", value=1)
        emit("custom.two", value=2)
        async with run_context() as other:
            emit("custom.elsewhere", value=3)
        await bus.close_stream(rid)
    one, two = await first, await second
    assert [(e.event_type, e.data, e.run_id) for e in one] == [
        ("custom.one", {"value": 1}, rid),
        ("custom.two", {"value": 2}, rid),
    ]
    assert [e.event_type for e in two] == ["custom.one", "custom.two"]
    assert other != rid
    assert bus.subscriber_count(rid) == 0


async def test_a_subscription_starts_when_subscribe_is_called() -> None:
    bus = get_event_bus()
    async with run_context() as rid:
        stream = bus.subscribe(rid)
        assert bus.subscriber_count(rid) == 1
        emit("custom.before_iteration")
        await bus.close_stream(rid)
    assert [event.event_type async for event in stream] == ["custom.before_iteration"]
    assert bus.subscriber_count(rid) == 0


async def test_events_outside_a_run_context_are_dropped_and_listeners_see_every_run() -> None:
    bus = get_event_bus()
    heard: list[Event] = []
    remove = bus.add_listener(heard.append)
    try:
        emit("custom.nobody")
        async with run_context() as rid:
            emit("custom.heard", n=1)
    finally:
        remove()
    async with run_context():
        emit("custom.after_removal")
    assert [(e.event_type, e.run_id) for e in heard] == [("custom.heard", rid)]


async def test_an_agent_run_emits_iteration_tool_called_and_terminate() -> None:
    bus = get_event_bus()
    model = ScriptedModel(
        [
            tool_call("search", query="crm", input_tokens=12, output_tokens=3),
            text("The CRM market is large and growing fast.", input_tokens=20, output_tokens=9),
        ]
    )
    async with run_context() as rid:
        collector = await subscribed(rid)
        await Agent(model, tools=[search], name="analyst").arun("Size the CRM market")
        await bus.close_stream(rid)
    events = await collector
    assert [e.event_type for e in events] == [
        "agent.iteration",
        "agent.tool.called",
        "agent.iteration",
        "agent.terminate",
    ]
    first_iteration, called, _, terminate = (e.data for e in events)
    assert first_iteration == {
        "agent": "analyst",
        "iteration": 1,
        "tool_calls": ["search"],
        "input_tokens": 12,
        "output_tokens": 3,
    }
    assert called["tool"] == "search" and called["arguments"] == {"query": "crm"}
    assert called["success"] is True and called["output_preview"] == "results for crm"
    assert terminate["stop_reason"] == "completed"
    assert terminate["iterations"] == 2
    assert terminate["final_message_preview"] == "The CRM market is large and growing fast."
    assert terminate["total_tokens"] == 44


async def test_concurrent_runs_only_see_their_own_agent_events() -> None:
    bus = get_event_bus()

    async def run(label: str) -> list[Event]:
        async with run_context() as rid:
            collector = await subscribed(rid)
            await Agent(ScriptedModel([text(f"answer {label}")]), name=label).arun("q")
            await bus.close_stream(rid)
        return await collector

    left, right = await asyncio.gather(run("left"), run("right"))
    assert {e.data["agent"] for e in left} == {"left"}
    assert {e.data["agent"] for e in right} == {"right"}
    assert left[-1].data["final_message_preview"] == "answer left"


async def test_run_sync_from_async_code_keeps_the_callers_run_context() -> None:
    bus = get_event_bus()
    async with run_context() as rid:
        collector = await subscribed(rid)
        Agent(ScriptedModel([text("sync answer")]), name="sync").run_sync("q")
        await bus.close_stream(rid)
    events = await collector
    assert [e.event_type for e in events] == ["agent.iteration", "agent.terminate"]
