"""Temporal activities: thin, one per node or scan step, calling into `sleuth`.

`build_activities` imports the activity modules when called, so importing one of them (the
workflows do, for their signatures) does not import all the others and their dependencies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sleuth.apps.app import App


def build_activities(app: App) -> list[Callable[..., Any]]:
    """Every activity a worker for `app` registers."""
    from sleuth.activities.agent import AgentActivities
    from sleuth.activities.attributes import registered_search_attributes
    from sleuth.activities.decompose import DecomposeActivities
    from sleuth.activities.pipeline import PipelineActivities
    from sleuth.activities.research import ResearchActivities
    from sleuth.activities.scan import ScanActivities

    activities: list[Callable[..., Any]] = [registered_search_attributes]
    activities += ResearchActivities(app).all()
    activities += ScanActivities(app).all()
    activities += DecomposeActivities(app).all()
    activities += PipelineActivities(app).all()
    activities += AgentActivities(app).all()
    return activities
