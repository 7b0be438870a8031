"""Getting schema-valid JSON out of an OpenAI-compatible server: the strict-mode schema, the
instruction that carries a schema in the prompt, and the JSON object inside an answer's text.

OpenAI's strict mode only accepts a subset of JSON Schema (every object closed with
`additionalProperties: false`, every property listed in `required`, a short list of keywords).
`strict_json_schema` rewrites a schema into that subset by only *adding* constraints, so any
answer valid under the strict schema is valid under the original one too; a schema that cannot be
rewritten that way (open dictionaries, `minLength`, `oneOf`, ...) is sent as-is with
`strict: false` instead, and the caller's own validation and repair turn catches a
non-conforming answer.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from sleuth.models.base import Message, OutputSchema
from sleuth.runtime.errors import SleuthError

_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "description",
        "title",
        "default",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)


class _NotStrictCompatible(SleuthError):
    """The schema uses something OpenAI's strict mode cannot express."""


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` rewritten for OpenAI's strict mode, or None when that would change its meaning.

    Closes every object (`additionalProperties: false`), lists every property as required and
    drops `default` annotations. Returns None for schemas that are not an object at the root, that
    allow open dictionaries, or that use keywords strict mode rejects.
    """
    if schema.get("type") != "object":
        return None
    root = copy.deepcopy(schema)
    try:
        return _make_strict(root, root, seen_refs=())
    except _NotStrictCompatible:
        return None


def strict_form(schema: dict[str, Any], strict: bool | None) -> tuple[dict[str, Any], bool]:
    """The schema to send, and whether it goes with `strict: true`: None makes it strict when
    `strict_json_schema` can, True always (the schema must already fit), False never."""
    if strict is False:
        return schema, False
    strict_schema = strict_json_schema(schema)
    if strict_schema is not None:
        return strict_schema, True
    return schema, strict is True


def _make_strict(schema: Any, root: dict[str, Any], seen_refs: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise _NotStrictCompatible(f"schema node {schema!r} is not an object")
    node: dict[str, Any] = schema
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        # Older pydantic wraps a described `$ref` as {"allOf": [{"$ref": ...}], "description": ...}.
        merged = {k: v for k, v in node.items() if k != "allOf"}
        node = {**all_of[0], **merged}
    unknown = set(node) - _STRICT_KEYWORDS
    if unknown:
        raise _NotStrictCompatible(f"unsupported keywords {sorted(unknown)}")
    node.pop("default", None)
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        # Strict mode wants a bare `$ref`; inline the definition so the siblings survive.
        if ref in seen_refs:
            raise _NotStrictCompatible(f"recursive reference {ref} with sibling keywords")
        resolved = _resolve_ref(root, ref)
        node = {**copy.deepcopy(resolved), **{k: v for k, v in node.items() if k != "$ref"}}
        return _make_strict(node, root, (*seen_refs, ref))
    for definition in (node.get("$defs") or {}).values():
        _make_strict(definition, root, seen_refs)
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise _NotStrictCompatible("an open dictionary (additionalProperties) cannot be strict")
        properties = node.get("properties") or {}
        node["properties"] = {
            key: _make_strict(value, root, seen_refs) for key, value in properties.items()
        }
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
    if "items" in node:
        node["items"] = _make_strict(node["items"], root, seen_refs)
    if "anyOf" in node:
        node["anyOf"] = [_make_strict(variant, root, seen_refs) for variant in node["anyOf"]]
    if "$defs" in node:
        node["$defs"] = {
            name: _make_strict(definition, root, seen_refs)
            for name, definition in node["$defs"].items()
        }
    return node


def _resolve_ref(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise _NotStrictCompatible(f"external reference {ref}")
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise _NotStrictCompatible(f"unresolvable reference {ref}")
        target = target[part]
    if not isinstance(target, dict):
        raise _NotStrictCompatible(f"reference {ref} is not a schema")
    return target


def schema_name(name: str) -> str:
    """OpenAI accepts `[a-zA-Z0-9_-]{1,64}` as a schema name."""
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64]
    return cleaned or "output"


def schema_instruction(output_schema: OutputSchema) -> str:
    """What tells a model without schema-constrained decoding the shape of its answer."""
    return (
        "Reply with only a JSON object that is valid under the JSON schema below: the data "
        "itself, not the schema, with no prose and no code fence around it.\n"
        f"{json.dumps(output_schema.json_schema)}"
    )


def with_instruction(messages: list[Message], instruction: str) -> list[Message]:
    """`messages` with `instruction` added to the leading system message (or as a new one first:
    many chat templates refuse a system message anywhere else)."""
    if messages and messages[0].role == "system":
        first = messages[0]
        content = f"{first.content}\n\n{instruction}" if first.content else instruction
        return [first.model_copy(update={"content": content}), *messages[1:]]
    return [Message(role="system", content=instruction), *messages]


_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


def json_in_text(text: str) -> dict[str, Any] | None:
    """The JSON object an answer holds: the whole text, a fenced block, or the first `{...}`
    that parses (small models add prose around it)."""
    candidates = [text.strip(), *_FENCE_RE.findall(text)]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    for start in (match.start() for match in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None
