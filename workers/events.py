"""Reading a durable run's live events from any client (the CLI, `sleuth serve`, your own code).

```python
async for offset, event in follow_events(client, "research-1"):
    print(offset, event.event_type, event.data)
```

The events are those the run's activities and workflow published to its stream (see
`sleuth.workflows.streams`), from `from_offset` on; the iterator ends once the run has ended and every
event it kept was read. It follows the run across continue-as-new.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from sleuth.runtime.events import STREAM_TOPIC, Event

POLL_COOLDOWN = timedelta(milliseconds=200)
"""The pause between two reads once a follower has caught up (each read is a workflow update)."""


async def follow_events(
    client: Client, workflow_id: str, from_offset: int = 0
) -> AsyncIterator[tuple[int, Event]]:
    """(offset, event) for every event of the run from `from_offset`, live, until it ends."""
    stream = WorkflowStreamClient.create(client, workflow_id)
    async for item in stream.subscribe(
        [STREAM_TOPIC], from_offset, result_type=Event, poll_cooldown=POLL_COOLDOWN
    ):
        yield item.offset, item.data
