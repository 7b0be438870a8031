"""Start a research run over `sleuth serve`'s HTTP API, print its events as they stream in
(server-sent events), then its result."""

import json
import os
import time

import httpx

BASE = f"http://127.0.0.1:{os.environ.get('PORT', '8765')}"


def wait_for_server(client: httpx.Client, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            client.get("/openapi.json").raise_for_status()
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


with httpx.Client(base_url=BASE, timeout=120) as client:
    wait_for_server(client)
    started = client.post(
        "/runs",
        json={
            "workflow": "ResearchWorkflow",
            "input": {"prompt": "What does Acme charge per seat?", "research": "prices"},
        },
    )
    started.raise_for_status()
    run_id = started.json()["id"]
    print("started", run_id)

    # One SSE frame per event: `id:` is its offset, `event:` its type, `data:` the event as JSON.
    with client.stream("GET", f"/runs/{run_id}/events") as stream:
        event_type = None
        for line in stream.iter_lines():
            if line.startswith("event:"):
                event_type = line.removeprefix("event:").strip()
            elif line.startswith("data:") and event_type:
                print("event", event_type)
            if event_type == "end":
                break

    run = client.get(f"/runs/{run_id}").json()
    print("status", run["status"])
    print("summary", json.dumps(run["result"]["final_state"]["summary"]))
