"""Checkpoints that survive any crash: each long activity keeps a journal in the artifact store.

A long step (the research execute loop, a decomposition leaf, a pipeline stage, a scan item, an
agent step) saves a checkpoint after every model turn and every tool call. Where it is saved
decides whether a completed tool call can run twice:

- *Heartbeat details* reach the server at most every 0.8 × heartbeat timeout (the SDK throttles
  them), so a worker that dies soon after a tool call takes the checkpoint with it and the retry
  runs the call again. That was the old design; heartbeats now carry the reference for people
  (`temporal workflow describe`) and as a last fallback only.
- *One activity per tool call* (as `AgentWorkflow` runs its loop) moves every loop into workflow
  code, costs three history events per call — thousands per scan — and still leaves a gap: an
  activity can finish its tool call and die before the server hears of it.
- *A journal in the artifact store*, chosen here: the checkpoint is written (content-addressed,
  fsynced) and then a named pointer is swapped to it — fsynced too — before the loop goes on. The
  pointer is named after the namespace, workflow id, run id and activity id: every attempt of one
  activity computes the same name and no other activity does. A retried attempt reads it first,
  so it does not depend on any heartbeat reaching the server.

What remains: between a tool's return and its checkpoint there is only local work (serialising
the state, two fsynced writes: milliseconds, no network). A crash inside that window, or inside
the tool itself, runs the call again; a crash any time after it never does.

The pointer keeps the newest few checkpoints. A retried attempt takes the newest one it can read;
a missing or corrupt one falls back to the one before, then to the reference in the last
heartbeat, then to the step's input — with a warning in the log and in the heartbeat details,
never a failed run. Every attempt claims the pointer with its attempt number, and a save from an
older attempt that finds a newer claim stops that attempt (`SupersededAttemptError`): when the
server gives up on a live attempt (a long server restart, a network partition), the two attempts
do not both write one journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import activity

from sleuth.agent.state import LoopState
from sleuth.runtime.artifacts import (
    ArtifactNotFoundError,
    ArtifactReferenceError,
    ArtifactStore,
    check_ref,
    get_json,
    put_json,
)
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.log import get_logger

log = get_logger(__name__)

KEPT_CHECKPOINTS = 3
"""Checkpoints a journal pointer remembers: the newest and the ones to fall back to."""
CHILDREN = "children"
"""The journal entry holding the loop state of the subagents running inside the step."""

ModelT = TypeVar("ModelT", bound=BaseModel)


class SupersededAttemptError(SleuthError, RuntimeError):
    """A newer attempt of this activity has claimed its journal: this attempt must stop.

    Raised only in an attempt the server has already given up on, so nobody sees it fail.
    """


def journal_name(namespace: str, workflow_id: str, run_id: str, activity_id: str) -> str:
    """The pointer name of one activity's journal: the same for every attempt of the activity."""
    return "journal/" + json.dumps([namespace, workflow_id, run_id, activity_id])


def current_journal_name() -> str:
    info = activity.info()
    return journal_name(
        info.workflow_namespace or "",
        info.workflow_id or "",
        info.workflow_run_id or "",
        info.activity_id,
    )


@dataclass
class Pointer:
    """What a journal pointer holds: the attempt that owns it, its newest checkpoints, and the
    step's result once it has one."""

    attempt: int = 0
    checkpoints: list[str] = field(default_factory=list)
    result: str | None = None

    def dumps(self) -> str:
        return json.dumps(
            {"attempt": self.attempt, "checkpoints": self.checkpoints, "result": self.result}
        )

    @classmethod
    def parse(cls, raw: str) -> Pointer:
        """The pointer in `raw`; ValueError if it is damaged."""
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        attempt, checkpoints = data.get("attempt"), data.get("checkpoints")
        if not isinstance(attempt, int) or not isinstance(checkpoints, list):
            raise ValueError("no attempt number or checkpoint list")
        result = data.get("result")
        return cls(
            attempt,
            [check_ref(ref) for ref in checkpoints],
            None if result is None else check_ref(result),
        )


