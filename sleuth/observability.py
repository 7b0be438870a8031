"""The seed pages' import path for the event bus: `from sleuth.observability import run_context,
get_event_bus`. The same objects as `sleuth.runtime.events`."""

from sleuth.runtime.events import Event, EventBus, emit, get_event_bus, run_context

__all__ = ["Event", "EventBus", "emit", "get_event_bus", "run_context"]
