"""What an OpenAI-compatible server supports, found out by asking it, and remembered.

Servers differ in what they accept: llama.cpp's servers take `response_format` `json_object` but
not `json_schema`, some gateways take neither, some models refuse `logprobs`. When a server
refuses a parameter, its error answer names it (a 400, or a 500 from servers that validate late);
`refused_parameters` reads that answer, and `ServerMemory` remembers per base URL and model, for
the life of the process, which structured-output mode works, whether token probabilities do,
whether it takes `strict: true` on a tool, and whether a tool-calling turn without text must carry `""` rather than null, so only the first
request pays for finding out.
"""

from __future__ import annotations

import re
import threading
from typing import Literal, get_args

from sleuth._util.text import preview
from sleuth.models.base import NonRetryableModelError, model_settings
from sleuth.runtime.log import get_logger
from sleuth.runtime.redact import redact
from sleuth.runtime.settings import StructuredOutputSetting

log = get_logger(__name__)

StructuredMode = Literal["json_schema", "json_object", "tool", "prompt"]
StructuredSetting = StructuredOutputSetting
STRUCTURED_OUTPUT_ENV = "SLEUTH_OPENAI_STRUCTURED_OUTPUT"
FALLBACK_ORDER: tuple[StructuredMode, ...] = get_args(StructuredMode)
"""The order `auto` tries the modes in: the strictest first, plain text with the schema last."""
MODE_PARAMETER: dict[StructuredMode, str | None] = {
    "json_schema": "response_format",
    "json_object": "response_format",
    "tool": "tools",
    "prompt": None,
}
"""The parameter (group) a mode sends that a server may refuse."""

_REFUSAL = re.compile(
    r"(?i)(unsupported|not supported|does not support|doesn't support|unrecognized|unknown"
    r"|invalid|not allowed|not permitted|extra inputs|extra_forbidden|literal_error"
    r"|input should be|validation error|not implemented)"
)
_PARAMETER_GROUPS: dict[str, re.Pattern[str]] = {
    "response_format": re.compile(
        r"(?i)response_format|json_schema|json_object|structured output|guided_json"
    ),
    "tools": re.compile(r"(?i)\btool_choice\b|\btools\b|\bfunction[_ ]call"),
    "logprobs": re.compile(r"(?i)logprobs"),
}
_REFUSING_STATUS = frozenset({400, 422, 500, 501})
"""Where a server puts a refused parameter: 400/422 (validation), 500/501 (servers that validate
while handling the request, like llama-cpp-python's)."""


def structured_output_setting(value: str | None) -> StructuredSetting:
    """`value`, else `$SLEUTH_OPENAI_STRUCTURED_OUTPUT`, else `auto`; anything else is an error."""
    if not value:
        return model_settings().openai_structured_output
    settings: tuple[StructuredSetting, ...] = get_args(StructuredSetting)
    for setting in settings:
        if value == setting:
            return setting
    raise NonRetryableModelError(
        f"openai_structured_output={value!r} is not a structured-output mode; use one of "
        f"{', '.join(settings)}"
    )


_VALIDATION_ERROR = re.compile(
    r"(?i)validation error|literal_error|input should be|extra_forbidden|field required"
)
_NULL_CONTENT = re.compile(r"(?i)valid string|expected a string|got null|must be a string")


def invalid_request(status_code: int, error_text: str) -> bool:
    """A 5xx that is the server refusing the request's shape (FastAPI-based servers answer
    validation errors that way): sending the same request again cannot succeed."""
    return status_code >= 500 and bool(_VALIDATION_ERROR.search(error_text))


def refuses_null_content(error_text: str) -> bool:
    """Whether the server wants message content as a string where the request sent null (an
    assistant turn that only calls tools; llama-cpp-python's server wants "")."""
    return "content" in error_text and bool(_NULL_CONTENT.search(error_text))


