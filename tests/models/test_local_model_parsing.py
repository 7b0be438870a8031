"""The local model's grammars and request rules (no weights needed); its tool-call parsing is
shared with the OpenAI adapter and tested in test_models_toolcalls.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sleuth.models import Message, NonRetryableModelError, OutputSchema, ToolSpec, local
from sleuth.models.local import (
    BOUNDED_CHOICES,
    REPEAT_CHECK_EVERY,
    _awaiting_first_action,
    _bounded_numbers,
    _CoreMeter,
    _default_threads,
    _Engine,
    _grammar,
    _LoopGuard,
    _Settings,
    repeating_tail,
)

LOOKUP = ToolSpec(
    name="lookup",
    parameters={
        "type": "object",
        "properties": {"topic": {"type": "string"}},
        "required": ["topic"],
        "additionalProperties": False,
    },
)
OFFERED = [LOOKUP]


def test_the_first_answer_to_a_user_message_is_the_one_awaiting_an_action() -> None:
    user = Message(role="user", content="q")
    tool = Message(role="tool", content="r", tool_call_id="1")
    assistant = Message(role="assistant", content="")

    assert _awaiting_first_action([Message(role="system", content="s"), user])
    assert not _awaiting_first_action([user, assistant, tool])
    assert _awaiting_first_action([user, assistant, tool, assistant, user])


def test_grammars_combine_calls_and_answer_schemas_with_shared_definitions() -> None:
    pytest.importorskip("llama_cpp")
    answer = OutputSchema(
        name="Report",
        json_schema={
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
            "required": ["items"],
            "$defs": {"Item": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        },
    )

    grammar = _grammar(calls=OFFERED, answer=answer)

    assert grammar is not None
    assert "<tool_call>" in grammar._grammar  # the call alternative is there


def test_thread_count_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_LOCAL_THREADS", "1")
    assert _default_threads() == 1
    monkeypatch.setenv("SLEUTH_LOCAL_THREADS", "many")
    with pytest.raises(NonRetryableModelError, match="SLEUTH_LOCAL_THREADS"):
        _default_threads()
    monkeypatch.delenv("SLEUTH_LOCAL_THREADS")
    assert _default_threads() is None  # chosen per request from the free cores


class _Clock:
    """Stands in for `time` in the local model: a wall clock and this process's CPU time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.cpu = 0.0

    def monotonic(self) -> float:
        return self.now

    def process_time(self) -> float:
        return self.cpu

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    """The local model's clocks, moved by hand."""
    clock = _Clock()
    monkeypatch.setattr(local, "time", clock)
    return clock


def _stat(path: Path, busy_seconds: float) -> None:
    """A /proc/stat whose busy time (user, nice, system, irq, softirq, steal) is busy_seconds."""
    ticks = round(busy_seconds * 100)
    user, system = ticks // 2, ticks - ticks // 2
    path.write_text(f"cpu  {user} 0 {system} 999999 55 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")


def test_the_thread_count_follows_the_cores_other_processes_leave_free(
    tmp_path: Path, clock: _Clock
) -> None:
    stat = tmp_path / "stat"
    _stat(stat, 100.0)
    meter = _CoreMeter(str(stat))
    meter.cpus, meter.cores, meter.tick = None, 4, 100.0  # the machine's total line

    # The first reading waits a moment (nothing else changed in it): all 4 cores are free.
    assert meter.free_cores() == 4
    steps = [
        # (seconds passed, this process's CPU seconds in them, machine busy total, free cores)
        # Busy for 25 CPU-seconds, 20 of them this process's own (llama.cpp itself): others
        # kept half a core busy, which takes it.
        (10, 20, 125.1, 3),
        (10, 0, 145.1, 2),  # others kept 2 cores busy; this process none
        (10, 40, 185.1, 4),  # this process alone kept all 4 busy: they are still its to use
        (10, 0, 225.1, 1),  # others took every core: one thread still runs
        # A request right after reuses the last answer instead of reading too short an interval.
        (0.01, 0, 999.0, 1),
    ]
    for seconds, own_cpu, busy, free in steps:
        clock.now += seconds
        clock.cpu += own_cpu
        _stat(stat, busy)
        assert meter.free_cores() == free, (seconds, own_cpu, busy)


