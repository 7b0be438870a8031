"""How the judge's score is combined with the deterministic checks, per model family, and the
default threshold on the combined score.

The combined score is a logistic model: `sigmoid(bias + model * logit(P) + sum(weight * feature))`
over the features of `CheckReport.features()`. Its weights and the threshold are fitted on both
splits of the grounding benchmark (`python -m bench.grounding --split all --calibrate` prints
this table), and its out-of-sample accuracy is estimated by five-fold cross-validation by group
(`--cv`); the README gives the numbers. A family the benchmark has not
measured uses `generic`: the weights of the default local model, whose scale of token
probabilities may differ from the unknown model's, so pass `threshold=` after measuring it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FEATURES = (
    "model",
    "quote",
    "numbers",
    "names",
    "negation",
    "swapped_roles",
    "unsupported_content",
    "coverage",
)
"""`model` is logit(P(supported)) from the judge model; `quote` logit(P(Yes)) of its second
question (the claim against its quoted sentence; only judges with token probabilities are asked
it); `coverage` the share of the claim's content words in its best-matching sentences; the
others are 1.0 when that check fired."""
VETO_CAP = 0.05
"""The most a claim scores when a check found its problem in the whole evidence (feature
`vetoed`): a number, version or date that no passage of the evidence holds makes the claim
unsupported however sure the model is. A rounded figure ("about 20%" for "21%") fails too."""


@dataclass(frozen=True)
class Calibration:
    """The weights and default threshold for one judge family and scoring method."""

    family: str
    method: str
    """`logprobs`, `verdict` or `checks` (no judge model)."""
    bias: float
    weights: dict[str, float]
    threshold: float
    """Default threshold on the combined score: the dev split's most accurate one."""

    @property
    def asks_quote(self) -> bool:
        """Whether the judge is asked the second question (its answer has a weight)."""
        return self.weights.get("quote", 0.0) != 0.0

    def combine(
        self,
        model_probability: float | None,
        features: dict[str, float],
        quote_probability: float | None = None,
    ) -> float:
        """P(supported) from the judge's probability (if any), its answer to the quote question
        (if asked) and the checks' features; at most `VETO_CAP` when they say `vetoed`."""
        total = self.bias
        if model_probability is not None:
            total += self.weights.get("model", 0.0) * logit(model_probability)
        # A judge whose second answer had no token probabilities counts its first answer twice.
        second = quote_probability if quote_probability is not None else model_probability
        if second is not None:
            total += self.weights.get("quote", 0.0) * logit(second)
        for name, value in features.items():
            total += self.weights.get(name, 0.0) * value
        score = 1.0 / (1.0 + math.exp(-total))
        if features.get("vetoed"):
            return min(score, VETO_CAP)
        return score


def logit(probability: float) -> float:
    """log(p / (1 - p)), with p kept within [0.001, 0.999] so a 0/1 verdict stays finite."""
    p = min(0.999, max(0.001, probability))
    return math.log(p / (1.0 - p))


CALIBRATIONS: dict[tuple[str, str], Calibration] = {}


def family_of(model_name: str) -> str:
    """The calibration family of a model name: the local catalogue name (`qwen2.5-coder-1.5b`)
    for `local:` models, else `generic`."""
    name = model_name.removeprefix("local:")
    for family, _ in CALIBRATIONS:
        if family != "generic" and name == family:
            return family
    return "generic"


def calibration_for(model_name: str | None, method: str) -> Calibration:
    """The calibration for a judge (None: no judge model) scored by `method`."""
    if model_name is None or method == "checks":
        return CALIBRATIONS[("checks", "checks")]
    family = family_of(model_name)
    return CALIBRATIONS.get((family, method)) or CALIBRATIONS[("generic", method)]


def _register(*calibrations: Calibration) -> None:
    for calibration in calibrations:
        CALIBRATIONS[(calibration.family, calibration.method)] = calibration


# Fitted by `python -m bench.grounding --load scores.json --recheck --split all --judges
# lexical,checks,claim --calibrate` on the 397 claims of both splits (the models' answers saved
# by `--split all --save scores.json`); `generic` reuses the default local model's. Until
# 2026-12-02 they were fitted on the dev split alone (117 claims) and the test split was
# held out; fitted on all, the test split's figures are in-sample and `--cv` gives the
# out-of-sample estimate. The `verdict` one (a judge without token probabilities, which is not
# asked the quote question) was fitted earlier, on the dev split, with older checks.
_QWEN_15B = Calibration(
    "qwen2.5-coder-1.5b",
    "logprobs",
    -1.512,
    {
        "model": 1.138,
        "quote": 0.68,
        "numbers": -2.471,
        "names": -1.335,
        "negation": 0.09,
        "swapped_roles": -1.918,
        "unsupported_content": -1.141,
        "coverage": -0.619,
    },
    0.54,
)
_QWEN_15B_VERDICT = Calibration(
    "qwen2.5-coder-1.5b",
    "verdict",
    -5.317,
    {
        "model": 0.57,
        "numbers": -2.008,
        "names": -1.489,
        "negation": -1.155,
        "swapped_roles": -1.629,
        "unsupported_content": -1.307,
        "coverage": 2.547,
    },
    0.51,
)
_register(
    _QWEN_15B,
    _QWEN_15B_VERDICT,
    Calibration(
        "qwen2.5-coder-0.5b",
        "logprobs",
        1.866,
        {
            "model": -0.049,
            "quote": 2.961,
            "numbers": -2.519,
            "names": -1.691,
            "negation": -0.703,
            "swapped_roles": -2.484,
            "unsupported_content": -1.441,
            "coverage": 0.934,
        },
        0.47,
    ),
    Calibration(
        "checks",
        "checks",
        -2.168,
        {
            "numbers": -2.803,
            "names": -2.108,
            "negation": -1.653,
            "swapped_roles": -2.291,
            "unsupported_content": -1.108,
            "coverage": 2.91,
        },
        0.62,
    ),
    Calibration("generic", "logprobs", _QWEN_15B.bias, _QWEN_15B.weights, _QWEN_15B.threshold),
    Calibration(
        "generic",
        "verdict",
        _QWEN_15B_VERDICT.bias,
        _QWEN_15B_VERDICT.weights,
        _QWEN_15B_VERDICT.threshold,
    ),
)
