"""`json_from_text`: the JSON a model wrote, found in whatever it wrapped around it.

Models put JSON in code fences, after a sentence of preamble, before a closing remark, or bare.
This is the one place Sleuth reads JSON out of model text; everything that parses a model's
answer (the agent's final answer, a decomposition decision, a research report) calls it.

Valid JSON is decoded as written; JSON a model almost wrote (trailing commas, single quotes,
Python literals) is mended by `json-repair`; an object its output cap cut off is read by
`pydantic_core.from_json(allow_partial=...)` (`truncated_json_object`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import json_repair
from pydantic_core import from_json

JsonKind = Literal["object", "array"]

_DECODER = json.JSONDecoder()
_OPENERS = {"{": "object", "[": "array"}
_NUMBER_CHARS = frozenset("0123456789.eE+-")
# The end of a sentence in a decoded string: `.`, `!` or `?` before white space or the end.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
# What makes a bracketed span worth mending: a quoted key (an object) or a quoted string (an
# array). Prose with braces ("use {braces}", "{not: json}") has neither and stays prose.
_QUOTED_KEY = re.compile(r"""["'][^"'\n]*["']\s*:""")
_QUOTED_STRING = re.compile(r"""["'][^"'\n]*["']""")


def json_from_text(text: str, kind: JsonKind | None = None) -> Any:
    """The first JSON object or array written in `text`, or None when there is none.

    Code fences and prose around the value are skipped; nested objects, arrays and braces inside
    strings are read whole, since the value is decoded, not matched with a pattern. With `kind`,
    only a top-level value of that kind counts: `kind="object"` skips a list (and what it
    contains) and goes on looking for an object after it.
    """
    found = _first_valid(text, kind)
    return found if found is not None else _first_mended(text, kind)


def _first_valid(text: str, kind: JsonKind | None) -> Any:
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


def _first_mended(text: str, kind: JsonKind | None) -> Any:
    """The first closed bracketed span that `json-repair` reads as a value of `kind` (`{'a': 1,
    'b': [1, 2,],}`), skipping spans that hold no quoted key or string."""
    position = 0
    while True:
        starts = [at for at in (text.find("{", position), text.find("[", position)) if at >= 0]
        if not starts:
            return None
        start = min(starts)
        end = _closing(text, start)
        if end is None:
            return None  # unclosed: a cut value is `truncated_json_object`'s
        span = text[start:end]
        wanted = _OPENERS[text[start]]
        marker = _QUOTED_KEY if wanted == "object" else _QUOTED_STRING
        if (kind is None or wanted == kind) and marker.search(span):
            value = json_repair.loads(span)
            if isinstance(value, dict if wanted == "object" else list) and value:
                return value
            position = start + 1
        else:
            position = end if kind is not None and wanted != kind else start + 1


def _closing(text: str, start: int) -> int | None:
    """The index just past the bracket that closes the one at `start` (strings in double or
    single quotes skipped), or None when the text ends first."""
    depth = 0
    quote = ""
    escaped = False
    for position in range(start, len(text)):
        char = text[position]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return position + 1
    return None


def truncated_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a model began in `text` and did not finish (its output cap cut it, often
    in a list it kept repeating): the members and elements it completed, with the open lists and
    objects closed. None when `text` holds no such object or it completed nothing.

    A cut inside a string value keeps that string's complete sentences (a small writer can loop
    in its first value, the summary, until the cap); a half key or a string with no complete
    sentence is dropped, and so is a list or object left open with nothing completed in it. A
    finished object is `json_from_text`'s; this reads what a cut one still says.
    """
    start = text.find("{")
    if start < 0:
        return None
    body = text[start:]
    open_depth = _open_depth(body)
    if open_depth == 0:
        return None  # a finished object: json_from_text reads it
    try:
        completed = from_json(body, allow_partial=True)
        with_cut_string = from_json(body, allow_partial="trailing-strings")
    except ValueError:
        return None
    if body[-1] in _NUMBER_CHARS and with_cut_string == completed:
        # Cut in a number: `0` may have been `0.8`. A value counts once something ends it.
        chain = _open_chain(completed, open_depth)
        if len(chain) == open_depth and chain[-1]:
            inner = chain[-1]
            if isinstance(inner[_last(inner)], int | float):
                inner.pop(_last(inner))
    elif with_cut_string != completed:
        # The value the text ends in is a cut string: keep its complete sentences, if any.
        chain = _open_chain(with_cut_string, open_depth)
        inner = chain[-1]
        if len(chain) == open_depth and inner and isinstance(inner[_last(inner)], str):
            sentences = list(_SENTENCE_END.finditer(inner[_last(inner)]))
            if sentences:
                inner[_last(inner)] = inner[_last(inner)][: sentences[-1].end()]
                completed = with_cut_string
    _drop_empty_open(completed, open_depth)
    return completed if isinstance(completed, dict) and completed else None


def _open_depth(body: str) -> int:
    """How many lists and objects are still open where `body` ends (0: the first one closed)."""
    depth = 0
    in_string = escaped = False
    for char in body:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return 0
    return depth


def _open_chain(value: Any, open_depth: int) -> list[Any]:
    """The open lists and objects of a partial parse, outermost first: each is the last value of
    the one around it. Shorter than `open_depth` when the parse dropped the innermost ones."""
    chain = [value]
    while len(chain) < open_depth and chain[-1]:
        last = chain[-1][_last(chain[-1])]
        if not isinstance(last, dict | list):
            break
        chain.append(last)
    return chain


def _last(container: Any) -> Any:
    return next(reversed(container)) if isinstance(container, dict) else len(container) - 1


def _drop_empty_open(value: Any, open_depth: int) -> None:
    """Remove the open lists and objects that completed nothing, innermost first."""
    chain = _open_chain(value, open_depth)
    if len(chain) < open_depth:
        return  # the parse already dropped the innermost open value
    for inner, outer in zip(reversed(chain), reversed(chain[:-1]), strict=False):
        if inner:
            return
        outer.pop(_last(outer))
