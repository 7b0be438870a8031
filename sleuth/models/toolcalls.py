"""Tool calls written in a model's text: one parser for every adapter that meets them.

The local model decodes text and finds its calls in it; an OpenAI-compatible server whose chat
template or tool parser does not turn a small model's calls into `tool_calls` returns them as
content. Both come as `<tool_call>{json}</tool_call>` blocks (the Hermes/Qwen protocol), or, as
small models write them, as the bare `{"name": ..., "arguments": ...}` object after some prose,
inside a code fence or inside a list (`[TOOL_CALLS] [...]`). Llama-style `"parameters"` is read
as `"arguments"`. llama-cpp-python's `chatml-function-calling` protocol, `functions.<name>:`
followed by the arguments object, is read too (that server leaves it in the text when its model
starts a call where the server expected prose).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, NamedTuple

from sleuth.models.base import ToolCall, ToolSpec

_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_BARE_CALL_RE = re.compile(r'\{\s*"name"\s*:')
_PREFIXED_CALL_RE = re.compile(r"functions\.([A-Za-z0-9_\-]+):")
_NAMED_CALL_RE = re.compile(r'"name"\s*:\s*"([^"]+)"|functions\.([A-Za-z0-9_\-]+):')
_CALL_MARKERS = ("[", "[TOOL_CALLS]", "<|python_tag|>", "```json", "```")
"""What servers write just before a bare call (in this order); not part of the prose."""


class ParsedText(NamedTuple):
    """Text split into the prose before the calls and the calls themselves."""

    content: str
    calls: list[ToolCall]
    malformed: bool
    """The text meant to call a tool, but a call does not parse or does not fit its tool's
    parameters (the local model decodes it again under a grammar)."""


def parse_tool_calls(text: str, offered: list[ToolSpec]) -> ParsedText:
    """The calls to `offered` tools written in `text`, and the prose before them.

    Only objects naming an offered tool count: JSON that happens to have a "name" key is prose.
    """
    if not offered:
        return ParsedText(text.strip(), [], False)
    specs = {spec.name: spec for spec in offered}
    start = text.find("<tool_call>")
    if start >= 0:
        blocks = _TOOL_CALL_RE.findall(text[start:])
    else:
        blocks, start = _prefixed_calls(text, specs)
        if not blocks:
            blocks, start = _bare_calls(text, specs)
        if not blocks:
            return ParsedText(text.strip(), [], False)
    calls: list[ToolCall] = []
    malformed = False
    for block in blocks:
        call = _to_call(block, specs)
        if call is None:
            malformed = True
        else:
            calls.append(call)
    content = text[:start].strip()
    for marker in _CALL_MARKERS:
        content = content.removesuffix(marker).rstrip()
    return ParsedText(content, calls, malformed or not calls)


def intended_tool(text: str, offered: list[ToolSpec]) -> str | None:
    """The first offered tool that `text` starts a call to, parsed or not: after a malformed call
    it is the tool to ask for by name."""
    names = {spec.name for spec in offered}
    for match in _NAMED_CALL_RE.finditer(text):
        name = match.group(1) or match.group(2)
        if name in names:
            return name
    return None


def _prefixed_calls(text: str, specs: dict[str, ToolSpec]) -> tuple[list[str], int]:
    """`functions.<name>:` calls to offered tools, as `{"name", "arguments"}` blocks."""
    decoder = json.JSONDecoder()
    blocks: list[str] = []
    first = -1
    for match in _PREFIXED_CALL_RE.finditer(text):
        name = match.group(1)
        if name not in specs:
            continue
        first = match.start() if first < 0 else first
        rest = text[match.end() :].lstrip()
        try:
            arguments, _ = decoder.raw_decode(rest)
        except json.JSONDecodeError:
            blocks.append(json.dumps({"name": name, "arguments": None}))
            continue
        blocks.append(json.dumps({"name": name, "arguments": arguments}))
    return blocks, first


def _bare_calls(text: str, specs: dict[str, ToolSpec]) -> tuple[list[str], int]:
    """JSON objects in `text` naming an offered tool, and where the first one starts."""
    decoder = json.JSONDecoder()
    blocks: list[str] = []
    first = last_end = -1
    for match in _BARE_CALL_RE.finditer(text):
        if match.start() < last_end:
            continue  # inside the previous call's arguments
        try:
            payload, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            payload, end = None, len(text)
        named = payload.get("name") if isinstance(payload, dict) else _quoted_name(text, match)
        if named in specs:
            blocks.append(text[match.start() : end])
            first = match.start() if first < 0 else first
            last_end = end
    return blocks, first


def _quoted_name(text: str, match: re.Match[str]) -> str | None:
    name = re.match(r'\s*"([^"]+)"', text[match.end() :])
    return name.group(1) if name else None


def _to_call(block: str, specs: dict[str, ToolSpec]) -> ToolCall | None:
    """The call in one block, or None when it does not parse or fit its tool's parameters."""
    try:
        payload = json.loads(block)
        name = payload["name"]
        arguments = payload.get("arguments", payload.get("parameters", {}))
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    spec = specs.get(name) if isinstance(name, str) else None
    if spec is None or not isinstance(arguments, dict) or not _fits(arguments, spec.parameters):
        return None
    return ToolCall(id=f"call_{uuid.uuid4().hex[:16]}", name=name, arguments=arguments)


def _fits(arguments: dict[str, Any], parameters: dict[str, Any]) -> bool:
    """Required arguments present, and no unknown ones when the schema forbids extras."""
    properties = parameters.get("properties", {})
    if not set(parameters.get("required", [])) <= set(arguments):
        return False
    return parameters.get("additionalProperties", True) is not False or set(arguments) <= set(
        properties
    )
