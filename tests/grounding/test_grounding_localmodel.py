"""The claim-level judge on the real local model: minimal edits rejected, a paraphrase accepted.

Marked `localmodel`. It runs `$SLEUTH_TEST_GROUNDING_MODEL`, default `qwen2.5-coder-1.5b`: the
default judge, the one the benchmark's goals are set for (the 0.5B's token probabilities tell a
paraphrase from an edit too weakly to accept one reliably; see docs/grounding.md).
Weights come from `$SLEUTH_MODEL_DIR`; without them the tests skip, also under CI, whose set-up
pulls only the 0.5B: `sleuth models pull qwen2.5-coder-1.5b` to run them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sleuth.agent.state import EvidenceItem
from sleuth.grounding import ground_claims
from sleuth.models import Model, resolve, weights

pytestmark = pytest.mark.localmodel
pytest.importorskip("llama_cpp")

MODEL_NAME = os.environ.get("SLEUTH_TEST_GROUNDING_MODEL") or "qwen2.5-coder-1.5b"
REAL_MODEL_DIR = Path(
    os.environ.get("SLEUTH_MODEL_DIR")
    or os.environ.get("SLEUTH_TEST_MODELS_DIR")
    or Path(os.environ.get("SLEUTH_HOME") or "~/.sleuth").expanduser() / "models"
)

# From CPython's language reference (`pydoc_data.topics`, PSF licence): the `with` and `try`
# topics, as the demo store's search tool returns them.
WITH_TEXT = (
    '7. The context manager\'s "__exit__()" method is invoked.  If an\n'
    "   exception caused the suite to be exited, its type, value, and\n"
    '   traceback are passed as arguments to "__exit__()". Otherwise, three\n'
    '   "None" arguments are supplied.\n\n'
    "   If the suite was exited due to an exception, and the return value\n"
    '   from the "__exit__()" method was false, the exception is reraised.\n'
    "   If the return value was true, the exception is suppressed, and\n"
    '   execution continues with the statement following the "with"\n'
    "   statement.\n\n"
    "Changed in version 3.10: Support for using grouping parentheses to\n"
    "break the statement in multiple lines."
)
TRY_TEXT = (
    'If "finally" is present, it specifies a \'cleanup\' handler.  The "try"\n'
    'clause is executed, including any "except" and "else" clauses.  If an\n'
    "exception occurs in any of the clauses and is not handled, the\n"
    'exception is temporarily saved. The "finally" clause is executed.  If\n'
    'there is a saved exception it is re-raised at the end of the "finally"\n'
    'clause.  If the "finally" clause raises another exception, the saved\n'
    "exception is set as the context of the new exception."
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


def evidence() -> list[EvidenceItem]:
    rows = [
        {
            "id": "with",
            "source": "python-docs/with",
            "location": "chars 1200-1900",
            "score": 1.0,
            "text": WITH_TEXT,
        },
        {
            "id": "try",
            "source": "python-docs/try",
            "location": "chars 5988-6480",
            "score": 0.7,
            "text": TRY_TEXT,
        },
    ]
    return [
        EvidenceItem(
            index=1,
            tool="search_python_docs",
            arguments={"query": "with statement __exit__ exception"},
            output=json.dumps(rows),
        )
    ]


async def test_the_local_judge_rejects_minimal_edits_and_accepts_a_paraphrase(judge: Model) -> None:
    paraphrase = (
        "When __exit__() returns a true value, the exception is suppressed and execution "
        "resumes after the with statement."
    )
    changed_number = (
        "Since Python 3.8, the items of a with statement can be grouped in parentheses."
    )
    swapped_names = (
        "If the finally clause raises another exception, the new exception is set as the "
        "context of the saved exception."
    )
    negation = "If the return value was true, the exception is not suppressed."
    report = await ground_claims(
        [paraphrase, changed_number, swapped_names, negation], evidence(), judge
    )

    assert report.method == "logprobs"
    accepted, *rejected = report.claims
    assert accepted.grounded, accepted
    assert accepted.citations and "suppressed" in accepted.citations[0].quote
    for verdict in rejected:
        assert not verdict.grounded, verdict
        assert verdict.score < accepted.score
    assert "numbers" in rejected[0].checks
    assert "swapped_roles" in rejected[1].checks
    assert "negation" in rejected[2].checks


async def test_the_demo_runs_two_unsupported_claims_are_flagged(judge: Model) -> None:
    """The claims issue #11 found marked supported in the README's demo run."""
    claims = [
        "The try/finally statement is more flexible and can be used in any context.",
        "If __exit__ returns False, the exception is propagated to the next with statement.",
        "If __exit__() returns a false value, the exception is reraised.",
    ]
    report = await ground_claims(claims, evidence(), judge)
    flexible, propagated, reraised = report.claims
    assert not flexible.grounded and not propagated.grounded
    assert reraised.grounded
