"""Grounding benchmark: judges × models on labelled (evidence, claim, supported?) items.

    python -m bench.grounding [--split test] [--models qwen2.5-coder-1.5b,qwen2.5-coder-0.5b]
                              [--judges lexical,batched,claim] [--limit GROUPS] [--threads N]
    python -m bench.grounding --split dev --calibrate [--save FILE | --load FILE]
    python -m bench.grounding --load FILE --recheck [--split test] [--calibrate] [--cv]

The items (`bench/grounding_data/items.json`, built by `python -m bench.grounding_data.build`
from hand-written claims about three kinds of public text: CPython's language reference,
Debian changelogs and the Apache License) hold supported claims (verbatim and paraphrased) and
unsupported ones, one set per error class: entity, predicate, circumstance, negation, swapped
roles, and additions the evidence never states. A group is one fact's evidence (a tool call
that states it and one about something else) and its claims; groups are split into dev (tune
here) and test (report this; the calibration is fitted on both, see `--cv`).

Judges, side by side in one run:

- `lexical`: the lexical fallback of today's judge (word overlap; no model).
- `checks`: the claim-level judge without a model (its deterministic checks and overlap alone).
- `batched`: today's batched LLM judge (`judge_claims`): a group's claims in one request.
- `claim`: the claim-level judge (`ground_claims`), scored from token probabilities.
- `claim-verdict`: the claim-level judge told no token probabilities (as for Anthropic).

Figures per judge and model: AUROC of the score (supported vs not), accuracy of the verdict at
the default threshold, AUROC per error class (supported claims vs that class), and the median
seconds per claim (a group's wall time over its claims; noisy on a shared machine, so the load
average is printed with it). `--calibrate` fits the claim judge's combination weights and
default threshold on the run's items and prints them as Python for
`sleuth/grounding/calibration.py`; the shipped ones are fitted on both splits (`--split all`),
so the test split's figures are then in-sample, and `--cv` prints the out-of-sample estimate:
five-fold cross-validation by group, each fold scored by a calibration fitted on the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.agent.state import EvidenceItem
from sleuth.grounding import calibration_for, ground_claims, judge_claims
from sleuth.grounding.calibration import FEATURES, VETO_CAP, Calibration, logit
from sleuth.models import Message, Model, ModelResponse, OutputSchema, ToolSpec, resolve

DATA = Path(__file__).parent / "grounding_data" / "items.json"
CLASSES = ("entity", "predicate", "circumstance", "negation", "roles", "addition")
MODEL_JUDGES = ("batched", "claim", "claim-verdict")
DEFAULT_MODELS = "qwen2.5-coder-1.5b,qwen2.5-coder-0.5b"


@dataclass
class Outcome:
    """One claim's result under one judge and model."""

    group: str
    kind: str
    label_class: str
    supported: bool
    score: float
    grounded: bool
    seconds: float
    model_score: float | None = None
    features: dict[str, float] = field(default_factory=dict)
    quote_score: float | None = None


class WithoutLogprobs:
    """A model that never returns token probabilities (how the judge sees Anthropic)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name

    async def request(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        output_schema: OutputSchema | None = None,
        max_output_tokens: int | None = None,
        tool_choice: str | None = None,
        top_logprobs: int | None = None,
    ) -> ModelResponse:
        response = await self.inner.request(
            messages,
            tools=tools,
            output_schema=output_schema,
            max_output_tokens=max_output_tokens,
            tool_choice=tool_choice,
        )
        return response.model_copy(update={"logprobs": None})


def load_groups(split: str, limit: int | None) -> list[dict[str, Any]]:
    """The split's groups, kinds interleaved so that `limit` groups cover every kind."""
    groups = json.loads(DATA.read_text(encoding="utf-8"))["groups"]
    chosen = [g for g in groups if split == "all" or g["split"] == split]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for group in chosen:
        by_kind.setdefault(group["kind"], []).append(group)
    interleaved = []
    while any(by_kind.values()):
        for kind in list(by_kind):
            if by_kind[kind]:
                interleaved.append(by_kind[kind].pop(0))
    return interleaved[:limit] if limit else interleaved


