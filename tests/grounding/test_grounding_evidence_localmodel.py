"""The claim-level judge on the real local model, on evidence written as code: a claim stated
by a signature or a comment is accepted, and an inserted negation is rejected even where the
model alone says yes.

Marked `localmodel`; runs `$SLEUTH_TEST_GROUNDING_MODEL` (default `qwen2.5-coder-1.5b`, the
default judge) from `$SLEUTH_MODEL_DIR` and skips without its weights, as
`tests/grounding/test_grounding_localmodel.py` does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sleuth.agent.state import EvidenceItem
from sleuth.grounding import ground_claims
from sleuth.grounding.calibration import VETO_CAP
from sleuth.models import Model, resolve, weights

pytestmark = pytest.mark.localmodel
pytest.importorskip("llama_cpp")

MODEL_NAME = os.environ.get("SLEUTH_TEST_GROUNDING_MODEL") or "qwen2.5-coder-1.5b"
REAL_MODEL_DIR = Path(
    os.environ.get("SLEUTH_MODEL_DIR")
    or Path(os.environ.get("SLEUTH_HOME") or "~/.sleuth").expanduser() / "models"
)


@pytest.fixture
def judge(monkeypatch: pytest.MonkeyPatch) -> Model:
    monkeypatch.setenv("SLEUTH_MODEL_DIR", str(REAL_MODEL_DIR))
    state, detail = weights.status(weights.known_model(MODEL_NAME))
    if state != "ready":
        pytest.skip(
            f"local model {MODEL_NAME} is {state} in {REAL_MODEL_DIR} ({detail}); run "
            f"`SLEUTH_MODEL_DIR={REAL_MODEL_DIR} sleuth models pull {MODEL_NAME}`"
        )
    return resolve(f"local:{MODEL_NAME}", local_pull=False)


# CPython 3.11's Lib/textwrap.py and Lib/heapq.py (PSF licence).
TEXTWRAP = (
    "def fill(text, width=70, **kwargs):\n"
    '    """Fill a single paragraph of text, returning a new string.\n'
    "\n"
    "    Reformat the single paragraph in 'text' to fit in lines of no more\n"
    "    than 'width' columns, and return a new string containing the entire\n"
    "    wrapped paragraph.  As with wrap(), tabs are expanded and other\n"
    "    whitespace characters converted to space.\n"
    '    """\n'
    "    w = TextWrapper(width=width, **kwargs)\n"
    "    return w.fill(text)\n"
)
HEAPQ = (
    "heap = []            # creates an empty heap\n"
    "heappush(heap, item) # pushes a new item on the heap\n"
    "item = heappop(heap) # pops the smallest item from the heap\n"
    "item = heap[0]       # smallest item on the heap without popping it\n"
    "heapify(x)           # transforms list into a heap, in-place, in linear time\n"
)
SUPPRESS = (
    "If the suite was exited due to an exception, and the return value from the __exit__() "
    "method was false, the exception is reraised. If the return value was true, the exception "
    "is suppressed, and execution continues with the statement following the with statement."
)


def source(name: str, text: str, index: int) -> EvidenceItem:
    return EvidenceItem(index=index, tool="read_source", arguments={"name": name}, output=text)


async def test_claims_stated_in_code_form_are_accepted_and_quoted(judge: Model) -> None:
    evidence = [source("textwrap.py", TEXTWRAP, 1), source("heapq.py", HEAPQ, 2)]
    claims = [
        "The default width of textwrap's fill() is 70.",
        "heapify() transforms a list into a heap in linear time.",
        "The default width of fill() is 80.",
    ]
    report = await ground_claims(claims, evidence, judge)
    width, linear, wrong = report.claims
    assert width.grounded, width
    assert width.citations[0].quote == "def fill(text, width=70, **kwargs):"
    assert linear.grounded, linear
    assert "in linear time" in linear.citations[0].quote
    assert not wrong.grounded and "numbers" in wrong.checks


async def test_an_inserted_negation_is_rejected_even_when_the_model_says_yes(
    judge: Model,
) -> None:
    evidence = [source("with", SUPPRESS, 1)]
    # The 1.5B alone gives the first one P(supported) 0.62 (its quote question 0.71).
    negated = [
        "If the suite was exited due to an exception, and the return value from the __exit__() "
        "method was not false, the exception is reraised.",
        "If the suite was not exited due to an exception, and the return value from the "
        "__exit__() method was false, the exception is reraised.",
    ]
    report = await ground_claims(negated, evidence, judge)
    for verdict in report.claims:
        assert "inserted_negation" in verdict.checks, verdict
        assert not verdict.grounded and verdict.score <= VETO_CAP, verdict
    # The model alone accepts the first: the veto, not the model, rejects it.
    assert (report.claims[0].model_score or 0.0) >= 0.5, report.claims[0]
