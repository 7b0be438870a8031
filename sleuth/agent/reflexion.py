"""Reflexion: after each step, did it move the task forward, and is the plan still right?

Two forms, chosen with `Agent(reflexion=...)`:

- "model": a short self-evaluation request after every tool step. The model sees the task, the
  plan so far and the step's calls and results, and answers a `ReflexionVerdict`. When the step
  did not help or the plan is wrong, the plan is rewritten and the agent is told so before its
  next turn. Each request is a model call like any other: its tokens and cost go into the run's
  usage, which the run's limits check.
- "rules": no model call. A failed or empty tool result, or a repeated call, makes the agent
  state a revised plan; a successful step passes silently. For small local models, whose
  self-evaluation is mostly noise and whose every request costs seconds of CPU.

`reflexion=True` picks by model family (`default_reflexion`): "model" for hosted providers
(OpenAI, Anthropic), "rules" for everything else (local llama.cpp models, scripted test models).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from sleuth._util.jsontext import json_from_text
from sleuth._util.text import preview
from sleuth.agent.state import LoopState
from sleuth.models.base import Message, Model, ModelResponse, OutputSchema
from sleuth.runtime.errors import InvalidSettingError

ReflexionMode = Literal["model", "rules"]
HOSTED_PROVIDERS = frozenset({"openai", "anthropic"})
"""Model families whose self-evaluation is worth a request after every step."""
REFLEXION_MAX_OUTPUT_TOKENS = 300
"""A verdict is a few sentences; a longer answer is cut here."""
STEP_OUTPUT_CHARS = 600
"""How much of each tool result the self-evaluation sees."""

REFLEXION_SYSTEM = (
    "You review one step of a research agent's work. Given the task, the agent's current plan "
    "and the tool calls of its last step with their results, judge two things: did the last "
    "step move the task forward (new, relevant information, or a needed action done), and is "
    "the plan still the right way to finish the task? If either answer is no, write a revised "
    "plan of one to three sentences that avoids what went wrong. Answer with a JSON object only."
)
"""The system message of every reflexion request: how a scripted model (and
`is_reflexion_request`) tells a reflexion request from the agent's own turns."""


class ReflexionVerdict(BaseModel):
    """The model's self-evaluation of one step."""

    progress: bool
    """Whether the last step moved the task forward."""
    plan_ok: bool
    """Whether the current plan is still the right way to finish the task."""
    reason: str = Field(default="", description="One sentence: why.")
    """One sentence: why."""
    plan: str = Field(default="", description="The revised plan, or the current one if it stands.")
    """The revised plan when either answer is no, else the plan as it stands."""

    @property
    def on_track(self) -> bool:
        return self.progress and self.plan_ok


VERDICT_SCHEMA = OutputSchema(name="reflexion", json_schema=ReflexionVerdict.model_json_schema())


def reflexion_mode(setting: bool | str, model: Model) -> ReflexionMode | None:
    """The form `Agent(reflexion=setting)` runs: None (off), "model" or "rules"."""
    if setting is False:
        return None
    if setting is True:
        return default_reflexion(model)
    if setting == "model":
        return "model"
    if setting == "rules":
        return "rules"
    raise InvalidSettingError(
        f"reflexion={setting!r} is not a reflexion form; use True (by model family), False, "
        "'model' or 'rules'"
    )


def default_reflexion(model: Model) -> ReflexionMode:
    """The default form: `model` for hosted providers, `rules` for local and other models."""
    provider = getattr(model, "provider", None)
    return "model" if provider in HOSTED_PROVIDERS else "rules"


def is_reflexion_request(messages: Sequence[Message]) -> bool:
    """Whether a model request is a reflexion request (for `ScriptedModel(responder=...)`)."""
    return (
        bool(messages) and messages[0].role == "system" and messages[0].content == REFLEXION_SYSTEM
    )


def reflexion_messages(state: LoopState) -> list[Message]:
    """The self-evaluation request for the step that just ended."""
    task = next((m.content for m in state.messages if m.role == "user" and m.kind is None), "")
    lines = [f"Task: {task}", f"Current plan: {state.plan or '(none stated yet)'}"]
    if state.last_text.strip():
        lines.append(f"The agent said: {preview(state.last_text, STEP_OUTPUT_CHARS)}")
    lines.append("Last step:")
    for item in (e for e in state.evidence if e.iteration == state.iterations):
        arguments = json.dumps(item.arguments, ensure_ascii=False, default=str)
        outcome = (
            preview(item.output, STEP_OUTPUT_CHARS) if item.success else f"FAILED: {item.error}"
        )
        lines.append(f"- {item.tool}({preview(arguments, 300)}) -> {outcome or '(empty)'}")
    lines.append(
        'Reply as {"progress": true|false, "plan_ok": true|false, "reason": "...", "plan": "..."}.'
    )
    return [
        Message(role="system", content=REFLEXION_SYSTEM),
        Message(role="user", content="\n".join(lines)),
    ]


def parse_verdict(response: ModelResponse) -> ReflexionVerdict | None:
    """The verdict in a reflexion answer; None when it holds none."""
    data = (
        response.structured
        if response.structured is not None
        else json_from_text(response.text, "object")
    )
    if data is None:
        return None
    try:
        return ReflexionVerdict.model_validate(data)
    except ValidationError:
        return None


def rule_issues(state: LoopState) -> list[str]:
    """What went wrong in the step that just ended, by rule: failed calls, empty results, and a
    call repeated from the step before."""
    latest = [e for e in state.evidence if e.iteration == state.iterations]
    issues = [f"{e.tool} failed: {e.error}" for e in latest if not e.success]
    issues += [
        f"{e.tool} returned nothing" for e in latest if e.success and not e.output.strip('[]{}" \n')
    ]
    last_tool_messages = [
        m for m in state.messages[-len(state.last_tool_names) or None :] if m.role == "tool"
    ]
    if any(m.kind == "loop_warning" for m in last_tool_messages):
        issues.append("a call repeated the previous step exactly")
    return issues


def rules_message(issues: list[str]) -> Message:
    return Message(
        role="user",
        content="Reflection on your last step: "
        + "; ".join(issues)
        + ". That step went wrong. Before your next tool call, state a revised plan in one or two "
        "sentences that avoids this, then continue.",
        kind="reflection",
    )


def revision_message(verdict: ReflexionVerdict) -> Message:
    judged = []
    if not verdict.progress:
        judged.append("it did not move the task forward")
    if not verdict.plan_ok:
        judged.append("the plan needs to change")
    reason = f" ({verdict.reason.strip()})" if verdict.reason.strip() else ""
    return Message(
        role="user",
        content=f"Reflection on your last step: {' and '.join(judged)}{reason}. Revised plan: "
        f"{verdict.plan.strip() or 'choose a different approach'}. Follow it from your next step.",
        kind="reflection",
    )
