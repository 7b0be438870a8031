"""The agent: the tool loop (`sleuth.agent.loop`), its loop state, exit conditions, policies and memory.

`Agent` and its companions load lazily, so `sleuth.agent.state` and `sleuth.agent.termination`
import without the loop (which needs the models, grounding and limits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sleuth._util.lazy import lazy_exports

if TYPE_CHECKING:
    from sleuth.agent.loop import NOT_ALLOWED as NOT_ALLOWED
    from sleuth.agent.loop import Agent as Agent
    from sleuth.agent.loop import AgentResult as AgentResult
    from sleuth.agent.loop import CheckpointHook as CheckpointHook
    from sleuth.agent.loop import GroundingSettings as GroundingSettings
    from sleuth.agent.loop import Layer as Layer

_EXPORTS, __getattr__, __dir__ = lazy_exports(globals())
__all__ = sorted(_EXPORTS)
