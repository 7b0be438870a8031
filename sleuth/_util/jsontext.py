"""`json_from_text`: the JSON a model wrote, found in whatever it wrapped around it.

Models put JSON in code fences, after a sentence of preamble, before a closing remark, or bare.
This is the one place Sleuth reads JSON out of model text; everything that parses a model's
answer (the agent's final answer, a decomposition decision, a research report) calls it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

JsonKind = Literal["object", "array"]

_DECODER = json.JSONDecoder()
_OPENERS = {"{": "object", "[": "array"}
# The end of a sentence in a JSON string as written: `.`, `!` or `?` before a space, a written
# line break or tab, or the end of the text.
_SENTENCE_END = re.compile(r"[.!?](?=\s|\\[nrt]|$)")


def json_from_text(text: str, kind: JsonKind | None = None) -> Any:
    """The first JSON object or array written in `text`, or None when there is none.

    Code fences and prose around the value are skipped; nested objects, arrays and braces inside
    strings are read whole, since the value is decoded, not matched with a pattern. With `kind`,
    only a top-level value of that kind counts: `kind="object"` skips a list (and what it
    contains) and goes on looking for an object after it.
    """
    position = 0
    while True:
        starts = [at for at in (text.find("{", position), text.find("[", position)) if at >= 0]
        if not starts:
            return None
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            position = start + 1
            continue
        if kind is None or _OPENERS[text[start]] == kind:
            return value
        position = end


def truncated_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a model began in `text` and did not finish (its output cap cut it, often
    in a list it kept repeating): the members and elements it completed, with the open lists and
    objects closed. None when `text` holds no such object or it completed nothing.

    A cut inside a string value keeps that string's complete sentences (a small writer can loop
    in its first value, the summary, until the cap); a half key or a string with no complete
    sentence is dropped. A finished object is `json_from_text`'s; this reads what a cut one
    still says.
    """
    start = text.find("{")
    if start < 0:
        return None
    closers: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of a complete value, the closers it needs)
    in_string = escaped = expect_key = string_is_key = False
    string_start = start
    for position in range(start, len(text)):
        char = text[position]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string, string_is_key, string_start = True, expect_key, position
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
            expect_key = char == "{"
        elif char in "}]":
            if not closers:
                return None
            closers.pop()
            if not closers:
                return None  # a finished object: json_from_text reads it
            cuts.append((position + 1, "".join(reversed(closers))))
            expect_key = False
        elif char == ",":
            cuts.append((position, "".join(reversed(closers))))
            expect_key = closers[-1] == "}"
        elif char == ":":
            expect_key = False
    candidates = [text[start:end] + closing for end, closing in reversed(cuts[-50:])]
    if in_string and not string_is_key:
        sentences = list(_SENTENCE_END.finditer(text, string_start + 1))
        if sentences:
            closing = '"' + "".join(reversed(closers))
            candidates.insert(0, text[start : sentences[-1].end()] + closing)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and value:
            return value
    return None
