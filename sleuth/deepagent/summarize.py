"""Conversation summarisation: condense older turns once a conversation grows past a threshold.

Used as an `Agent(context_manager=...)`; the summary call's tokens are charged to the run's
`UsageAccount`, like any other model call of the run. The system prompt and the task (the first user message)
are always kept, the last `keep_recent` messages stay verbatim, and the boundary moves earlier
when needed so an assistant's tool call and its results are never split.
"""

from __future__ import annotations

from sleuth.models.base import Message, Model
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.events import emit
from sleuth.runtime.telemetry import model_request
from sleuth.usage.limits import UsageAccount

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
SUMMARY_INSTRUCTIONS = (
    "You condense an agent's working conversation. Write a compact summary that keeps every fact "
    "found (with numbers, names and sources), every decision, what was tried and failed, and what "
    "is still open. Plain prose or bullets; no preamble."
)


def _transcript(messages: list[Message]) -> str:
    lines = []
    for message in messages:
        if message.role == "tool":
            lines.append(f"[tool result {message.name or ''}] {message.content}")
            continue
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        text = message.content + (f" [calls: {calls}]" if calls else "")
        lines.append(f"[{message.role}] {text}")
    return "\n".join(lines)


def split_for_summary(
    messages: list[Message], keep_recent: int
) -> tuple[list[Message], list[Message], list[Message]]:
    """(pinned head, older messages to condense, recent messages kept verbatim)."""
    head_end = 0
    while head_end < len(messages) and messages[head_end].role == "system":
        head_end += 1
    if head_end < len(messages) and messages[head_end].role == "user":
        head_end += 1
    head, body = messages[:head_end], messages[head_end:]
    cut = max(0, len(body) - keep_recent)
    # A kept tool result needs the assistant message that asked for it: move the cut back to it.
    while 0 < cut < len(body) and body[cut].role == "tool":
        cut -= 1
    return head, body[:cut], body[cut:]


class SummarizingManager:
    """Condenses the conversation with `model` once it exceeds `after_messages` messages."""

    def __init__(
        self,
        model: Model,
        *,
        after_messages: int,
        keep_recent: int = 10,
        max_output_tokens: int | None = 1024,
    ):
        if keep_recent < 0:
            raise InvalidSettingError(f"summarize_keep_recent must be 0 or more, got {keep_recent}")
        if after_messages <= keep_recent:
            raise InvalidSettingError(
                f"summarize_after_messages ({after_messages}) must be larger than "
                f"summarize_keep_recent ({keep_recent}), or nothing would ever be condensed"
            )
        self.model = model
        self.after_messages = after_messages
        self.keep_recent = keep_recent
        self.max_output_tokens = max_output_tokens

    async def __call__(self, messages: list[Message], account: UsageAccount) -> list[Message]:
        if len(messages) <= self.after_messages:
            return messages
        head, older, recent = split_for_summary(messages, self.keep_recent)
        if not older:
            return messages
        response = await model_request(
            self.model,
            [
                Message(role="system", content=SUMMARY_INSTRUCTIONS),
                Message(role="user", content=_transcript(older)),
            ],
            max_output_tokens=self.max_output_tokens,
        )
        account.charge(response.usage)
        emit(
            "deepagent.summarized",
            condensed_messages=len(older),
            kept_messages=len(recent),
            summary_preview=response.text[:200],
        )
        summary = Message(role="user", content=SUMMARY_PREFIX + response.text, kind="summary")
        return [*head, summary, *recent]
