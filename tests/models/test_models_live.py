"""One small real call per provider. Opt-in: skipped unless the provider's key is set.

Run: `OPENAI_API_KEY=... ANTHROPIC_API_KEY=... pytest -m live tests/models/test_models_live.py`.
Override the models with SLEUTH_LIVE_OPENAI_MODEL / SLEUTH_LIVE_ANTHROPIC_MODEL.
"""

from __future__ import annotations

import os

import pytest

from sleuth.models import Message, OutputSchema, ToolSpec, resolve
from tests.conftest import live_key

pytestmark = pytest.mark.live

CAPITAL = OutputSchema(
    name="Capital",
    json_schema={
        "type": "object",
        "properties": {"country": {"type": "string"}, "capital": {"type": "string"}},
        "required": ["country", "capital"],
    },
)
LOOKUP = ToolSpec(
    name="lookup_capital",
    description="Look up the capital city of a country.",
    parameters={
        "type": "object",
        "properties": {"country": {"type": "string"}},
        "required": ["country"],
    },
)
PROMPT = [Message(role="user", content="What is the capital of France? Answer in JSON.")]


def _live_models() -> list[tuple[str, str]]:
    return [
        ("OPENAI_API_KEY", "openai:" + os.environ.get("SLEUTH_LIVE_OPENAI_MODEL", "gpt-5.4-mini")),
        (
            "ANTHROPIC_API_KEY",
            "anthropic:" + os.environ.get("SLEUTH_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5"),
        ),
    ]


@pytest.mark.parametrize(("key", "spec"), _live_models())
async def test_structured_answer(key: str, spec: str) -> None:
    live_key(key)
    response = await resolve(spec).request(PROMPT, output_schema=CAPITAL, max_output_tokens=200)
    assert response.structured is not None
    assert response.structured["capital"].lower() == "paris"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


@pytest.mark.parametrize(("key", "spec"), _live_models())
async def test_forced_tool_call(key: str, spec: str) -> None:
    live_key(key)
    response = await resolve(spec).request(
        [Message(role="user", content="Find the capital of Japan with the tool.")],
        tools=[LOOKUP],
        tool_choice="lookup_capital",
        max_output_tokens=200,
    )
    (call,) = response.tool_calls
    assert call.name == "lookup_capital"
    assert call.arguments["country"].lower() == "japan"
