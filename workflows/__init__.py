"""Deterministic Temporal workflows (sandbox-safe: no I/O, no clocks). Import classes from here."""

from __future__ import annotations

from typing import Any

from workflows.agent import AgentWorkflow
from workflows.decompose import DecomposeWorkflow
from workflows.pipeline import PipelineWorkflow
from workflows.research import ResearchWorkflow
from workflows.scan import KnowledgeScanWorkflow

ALL_WORKFLOWS: list[Any] = []
ALL_WORKFLOWS.append(ResearchWorkflow)
ALL_WORKFLOWS.append(KnowledgeScanWorkflow)
ALL_WORKFLOWS.append(DecomposeWorkflow)
ALL_WORKFLOWS.append(PipelineWorkflow)
ALL_WORKFLOWS.append(AgentWorkflow)
