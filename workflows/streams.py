"""The event stream every Sleuth workflow hosts (`temporalio.contrib.workflow_streams`).

A workflow constructs `WorkflowStream(prior_state)` in its `__init__` (the library requires that
spot), activities publish their events to the topic `events`, and the workflow adds its own (a
node starting, a subtask finishing) with `publish`. Across continue-as-new the stream's offset
carries over with the last `KEEP_ON_CONTINUE` events, so a follower never misses new ones.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

with workflow.unsafe.imports_passed_through():
    from sleuth.runtime.events import STREAM_TOPIC, Event
KEEP_ON_CONTINUE = 200
"""Events a run hands to its continuation (older ones are dropped: followers read them already,
or read the outcome)."""


def publish(stream: WorkflowStream, event_type: str, **data: Any) -> None:
    """Publish an event from workflow code (deterministic: no signal, no history event)."""
    stream.topic(STREAM_TOPIC, type=Event).publish(
        Event(
            event_type=event_type,
            run_id=workflow.info().workflow_id,
            data=data,
            timestamp=workflow.now().timestamp(),
        )
    )


def publish_carried(stream: WorkflowStream, events: list[Event]) -> None:
    """Publish the events an activity's result carried (`sleuth.activities.events.CarriesEvents`), as
    published by the activity: deterministic, no signal, no history event."""
    topic = stream.topic(STREAM_TOPIC, type=Event)
    for event in events:
        topic.publish(event)


async def state_for_continue(stream: WorkflowStream) -> WorkflowStreamState:
    """Release the stream's pollers (they follow the continuation), wait for its handlers, and
    return its state with the last `KEEP_ON_CONTINUE` events."""
    stream.detach_pollers()
    await workflow.wait_condition(workflow.all_handlers_finished)
    state = stream.get_state()
    stream.truncate(max(0, state.base_offset + len(state.log) - KEEP_ON_CONTINUE))
    return stream.get_state()
