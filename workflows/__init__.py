"""Deterministic Temporal workflows (sandbox-safe: no I/O, no clocks). Import classes from here.

The classes load on first use (PEP 562), so a process that needs only `sleuth.workflows.metrics` (the
CLI, through its telemetry set-up) does not import every workflow and activity module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sleuth.workflows.agent import AgentWorkflow
    from sleuth.workflows.decompose import DecomposeWorkflow
    from sleuth.workflows.pipeline import PipelineWorkflow
    from sleuth.workflows.research import ResearchWorkflow
    from sleuth.workflows.scan import KnowledgeScanWorkflow

    ALL_WORKFLOWS: list[Any]

_CLASSES = {
    "ResearchWorkflow": "sleuth.workflows.research",
    "KnowledgeScanWorkflow": "sleuth.workflows.scan",
    "DecomposeWorkflow": "sleuth.workflows.decompose",
    "PipelineWorkflow": "sleuth.workflows.pipeline",
    "AgentWorkflow": "sleuth.workflows.agent",
}

__all__ = [
    "ALL_WORKFLOWS",
    "AgentWorkflow",
    "DecomposeWorkflow",
    "KnowledgeScanWorkflow",
    "PipelineWorkflow",
    "ResearchWorkflow",
]


def __getattr__(name: str) -> Any:
    if name == "ALL_WORKFLOWS":
        return [__getattr__(class_name) for class_name in _CLASSES]
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module 'workflows' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
