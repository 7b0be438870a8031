"""Reading a durable run's live events from any client (the CLI, `sleuth serve`, your own code).

```python
async for offset, event in follow_events(client, "research-1"):
    print(offset, event.event_type, event.data)
```

The events are those the run's activities and workflow published to its stream (see
`sleuth.workflows.streams`), from `from_offset` on; the iterator ends once the run has ended and every
event it kept was read. It follows the run across continue-as-new.

A follower reads with the stream's poll *query* (`temporalio.contrib.workflow_streams`), every
`POLL_COOLDOWN` once it has caught up, rather than with its long-poll update: a query writes
nothing to the run's history, where each update was two events and a row of the Web UI's
timeline for every batch a follower read.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from datetime import timedelta

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.service import RPCError

from sleuth.runtime.events import STREAM_TOPIC, Event

POLL_COOLDOWN = timedelta(milliseconds=250)
"""The pause between two reads once a follower has caught up (each read is a workflow query)."""
POLL_QUERY = "__temporal_workflow_stream_poll"
_RUNNING = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)


async def follow_events(
    client: Client, workflow_id: str, from_offset: int = 0
) -> AsyncIterator[tuple[int, Event]]:
    """(offset, event) for every event of the run from `from_offset`, live, until it ends."""
    converter = client.data_converter.payload_converter
    offset = from_offset
    ended = False
    while True:
        handle = client.get_workflow_handle(workflow_id)  # the newest run of the chain
        try:
            result = await handle.query(
                POLL_QUERY,
                PollInput(topics=[STREAM_TOPIC], from_offset=offset),
                result_type=PollResult,
            )
        except (RPCError, WorkflowQueryFailedError):
            # No workflow task has run yet (nothing answers the query), or the chain is between
            # two runs: read again, unless the run has ended without a stream to read.
            if ended or (await handle.describe()).status not in _RUNNING:
                raise
            await asyncio.sleep(POLL_COOLDOWN.total_seconds())
            continue
        for item in result.items:
            payload = Payload()
            payload.ParseFromString(base64.b64decode(item.data))
            yield item.offset, converter.from_payload(payload, Event)
        offset = result.next_offset
        if result.more_ready:
            continue
        if ended:
            return
        # Caught up: once the run has ended, one more read takes what came in meanwhile.
        status = (await handle.describe()).status
        ended = status not in _RUNNING
        if not ended:
            await asyncio.sleep(POLL_COOLDOWN.total_seconds())
