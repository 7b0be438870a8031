"""Temporal activities: thin, one per node or scan step, calling into `sleuth`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.agent import AgentActivities
from activities.attributes import registered_search_attributes
from activities.decompose import DecomposeActivities
from activities.pipeline import PipelineActivities
from activities.research import ResearchActivities
from activities.scan import ScanActivities
from sleuth.app import App


def build_activities(app: App) -> list[Callable[..., Any]]:
    """Every activity a worker for `app` registers."""
    activities: list[Callable[..., Any]] = [registered_search_attributes]
    activities += ResearchActivities(app).all()
    activities += ScanActivities(app).all()
    activities += DecomposeActivities(app).all()
    activities += PipelineActivities(app).all()
    activities += AgentActivities(app).all()
    return activities