def journal_result(store: ArtifactStore, name: str) -> str | None:
    """The result the journal `name` recorded with `Journal.finish`, if any."""
    return _parse_or_empty(store.read_pointer(name)).result


def read_journal(store: ArtifactStore, name: str) -> dict[str, Any] | None:
    """The newest readable checkpoint of the journal `name` (for tests, tools and people)."""
    for ref in _parse_or_empty(store.read_pointer(name)).checkpoints:
        try:
            return _load_document(store, ref)
        except (ArtifactNotFoundError, ArtifactReferenceError, ValueError):
            continue
    return None


class Journal:
    """One activity execution's checkpoint document: named entries (JSON), saved together.

    Also the store of the subagent loops running inside the step (`sleuth.deepagent.subagents`
    resumes them from here): a finished child's entry is dropped by the next save, which holds
    its answer in the parent's state.
    """

    def __init__(
        self,
        store: ArtifactStore,
        name: str,
        attempt: int,
        entries: dict[str, Any],
        ref: str | None,
        warnings: Sequence[str] = (),
        result: str | None = None,
    ):
        self.store = store
        self.name = name
        self.attempt = attempt
        self.ref = ref
        """The reference of the newest checkpoint (None before the first save)."""
        self.result = result
        """What an earlier attempt recorded with `finish`: the step had run to its end."""
        self.warnings = list(warnings)
        """What went wrong while loading (a damaged checkpoint, say); also in the heartbeats."""
        self._entries = entries
        self._finished_children: set[str] = set()
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, store: ArtifactStore) -> Journal:
        """The journal of the running activity: its newest readable checkpoint (empty on a first
        attempt), claimed for this attempt."""
        info = activity.info()
        details = list(info.heartbeat_details or ())
        fallback = details[0] if details and isinstance(details[0], str) else None
        journal = await asyncio.to_thread(
            _load_and_claim, store, current_journal_name(), info.attempt, fallback
        )
        for warning in journal.warnings:
            log.warning(
                "checkpoint.fallback",
                warning=warning,
                activity=info.activity_type,
                workflow_id=info.workflow_id,
                attempt=info.attempt,
            )
        return journal

    def get(self, key: str, model: type[ModelT]) -> ModelT | None:
        """The entry `key` as a `model`, or None (none saved, or it no longer fits the model)."""
        raw = self._entries.get(key)
        if raw is None:
            return None
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            self.warn(
                f"checkpoint entry {key!r} does not fit {model.__name__} ({exc}); "
                "starting the step from its input"
            )
            return None

    async def save(self, **entries: BaseModel | dict[str, Any] | None) -> str:
        """Store the document with `entries` replaced (None removes one) and swap the pointer to
        it; returns the checkpoint's reference. Durable when it returns."""
        return await self._save(entries, child=None)

    async def finish(self, result: str) -> None:
        """Record the step's result (an artifact reference, already durable): a retried attempt
        returns it instead of running the step again."""
        await asyncio.to_thread(self._advance, None, result)

    def details(self) -> tuple[str, ...]:
        """Heartbeat details: the newest checkpoint's reference, then any warnings."""
        return tuple(([self.ref] if self.ref else []) + self.warnings)

    # -- subagent loops (the `sleuth.deepagent.subagents.ChildCheckpoints` protocol) -------------

    def resume_child(self, key: str) -> LoopState | None:
        children = self._entries.get(CHILDREN) or {}
        if key not in children:
            return None
        try:
            return LoopState.model_validate(children[key])
        except ValidationError as exc:
            self.warn(f"subagent checkpoint {key!r} is unreadable ({exc}); the subagent restarts")
            return None

    async def save_child(self, key: str, state: LoopState) -> None:
        await self._save({}, child=(key, state.model_dump(mode="json")))

    def child_finished(self, key: str) -> None:
        self._finished_children.add(key)

    # -- internals --------------------------------------------------------------------------

    async def _save(
        self, entries: dict[str, BaseModel | dict[str, Any] | None], child: tuple[str, Any] | None
    ) -> str:
        async with self._lock:
            for key, value in entries.items():
                if value is None:
                    self._entries.pop(key, None)
                elif isinstance(value, BaseModel):
                    self._entries[key] = value.model_dump(mode="json")
                else:
                    self._entries[key] = value
            children = dict(self._entries.get(CHILDREN) or {})
            # A save holds the answers of the finished children below the saving loop (every
            # child, for the step's own save): their loop states are no longer needed.
            below = "" if child is None else child[0] + "/"
            done = {key for key in self._finished_children if key.startswith(below)}
            for key in done:
                children.pop(key, None)
            self._finished_children -= done
            if child is not None:
                children[child[0]] = child[1]
                self._finished_children.discard(child[0])
            if children:
                self._entries[CHILDREN] = children
            else:
                self._entries.pop(CHILDREN, None)
            ref = await asyncio.to_thread(put_json, self.store, self._entries)
            await asyncio.to_thread(self._advance, ref)
            self.ref = ref
        activity.heartbeat(*self.details())
        return ref

    def _advance(self, ref: str | None, result: str | None = None) -> None:
        """Point the journal at a new checkpoint `ref` (or record the step's `result`)."""
        while True:
            raw = self.store.read_pointer(self.name)
            pointer = _parse_or_empty(raw)
            if pointer.attempt > self.attempt:
                raise SupersededAttemptError(
                    f"attempt {self.attempt} of this activity was superseded by attempt "
                    f"{pointer.attempt}; it stops here"
                )
            kept = pointer.checkpoints
            if ref is not None:
                kept = [ref, *(r for r in kept if r != ref)][:KEPT_CHECKPOINTS]
            updated = Pointer(self.attempt, kept, result).dumps()
            if self.store.swap_pointer(self.name, raw, updated):
                return

    def warn(self, warning: str) -> None:
        """Record a recovery warning: logged, and carried by every later heartbeat."""
        self.warnings.append(warning)
        log.warning("checkpoint.fallback", warning=warning, journal=self.name)


