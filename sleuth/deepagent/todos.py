"""The todo layer: a task list the agent keeps with `write_todos` / `read_todos`.

The caller holds the same `TodoState` and reads it with `snapshot()` during or after the run.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from sleuth.runtime.events import emit
from sleuth.tools import Tool

TodoStatus = Literal["pending", "in_progress", "completed"]


class Todo(BaseModel):
    """One task: what to do and how far it is."""

    content: str
    status: TodoStatus = "pending"


class TodoState:
    """The task list of one run. Share it with `create_deepagent(todo_state=...)` to watch it."""

    def __init__(self, todos: list[Todo] | None = None):
        self._todos: list[Todo] = list(todos or [])

    def snapshot(self) -> list[Todo]:
        """A copy of the current list, in order."""
        return [t.model_copy() for t in self._todos]

    def replace(self, todos: list[Todo]) -> None:
        """Set the whole list; publishes `deepagent.todo.added` / `.completed` for what changed."""
        before = {t.content: t.status for t in self._todos}
        self._todos = [t.model_copy() for t in todos]
        for todo in self._todos:
            if todo.content not in before:
                emit("deepagent.todo.added", content=todo.content, status=todo.status)
            if todo.status == "completed" and before.get(todo.content) != "completed":
                emit("deepagent.todo.completed", content=todo.content)

    def counts(self) -> dict[str, int]:
        """How many todos are in each status."""
        counts = {"pending": 0, "in_progress": 0, "completed": 0}
        for todo in self._todos:
            counts[todo.status] += 1
        return counts

    def dump_state(self) -> dict[str, Any]:
        return {"todos": [t.model_dump() for t in self._todos]}

    def load_state(self, data: dict[str, Any]) -> None:
        self._todos = [Todo.model_validate(t) for t in data.get("todos", [])]

    def __repr__(self) -> str:
        return f"TodoState({self.counts()})"


def todo_tools(state: TodoState) -> list[Tool]:
    """`write_todos` and `read_todos` over `state`."""

    def write_todos(todos: list[Todo]) -> str:
        """Replace your todo list. Give every task with its status: pending, in_progress or
        completed. Keep the list current as you work."""
        state.replace(todos)
        counts = state.counts()
        return (
            f"todo list updated: {counts['pending']} pending, {counts['in_progress']} in progress, "
            f"{counts['completed']} completed"
        )

    def read_todos() -> list[dict[str, Any]]:
        """Your current todo list with each task's status."""
        return [t.model_dump() for t in state.snapshot()]

    return [Tool(write_todos), Tool(read_todos)]
