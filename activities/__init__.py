"""Temporal activities: thin, one per node or scan step, calling into `sleuth`.

`build_activities` imports the activity modules when called, so importing one of them (the
workflows do, for their signatures) does not import all the others and their dependencies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sleuth.app import App


def build_activities(app: App) -> list[Callable[..., Any]]:
    """Every activity a worker for `app` registers."""
    from activities.agent import AgentActivities
    from activities.attributes import registered_search_attributes
    from activities.decompose import DecomposeActivities
    from activities.pipeline import PipelineActivities
    from activities.research import ResearchActivities
    from activities.scan import ScanActivities

    activities: list[Callable[..., Any]] = [registered_search_attributes]
    activities += ResearchActivities(app).all()
    activities += ScanActivities(app).all()
    activities += DecomposeActivities(app).all()
    activities += PipelineActivities(app).all()
    activities += AgentActivities(app).all()
    return activities
