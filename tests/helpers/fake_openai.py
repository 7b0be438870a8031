"""A fake OpenAI endpoint behind the real SDK (an httpx mock transport): scripted replies, and
recorded requests to check what the adapter sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2

from sleuth.models.openai import OpenAIModel

Reply = tuple[int, dict[str, Any], dict[str, str]]
"""(status, JSON body, headers)."""


class FakeOpenAI:
    """Answers each request with the next queued reply and records the requests.

    A queued reply may also be a function of the request's JSON body, for a fake server that
    decides from what it was sent (refusing a parameter, say)."""

    def __init__(self, *replies: Reply | Callable[[dict[str, Any]], Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        status, body, headers = reply(json.loads(request.content)) if callable(reply) else reply
        return httpx2.Response(status, json=body, headers=headers)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]

    def model(self, name: str = "gpt-4o-mini", **settings: Any) -> OpenAIModel:
        settings.setdefault("api_key", "sk-test")
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return OpenAIModel(name, http_client=client, **settings)


def completion(
    message: dict[str, Any], finish_reason: str = "stop", logprobs: Any = None
) -> dict[str, Any]:
    """A chat.completion body as api.openai.com sends it."""
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": 19,
            "completion_tokens": 10,
            "total_tokens": 29,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
    }


def api_error(
    message: str, type_: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}