def test_only_the_cpus_this_process_may_use_count(tmp_path: Path, clock: _Clock) -> None:
    stat = tmp_path / "stat"

    def write(busy_per_cpu: list[float]) -> None:
        rows = [
            f"cpu{n} {round(b * 100)} 0 0 99999 7 0 0 0 0 0" for n, b in enumerate(busy_per_cpu)
        ]
        total = round(sum(busy_per_cpu) * 100)
        stat.write_text("\n".join([f"cpu  {total} 0 0 99999 7 0 0 0 0 0", *rows]) + "\n")

    write([0, 0, 0, 0])
    meter = _CoreMeter(str(stat))
    meter.cpus, meter.cores, meter.tick = frozenset({0, 1}), 2, 100.0
    assert meter.free_cores() == 2
    # Others kept CPUs 2 and 3 busy: this process's two are still free.
    clock.now += 10
    write([0, 0, 10, 10])
    assert meter.free_cores() == 2
    # Others kept CPU 1 busy.
    clock.now += 10
    write([0, 10, 20, 20])
    assert meter.free_cores() == 1


def test_without_proc_stat_every_core_counts_as_free(tmp_path: Path) -> None:
    meter = _CoreMeter(str(tmp_path / "missing"))
    assert meter.free_cores() == meter.cores >= 1


class _FakeLlama:
    """What `_Engine.switch_to` uses of llama_cpp.Llama: the live tokens, saved and restored."""

    def __init__(self) -> None:
        self.live: list[int] = []

    @property
    def _input_ids(self) -> np.ndarray:
        return np.array(self.live, dtype=np.int64)


@pytest.fixture
def fake_states(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake engine's saved state is its token list."""
    monkeypatch.setattr(local, "_save_state", lambda llm: list(llm.live))
    monkeypatch.setattr(local, "_load_state", lambda llm, state: setattr(llm, "live", list(state)))


def test_the_longest_saved_prompt_outlives_short_ones_that_displace_it(fake_states: None) -> None:
    """A writer's long prompt, then five short judge prompts with room for two saved states: the
    writer's prompt is still there to restore (dropping the oldest would have dropped it)."""
    engine = _Engine(Path("unused.gguf"), _Settings(n_ctx=8192, n_threads=1, saved_prompts=2))
    engine.llm = llm = _FakeLlama()

    def ask(tokens: list[int]) -> int:
        reused = engine.switch_to(tokens)
        llm.live = list(tokens)  # what evaluating the prompt leaves in the cache
        return reused

    writer = list(range(1000, 3000))
    assert ask(writer) == 0
    for claim in range(5):
        judge = [1, 2, 3, *range(10_000 * (claim + 1), 10_000 * (claim + 1) + 300)]
        ask(judge)
    assert len(engine.saved) == 2
    assert ask([*writer, 7, 8, 9]) == len(writer)


def test_with_one_saved_state_the_returning_loop_is_restored_not_evicted(
    fake_states: None,
) -> None:
    """Loop A, loop B, loop A again with room for one saved state: A's state is taken out before
    B's is saved, so saving B's cannot evict it."""
    engine = _Engine(Path("unused.gguf"), _Settings(n_ctx=8192, n_threads=1, saved_prompts=1))
    engine.llm = llm = _FakeLlama()
    loop_a, loop_b = list(range(1000, 1400)), list(range(5000, 5400))
    for tokens in (loop_a, loop_b):
        engine.switch_to(tokens)
        llm.live = list(tokens)
    assert engine.switch_to([*loop_a, 1, 2]) == len(loop_a)
    assert llm.live == loop_a and list(engine.saved) == [tuple(loop_b)]
    no_room = _Engine(Path("unused.gguf"), _Settings(n_ctx=8192, n_threads=1, saved_prompts=0))
    no_room.llm = other = _FakeLlama()
    for tokens in (loop_a, loop_b):
        no_room.switch_to(tokens)
        other.live = list(tokens)
    assert no_room.switch_to([*loop_a, 1, 2]) == 0 and not no_room.saved


def test_a_bounded_number_becomes_a_choice_the_grammar_enforces() -> None:
    """llama.cpp's schema converter drops `minimum`/`maximum`: the 1.5B wrote a confidence of 99
    where at most 1 is allowed, and its report failed validation twice. Bounded numbers and
    integers become an enum of the values between, which the grammar does enforce."""
    confidence = _bounded_numbers({"type": "number", "minimum": 0, "maximum": 1, "title": "C"})
    assert confidence["title"] == "C" and "type" not in confidence
    assert confidence["enum"][:3] == [0, 0.01, 0.02] and confidence["enum"][-1] == 1
    assert len(confidence["enum"]) == 101 and 0.57 in confidence["enum"]
    wide = _bounded_numbers({"type": "number", "minimum": -5, "maximum": 1000})["enum"]
    assert len(wide) <= BOUNDED_CHOICES and (wide[0], wide[1], wide[-1]) == (0, 10, 1000)
    assert _bounded_numbers({"type": "integer", "minimum": 1, "maximum": 5}) == {
        "enum": [1, 2, 3, 4, 5]
    }
    # Open ranges, huge integer ranges and enums are left as they are.
    for schema in (
        {"type": "number", "minimum": 0},
        {"type": "integer", "minimum": 0, "maximum": 10_000},
        {"type": "number", "enum": [1.5], "minimum": 0, "maximum": 2},
    ):
        assert _bounded_numbers(schema) == schema
    # Nested fields too, in the grammar the model is held to.
    pytest.importorskip("llama_cpp")
    answer = OutputSchema(
        name="Report",
        json_schema={
            "type": "object",
            "properties": {
                "summary": {"type": "string"},
                "scores": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 1, "maximum": 3},
                },
            },
            "required": ["summary", "scores"],
        },
    )
    text = _grammar(calls=[], answer=answer)._grammar
    assert '"1" | "2" | "3"' in text


