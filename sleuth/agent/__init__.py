"""The agent: the tool loop (`sleuth.agent.loop`), its loop state, exit conditions, policies and memory.

`Agent` and its companions load lazily, so `sleuth.agent.state` and `sleuth.agent.termination`
import without the loop (which needs the models, grounding and limits).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Agent": "sleuth.agent.loop",
    "AgentResult": "sleuth.agent.loop",
    "CheckpointHook": "sleuth.agent.loop",
    "GroundingSettings": "sleuth.agent.loop",
    "Layer": "sleuth.agent.loop",
    "NOT_ALLOWED": "sleuth.agent.loop",
}

if TYPE_CHECKING:
    from sleuth.agent.loop import NOT_ALLOWED as NOT_ALLOWED
    from sleuth.agent.loop import Agent as Agent
    from sleuth.agent.loop import AgentResult as AgentResult
    from sleuth.agent.loop import CheckpointHook as CheckpointHook
    from sleuth.agent.loop import GroundingSettings as GroundingSettings
    from sleuth.agent.loop import Layer as Layer

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'sleuth.agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
