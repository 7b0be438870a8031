"""`Agent.run(...)`: an async iterator of the run's events that ends with the result."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sleuth.agent import Agent, AgentResult
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.runtime.events import Event, get_event_bus, run_context
from sleuth.tools import tool
from tests.helpers.timeouts import scaled


@tool
def search(query: str) -> str:
    """Search the corpus."""
    return f"{query}: three vendors"


async def test_run_yields_the_events_in_order_then_the_result() -> None:
    agent = Agent(
        ScriptedModel([tool_call("search", query="crm"), text("Three vendors.")]), [search]
    )
    items = [item async for item in agent.run("Who sells CRM?")]
    *events, result = items
    assert all(isinstance(e, Event) for e in events)
    assert [e.event_type for e in events] == [
        "agent.iteration",
        "agent.tool.called",
        "agent.iteration",
        "agent.terminate",
    ]
    assert events[1].data["tool"] == "search"
    assert isinstance(result, AgentResult)
    assert result.event_type == "agent.result"
    assert result.message == "Three vendors."


async def test_an_event_arrives_while_the_run_is_still_going() -> None:
    released = threading.Event()

    @tool
    def slow(query: str) -> str:
        """Wait until the test lets it finish."""
        released.wait(timeout=scaled(30))
        return "done"

    agent = Agent(ScriptedModel([tool_call("slow", query="q"), text("ok")]), [slow])
    stream = agent.run("go")
    first = await stream.__anext__()
    # The model turn's event is here while the tool still blocks: the stream is live.
    assert first.event_type == "agent.iteration"
    released.set()
    rest = [item async for item in stream]
    assert isinstance(rest[-1], AgentResult)


async def test_events_from_a_sync_tool_thread_reach_the_stream() -> None:
    from sleuth.runtime.events import emit

    @tool
    def noisy(query: str) -> str:
        """Emits an event of its own from its worker thread."""
        emit("tool.progress", step=query)
        return "ok"

    agent = Agent(ScriptedModel([tool_call("noisy", query="half"), text("done")]), [noisy])
    kinds = [item.event_type async for item in agent.run("go")]
    assert "tool.progress" in kinds


async def test_run_also_publishes_to_an_enclosing_run_context() -> None:
    agent = Agent(ScriptedModel([text("fine")]))
    async with run_context() as rid:
        stream = get_event_bus().subscribe(rid)
        seen = asyncio.ensure_future(anext(stream))
        yielded = [item async for item in agent.run("go")]
        published = await asyncio.wait_for(seen, timeout=scaled(10))
        await get_event_bus().close_stream(rid)
    assert published.event_type == "agent.iteration"
    assert published.run_id == rid
    assert yielded[0].run_id == rid


async def test_leaving_the_loop_early_cancels_the_run() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def forever(query: str) -> str:
        """Never returns on its own."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    agent = Agent(ScriptedModel([tool_call("forever", query="q")]), [forever])
    stream = agent.run("go")
    async for _ in stream:
        break
    await asyncio.wait_for(started.wait(), timeout=scaled(10))
    await stream.aclose()
    await asyncio.wait_for(cancelled.wait(), timeout=scaled(10))


async def test_a_failing_run_raises_from_the_iterator() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(AssertionError):
        async for _ in agent.run("go"):
            pass