async def run_judge(judge: str, model: Model | None, group: dict[str, Any]) -> list[Outcome]:
    """Judge every claim of one group; returns an outcome per claim."""
    evidence = [EvidenceItem.model_validate(item) for item in group["evidence"]]
    claims = [c["text"] for c in group["claims"]]
    started = time.perf_counter()
    if judge == "lexical":
        report = await judge_claims(claims, evidence, None)
    elif judge == "batched":
        report = await judge_claims(claims, evidence, model)
    elif judge == "checks":
        report = await ground_claims(claims, evidence, None)
    else:
        assert model is not None
        judge_model: Model = WithoutLogprobs(model) if judge == "claim-verdict" else model
        # The second question is asked whatever today's calibration weighs, so it can be fitted.
        report = await ground_claims(
            claims, evidence, judge_model, concurrency=1, quote_question=True
        )
    seconds = (time.perf_counter() - started) / len(claims)
    return [
        Outcome(
            group=group["id"],
            kind=group["kind"],
            label_class=claim["class"],
            supported=claim["supported"],
            score=verdict.score,
            grounded=verdict.grounded,
            seconds=seconds,
            model_score=verdict.model_score,
            features=verdict.features,
            quote_score=verdict.quote_score,
        )
        for claim, verdict in zip(group["claims"], report.claims, strict=True)
    ]


METHODS = {"claim": "logprobs", "claim-verdict": "verdict", "checks": "checks"}
"""The claim-level judges (their outcomes carry the checks' features) and how each scores."""


async def recheck(key: tuple[str, str], outcomes: list[Outcome]) -> list[Outcome]:
    """Saved outcomes of a claim-level judge rescored by today's checks and calibration: the
    saved model score (the judge model's P(supported), which the checks do not change) is
    recombined with the features the current checks compute. Other judges are kept as saved."""
    judge, model = key
    if judge not in METHODS:
        return outcomes
    by_id = {g["id"]: g for g in json.loads(DATA.read_text(encoding="utf-8"))["groups"]}
    calibration = calibration_for(None if judge == "checks" else f"local:{model}", METHODS[judge])
    features: dict[str, list[dict[str, float]]] = {}
    seen: Counter[str] = Counter()  # a group's outcomes come in the order of its claims
    rescored = []
    for outcome in outcomes:
        if outcome.group not in features:
            group = by_id[outcome.group]
            evidence = [EvidenceItem.model_validate(item) for item in group["evidence"]]
            report = await ground_claims([c["text"] for c in group["claims"]], evidence, None)
            features[outcome.group] = [verdict.features for verdict in report.claims]
        current = replace(outcome, features=features[outcome.group][seen[outcome.group]])
        seen[outcome.group] += 1
        rescored.append(scored_by(calibration, current))
    return rescored


def scored_by(calibration: Calibration, outcome: Outcome) -> Outcome:
    """`outcome` scored by `calibration` from its saved model answers and its features, grounded
    at the calibration's threshold; a claim without passages (no features) scores 0."""
    score = (
        calibration.combine(outcome.model_score, outcome.features, outcome.quote_score)
        if outcome.features
        else 0.0
    )
    return replace(outcome, score=score, grounded=score >= calibration.threshold)


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """P(a supported claim scores above an unsupported one), ties counting half."""
    positives = [s for s, y in zip(scores, labels, strict=True) if y]
    negatives = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not positives or not negatives:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def summarize(outcomes: list[Outcome]) -> dict[str, float]:
    labels = [o.supported for o in outcomes]
    scores = [o.score for o in outcomes]
    row = {
        "claims": float(len(outcomes)),
        "auroc": auroc(labels, scores),
        "accuracy": sum(o.grounded == o.supported for o in outcomes) / len(outcomes),
        "seconds": statistics.median(o.seconds for o in outcomes),
    }
    supported = [o for o in outcomes if o.supported]
    for label_class in CLASSES:
        subset = supported + [o for o in outcomes if o.label_class == label_class]
        row[label_class] = auroc([o.supported for o in subset], [o.score for o in subset])
    return row


