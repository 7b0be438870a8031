"""How the judge's score is combined with the deterministic checks, per model family, and the
default threshold on the combined score.

The combined score is a logistic model: `sigmoid(bias + model * logit(P) + sum(weight * feature))`
over the features of `CheckReport.features()`. Its weights and the threshold are fitted on the
dev split of the grounding benchmark (`python -m bench.grounding --calibrate` prints this table)
and reported on its test split; the README gives the numbers. A family the benchmark has not
measured uses `generic`: the weights of the default local model, whose scale of token
probabilities may differ from the unknown model's, so pass `threshold=` after measuring it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FEATURES = (
    "model",
    "numbers",
    "names",
    "negation",
    "swapped_roles",
    "unsupported_content",
    "coverage",
)
"""`model` is logit(P(supported)) from the judge model; `coverage` the share of the claim's
content words in its best-matching sentences; the others are 1.0 when that check fired."""
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

    def combine(self, model_probability: float | None, features: dict[str, float]) -> float:
        """P(supported) from the judge's probability (if any) and the checks' features; at most
        `VETO_CAP` when they say `vetoed`."""
        total = self.bias
        if model_probability is not None:
            total += self.weights.get("model", 0.0) * logit(model_probability)
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


# Fitted by `python -m bench.grounding --split dev --judges checks,claim,claim-verdict --calibrate`
# (see the module docstring); `generic` reuses the default local model's.
_QWEN_15B = Calibration(
    "qwen2.5-coder-1.5b",
    "logprobs",
    -3.252,
    {
        "model": 2.104,
        "numbers": -1.635,
        "names": -1.122,
        "negation": -0.684,
        "swapped_roles": -1.016,
        "unsupported_content": -1.271,
        "coverage": 1.596,
    },
    0.51,
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
        -0.842,
        {
            "model": 1.397,
            "numbers": -2.36,
            "names": -1.477,
            "negation": -1.086,
            "swapped_roles": -1.61,
            "unsupported_content": -1.472,
            "coverage": 2.065,
        },
        0.58,
    ),
    Calibration(
        "checks",
        "checks",
        -1.493,
        {
            "numbers": -2.498,
            "names": -1.299,
            "negation": -1.409,
            "swapped_roles": -1.572,
            "unsupported_content": -1.493,
            "coverage": 2.095,
        },
        0.54,
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
