"""The build from before the `plan` node (see `versioned_app`): importing this module makes the
process that build. Only a worker process of its own imports it.

What changes, and how that build behaved:
- the router: a run goes from `start` straight to `execute`, as runs started before the plan
  node do (`ResearchWorkflow` skips the node for histories without its patch marker);
- the activities: there is no `research.plan`;
- a run whose last node is `plan` (state written by the newer build) fails with
  "unknown research node 'plan'", as that build's workflow code failed it.
"""

from __future__ import annotations

import sleuth.research
from sleuth.activities.research import ResearchActivities
from sleuth.research import Node, ResearchDigest
from sleuth.research.router import unknown_node
from sleuth.runtime.errors import SleuthError
from tests.helpers.apps.versioned_app import build_app

_next_node = sleuth.research.next_node
_all_activities = ResearchActivities.all


class UnknownNodeError(SleuthError, ValueError):
    """A node name the old build's graph does not have."""


def next_node_before_plan(digest: ResearchDigest) -> Node:
    if digest.node == Node.PLAN:
        raise UnknownNodeError(str(unknown_node(Node.PLAN.value)).split(";")[0])
    if digest.node == Node.START:
        return _next_node(digest.model_copy(update={"node": Node.PLAN}))
    return _next_node(digest)


def activities_before_plan(self: ResearchActivities) -> list[object]:
    return [fn for fn in _all_activities(self) if getattr(fn, "__name__", "") != "plan"]


sleuth.research.next_node = next_node_before_plan  # type: ignore[assignment]
ResearchActivities.all = activities_before_plan  # type: ignore[assignment,method-assign]

app = build_app()