def _parse_or_empty(raw: str | None) -> Pointer:
    if raw is None:
        return Pointer()
    try:
        return Pointer.parse(raw)
    except ValueError:
        return Pointer()


def _load_document(store: ArtifactStore, ref: str) -> dict[str, Any]:
    document = get_json(store, ref)
    if not isinstance(document, dict):
        raise ValueError(f"checkpoint {ref} is not a JSON object")
    return document


def _load_and_claim(store: ArtifactStore, name: str, attempt: int, fallback: str | None) -> Journal:
    while True:
        warnings: list[str] = []
        raw = store.read_pointer(name)
        pointer = Pointer()
        if raw is not None:
            try:
                pointer = Pointer.parse(raw)
            except ValueError as exc:
                warnings.append(f"the checkpoint journal {name} is damaged ({exc})")
        if pointer.attempt > attempt:
            raise SupersededAttemptError(
                f"attempt {attempt} of this activity started after attempt {pointer.attempt} "
                "claimed its journal; it stops here"
            )
        candidates = list(pointer.checkpoints)
        if fallback is not None and fallback not in candidates:
            with contextlib.suppress(ArtifactReferenceError):
                candidates.append(check_ref(fallback))
        entries: dict[str, Any] = {}
        loaded: str | None = None
        for ref in candidates:
            try:
                entries = _load_document(store, ref)
            except (ArtifactNotFoundError, ValueError) as exc:
                warnings.append(f"checkpoint {ref} is unreadable ({exc}); trying an older one")
                continue
            loaded = ref
            break
        if candidates and loaded is None:
            warnings.append("no readable checkpoint is left: the step starts again from its input")
        if raw is None and attempt <= 1:
            return Journal(store, name, attempt, entries, loaded, warnings)
        # Claim the journal, so an older attempt still running stops at its next save.
        good = candidates[candidates.index(loaded) :] if loaded else []
        claimed = Pointer(attempt, good[:KEPT_CHECKPOINTS], pointer.result).dumps()
        if store.swap_pointer(name, raw, claimed):
            return Journal(store, name, attempt, entries, loaded, warnings, pointer.result)