def test_an_answer_that_repeats_one_stretch_three_times_is_cut_after_the_first_copy() -> None:
    """The 1.5B wrote "Lambda expressions are described in section X." for six sections, then the
    same six again, until the 600-token cap: the loop is found and one copy kept."""
    intro = list(range(100, 140))
    cycle = list(range(500, 530))  # a 30-token stretch
    looping = [*intro, *cycle, *cycle, *cycle]
    assert repeating_tail(looping) == len(intro) + len(cycle)
    # Cut part-way through a copy: the cut still keeps exactly one whole copy.
    assert repeating_tail([*looping, *cycle[:7]]) == len(intro) + len(cycle)
    # A short repeated token (a run of one token) needs about 64 tokens before it counts (the
    # stretch compared may hold a token or two from before the run).
    assert repeating_tail([*intro, *([7] * 57)]) is None
    assert repeating_tail([*intro, *([7] * 60)]) == len(intro) + 1
    assert repeating_tail([*intro, *([7] * 64)]) == len(intro) + 1


def test_a_loop_that_counts_is_a_loop() -> None:
    """The 1.5B's causal chain: "9. [1] -> [10] A class definition is ...", "10. [1] -> [11] A
    class definition is ...", until the cap: each copy differs from the last in two tokens."""
    sentence = list(range(500, 540))
    items = [[2000 + k, 7, 3000 + k, *sentence] for k in range(1, 9)]
    looping = [*range(100, 120), *(token for item in items for token in item)]
    cut = repeating_tail(looping)
    # The first item is kept (and the counter that begins the second, where copies differ).
    assert cut is not None and 20 + len(items[0]) <= cut <= 20 + len(items[0]) + 1


def test_text_that_repeats_less_than_three_times_or_varies_is_not_a_loop() -> None:
    cycle = list(range(500, 540))
    assert repeating_tail([*range(60), *cycle, *cycle]) is None  # twice is a quotation
    # Copies that differ in more than one token in ten are not a loop.
    varied = [*cycle, *cycle[:-5], 1, 2, 3, 4, 5, *cycle]
    assert repeating_tail(varied) is None
    assert repeating_tail(list(range(1000))) is None
    assert repeating_tail([]) is None


def test_the_loop_guard_reads_only_the_output_and_checks_every_few_tokens() -> None:
    prompt = [3] * 200  # a prompt that is itself one repeated token is not the answer's loop
    guard = _LoopGuard(len(prompt))
    cycle = list(range(500, 530))
    output: list[int] = []
    stopped_at = None
    for token in [*cycle, *cycle, *cycle, *cycle]:
        output.append(token)
        if guard(np.array([*prompt, *output]), None):
            stopped_at = len(output)
            break
    assert stopped_at is not None and stopped_at % REPEAT_CHECK_EVERY == 0
    assert 90 <= stopped_at < 90 + REPEAT_CHECK_EVERY and guard.cut == len(cycle)
    assert not _LoopGuard(len(prompt))(np.array(prompt), None)
