"""How the judge's score is combined with the deterministic checks, per model family, and the
default threshold on the combined score.

The combined score is a logistic model: `sigmoid(bias + model * logit(P) + sum(weight * feature))`
over the features of `CheckReport.features()`. Its weights and the threshold are fitted on both
splits of the grounding benchmark (`python -m bench.grounding --split all --calibrate` prints
this table), and its out-of-sample accuracy is estimated by five-fold cross-validation by group
(`--cv`); docs/grounding.md gives the numbers. A family the benchmark has not
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


VETO_FINDINGS = ("numbers", "swapped_roles", "inserted_negation")
"""Findings that cap a claim at `VETO_CAP` whatever the model says, as a decisive one does:
each is right at least 95 % of the times it fires on the grounding benchmark (both sets, the
checks alone, `python -m bench.grounding --judges checks` prints the table): a number, version
or date the claim's passages do not hold (44 of 45 fired claims falsified), two terms in
swapped roles (19 of 20), a negation added to a sentence the claim otherwise copies (10 of
10). `names` (36 of 38) and the whole `negation` finding (72 of 89: a paraphrase moves a
"not" to another word, or says "unless", "without") stay weights the calibration fits."""


def vetoed(features: dict[str, float]) -> bool:
    """Whether the checks' features hold a decisive finding or a `VETO_FINDINGS` one."""
    return bool(features.get("vetoed")) or any(features.get(name) for name in VETO_FINDINGS)


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
        (if asked) and the checks' features; at most `VETO_CAP` when they hold a veto
        (`vetoed`)."""
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
        if vetoed(features):
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


# The default local model's: fitted by `python -m bench.grounding --load
# bench/grounding_data/saved/claim-qwen2.5-coder-1.5b.json --recheck --split test --fit-split
# dev` on the dev split's 54 claims of both sets (the minimal pairs and the abstractive set;
# the test split is held out, docs/benchmarks.md has its figures); `generic` reuses it. The
# `verdict` one (a judge without token probabilities, which is not asked the quote question)
# and the 0.5B's were fitted earlier, with older checks.
_QWEN_15B = Calibration(
    "qwen2.5-coder-1.5b",
    "logprobs",
    -0.177,
    {
        "model": 1.723,
        "quote": 0.408,
        "numbers": -1.097,
        "names": -0.494,
        "negation": -0.083,
        "swapped_roles": -1.618,
        "unsupported_content": -1.282,
        "coverage": -2.031,
    },
    0.45,
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
