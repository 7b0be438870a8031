"""`AgentMemory`: what an agent id learned in earlier runs, kept in the artifact store.

After every finished run the task and its answer are appended to the memory of the agent's id
(the pointer `memory/<id>` names the latest list, swapped atomically, so workers on several
machines sharing the store keep one memory). A new run's system prompt starts with the most
recent entries. The same run finishing twice (a retried durable step) is remembered once.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from pydantic import BaseModel, Field

from sleuth._util.strict import StrictInput
from sleuth.runtime.artifacts import ArtifactStore, default_artifact_store, get_json, put_json

MAX_ENTRY_CHARS = 2_000
"""Longest task or answer kept in one memory entry (longer ones are cut)."""


class MemorySettings(StrictInput):
    """The YAML `memory:` field."""

    enabled: bool = True
    """Whether runs read and write the agent id's memory."""
    max_entries: int = Field(default=20, ge=1, le=1_000)
    """Entries kept (the oldest are dropped), 1 to 1,000."""
    recall_entries: int = Field(default=5, ge=0, le=100)
    """Most recent entries put into a new run's system prompt, 0 to 100."""


class MemoryEntry(BaseModel):
    run_key: str
    """Identifies the run, so a retried finish is not remembered twice."""
    task: str
    answer: str


class AgentMemory:
    """The persistent memory of one agent id."""

    def __init__(
        self,
        agent_id: str,
        settings: MemorySettings | None = None,
        store: ArtifactStore | None = None,
    ):
        self.agent_id = agent_id
        self.settings = settings or MemorySettings()
        self._store = store

    @property
    def store(self) -> ArtifactStore:
        return self._store or default_artifact_store()

    @property
    def pointer(self) -> str:
        return f"memory/{self.agent_id}"

    def entries(self) -> list[MemoryEntry]:
        """Every remembered entry, oldest first."""
        ref = self.store.read_pointer(self.pointer)
        if ref is None:
            return []
        return [MemoryEntry.model_validate(item) for item in get_json(self.store, ref)]

    def recall(self) -> str:
        """The system-prompt block of the most recent entries ("" when there are none)."""
        count = self.settings.recall_entries
        recent = self.entries()[-count:] if count else []
        if not recent:
            return ""
        lines = [f"- Task: {e.task}\n  Answer: {e.answer}" for e in recent]
        return "What you found in earlier runs (most recent last):\n" + "\n".join(lines)

    def remember(self, task: str, answer: str, *, run_key: str) -> None:
        """Append an entry (once per `run_key`), dropping the oldest past `max_entries`."""
        entry = MemoryEntry(
            run_key=run_key, task=task[:MAX_ENTRY_CHARS], answer=answer[:MAX_ENTRY_CHARS]
        )
        while True:
            current = self.store.read_pointer(self.pointer)
            entries: list[Any] = get_json(self.store, current) if current else []
            if any(item.get("run_key") == run_key for item in entries):
                return
            kept = [*entries, entry.model_dump()][-self.settings.max_entries :]
            if self.store.swap_pointer(self.pointer, current, put_json(self.store, kept)):
                return

    async def arecall(self) -> str:
        return await asyncio.to_thread(self.recall)

    async def aremember(self, task: str, answer: str, *, run_key: str) -> None:
        await asyncio.to_thread(self.remember, task, answer, run_key=run_key)


def run_key(*parts: str) -> str:
    """A stable key for a run from what identifies it (its task and its first messages)."""
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:32]