def print_table(rows: list[tuple[str, str, dict[str, float]]]) -> None:
    header = ["judge", "model", "claims", "AUROC", "acc", *CLASSES, "s/claim"]
    widths = [13, 19, 6, 6, 6, *[max(6, len(c)) for c in CLASSES], 7]
    print(
        "  ".join(
            h.ljust(w) if i < 2 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    for judge, model, row in rows:
        cells = [
            judge,
            model,
            f"{row['claims']:.0f}",
            f"{row['auroc']:.3f}",
            f"{row['accuracy']:.3f}",
        ]
        cells += [f"{row[c]:.3f}" for c in CLASSES]
        cells.append(f"{row['seconds']:.2f}")
        print(
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )


def design_row(outcome: Outcome) -> list[float]:
    """The calibration's inputs for one outcome, in `FEATURES` order."""
    values = []
    for name in FEATURES:
        if name == "model":
            values.append(logit(outcome.model_score) if outcome.model_score is not None else 0.0)
        elif name == "quote":
            values.append(logit(outcome.quote_score) if outcome.quote_score is not None else 0.0)
        else:
            values.append(outcome.features.get(name, 0.0))
    return values


def fit(outcomes: list[Outcome], l2: float = 0.3) -> tuple[float, dict[str, float], float]:
    """Logistic regression (L2 on the weights, Newton steps), then the most accurate threshold
    for the combined score (vetoes applied). Claims without passages (no features) always score
    0 and are left out of the fit."""
    usable = [o for o in outcomes if o.features]
    x = np.array([[1.0, *design_row(o)] for o in usable])
    y = np.array([float(o.supported) for o in usable])
    penalty = np.eye(x.shape[1]) * l2
    penalty[0, 0] = 0.0
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = (x.T * (p * (1 - p))) @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    scores = 1.0 / (1.0 + np.exp(-(x @ w)))
    vetoed = np.array([bool(o.features.get("vetoed")) for o in usable])
    scores = np.where(vetoed, np.minimum(scores, VETO_CAP), scores)
    best_threshold, best_accuracy = 0.5, -1.0
    for candidate in np.round(np.arange(0.05, 0.96, 0.01), 2):
        accuracy = float(np.mean((scores >= candidate) == (y == 1.0)))
        if accuracy > best_accuracy + 1e-9 or (
            abs(accuracy - best_accuracy) <= 1e-9
            and abs(candidate - 0.5) < abs(best_threshold - 0.5)
        ):
            best_threshold, best_accuracy = float(candidate), accuracy
    weights = {name: round(float(v), 3) for name, v in zip(FEATURES, w[1:], strict=True)}
    return round(float(w[0]), 3), weights, best_threshold


def cross_validate(outcomes: list[Outcome], folds: int = 5, seed: int = 0) -> list[Outcome]:
    """Out-of-sample scores for a claim-level judge's outcomes: the groups are dealt into
    `folds` folds (shuffled by `seed`), and each fold's claims are scored by a calibration
    fitted on the other folds alone, at that calibration's threshold. A group's claims share
    its evidence, so they never sit on both sides of a fit."""
    ids = sorted({o.group for o in outcomes})
    if len(ids) < folds:
        raise ValueError(f"cross-validation needs at least {folds} groups, got {len(ids)}")
    np.random.default_rng(seed).shuffle(ids)
    scored = []
    for fold in range(folds):
        held = set(ids[fold::folds])
        bias, weights, threshold = fit([o for o in outcomes if o.group not in held])
        calibration = Calibration("cv", "logprobs", bias, weights, threshold)
        scored += [scored_by(calibration, o) for o in outcomes if o.group in held]
    return scored


async def main_async(args: argparse.Namespace) -> None:
    judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    model_names = [m.strip() for m in args.models.split(",") if m.strip()]
    groups = load_groups(args.split, args.limit)
    results: dict[tuple[str, str], list[Outcome]] = {}
    if args.load:
        for key, rows in json.loads(Path(args.load).read_text()).items():
            judge, _, model = key.partition("|")
            # Only the chosen split's groups (a file saved with `--split all` holds both).
            wanted = {group["id"] for group in groups}
            kept = [Outcome(**row) for row in rows if row["group"] in wanted]
            if kept:
                results[(judge, model)] = kept
        if args.recheck:
            results = {key: await recheck(key, rows) for key, rows in results.items()}
    else:
        print(
            f"{len(groups)} groups, {sum(len(g['claims']) for g in groups)} claims "
            f"({args.split} split); {os.cpu_count()} cores, load average "
            f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}, {args.threads} llama.cpp threads"
        )
        for judge in judges:
            if judge in MODEL_JUDGES:
                continue
            results[(judge, "-")] = [o for g in groups for o in await run_judge(judge, None, g)]
        for name in model_names:
            model = resolve(f"local:{name}", local_n_threads=args.threads)
            for judge in judges:
                if judge not in MODEL_JUDGES:
                    continue
                outcomes: list[Outcome] = []
                for number, group in enumerate(groups, start=1):
                    outcomes.extend(await run_judge(judge, model, group))
                    print(f"  {judge} {name}: group {number}/{len(groups)}", end="\r", flush=True)
                results[(judge, name)] = outcomes
        print(" " * 60, end="\r")
        print(f"load average after the run: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.save:
        Path(args.save).write_text(
            json.dumps({f"{j}|{m}": [asdict(o) for o in rows] for (j, m), rows in results.items()})
        )
    table = [(j, m, summarize(rows)) for (j, m), rows in results.items()]
    if args.cv:
        table += [
            (f"{j} (CV)", m, summarize(cross_validate(rows)))
            for (j, m), rows in results.items()
            if METHODS.get(j) == "logprobs"
        ]
    print_table(table)
    if args.calibrate:
        fitted_on = args.load or f"the {args.split} split"
        print(f"\n# fitted on {fitted_on}; paste into sleuth/grounding/calibration.py")
        for (judge, model), rows in results.items():
            if judge not in METHODS:
                continue
            bias, weights, threshold = fit(rows)
            if judge == "checks":
                weights.pop("model")
                weights.pop("quote")
            family = model if judge != "checks" else "checks"
            method = METHODS[judge]
            print(f"Calibration({family!r}, {method!r}, {bias}, {weights}, {threshold}),")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default="test")
    parser.add_argument("--models", default=DEFAULT_MODELS, help="local catalogue models")
    parser.add_argument("--judges", default="lexical,checks,batched,claim")
    parser.add_argument("--limit", type=int, default=None, help="at most this many groups")
    parser.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("SLEUTH_LOCAL_THREADS") or os.cpu_count() or 1),
        help="llama.cpp threads (fewer than cores is faster on a busy machine)",
    )
    parser.add_argument("--calibrate", action="store_true", help="fit and print calibrations")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="also print the claim judge's five-fold cross-validated figures (folds by group; "
        "each fold scored by a calibration fitted on the others)",
    )
    parser.add_argument("--save", help="write every claim's outcome to this JSON file")
    parser.add_argument("--load", help="read outcomes saved by --save instead of running judges")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="with --load: rerun the checks of today's code and recombine them with the saved "
        "model scores by today's calibration (no model runs)",
    )
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.recheck and not args.load:
        parser.error("--recheck rescores saved outcomes: give --load FILE")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