def refused_parameters(status_code: int, error_text: str, sent: set[str]) -> set[str]:
    """The parameters among `sent` that a server's error answer says it does not support.

    `sent` holds the request's parameter names, with `response_format`, `tools` and `logprobs`
    standing for their groups (`json_schema`, `tool_choice`, `top_logprobs`, ...). An answer
    counts as a refusal when it says so (unsupported, unrecognized, invalid, a validation error)
    and names the parameter; a plain "server error" never does.
    """
    if status_code not in _REFUSING_STATUS or not _REFUSAL.search(error_text):
        return set()
    refused = set()
    for name in sent:
        group = _PARAMETER_GROUPS.get(name)
        if group is not None:
            if group.search(error_text):
                refused.add(name)
        elif re.search(rf"(?i)\b{re.escape(name)}\b", error_text):
            refused.add(name)
    return refused


class ServerMemory:
    """What each (base URL, model) was found to support, for the life of the process."""

    def __init__(self) -> None:
        self._modes: dict[tuple[str, str], StructuredMode] = {}
        self._no_logprobs: set[tuple[str, str]] = set()
        self._string_content: set[tuple[str, str]] = set()
        self._no_strict_tools: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Forget what was learned (a server was upgraded or reconfigured): ask again."""
        with self._lock:
            self._modes.clear()
            self._no_logprobs.clear()
            self._string_content.clear()
            self._no_strict_tools.clear()

    def structured_mode(self, server: tuple[str, str]) -> StructuredMode:
        """The mode `auto` uses for `server`: the first that has not been refused."""
        with self._lock:
            return self._modes.get(server, FALLBACK_ORDER[0])

    def fall_back(
        self, server: tuple[str, str], refused: StructuredMode, reason: str
    ) -> StructuredMode | None:
        """Record that `server` refused `refused`; the mode to try next (None: none left).

        Logs each switch once, even when concurrent requests hit the same refusal."""
        with self._lock:
            current = self._modes.get(server, FALLBACK_ORDER[0])
            if FALLBACK_ORDER.index(current) > FALLBACK_ORDER.index(refused):
                return current
            position = FALLBACK_ORDER.index(refused) + 1
            if position == len(FALLBACK_ORDER):
                return None
            following = FALLBACK_ORDER[position]
            self._modes[server] = following
        log.warning(
            "openai.structured_output_fallback",
            server=redact(server[0]),
            model=server[1],
            refused=refused,
            now_using=following,
            reason=preview(redact(reason), 300),
        )
        return following

    def logprobs_refused(self, server: tuple[str, str]) -> bool:
        with self._lock:
            return server in self._no_logprobs

    def refuse_logprobs(self, server: tuple[str, str], reason: str) -> None:
        """Record that `server` refuses token probabilities (logged once)."""
        with self._lock:
            if server in self._no_logprobs:
                return
            self._no_logprobs.add(server)
        log.warning(
            "openai.logprobs_refused",
            server=redact(server[0]),
            model=server[1],
            reason=preview(redact(reason), 300),
        )

    def strict_tools_refused(self, server: tuple[str, str]) -> bool:
        with self._lock:
            return server in self._no_strict_tools

    def refuse_strict_tools(self, server: tuple[str, str], reason: str) -> None:
        """Record that `server` refuses `strict` in a tool's definition (logged once)."""
        with self._lock:
            if server in self._no_strict_tools:
                return
            self._no_strict_tools.add(server)
        log.warning(
            "openai.strict_tools_refused",
            server=redact(server[0]),
            model=server[1],
            reason=preview(redact(reason), 300),
        )

    def wants_string_content(self, server: tuple[str, str]) -> bool:
        with self._lock:
            return server in self._string_content

    def want_string_content(self, server: tuple[str, str], reason: str) -> None:
        """Record that `server` refuses null message content (logged once)."""
        with self._lock:
            if server in self._string_content:
                return
            self._string_content.add(server)
        log.info(
            "openai.string_content",
            server=redact(server[0]),
            model=server[1],
            reason=preview(redact(reason), 300),
        )


MEMORY = ServerMemory()
"""The process's memory of every server the OpenAI adapter has talked to."""
