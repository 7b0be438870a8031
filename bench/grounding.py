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
import contextlib
import io
import json
import os
import platform
import re
import shlex
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Unpack

import numpy as np

from bench.grounding_data import abstractive
from sleuth.agent.state import EvidenceItem
from sleuth.grounding import calibration_for, ground_claims, judge_claims
from sleuth.grounding.calibration import FEATURES, VETO_CAP, Calibration, logit, vetoed
from sleuth.models import Message, Model, ModelResponse, resolve
from sleuth.models.base import ModelRequestParameters, RequestKeywords, request_parameters

DATA = Path(__file__).parent / "grounding_data" / "items.json"
CLASSES = ("entity", "predicate", "circumstance", "negation", "roles", "addition")
MODEL_JUDGES = ("batched", "claim", "claim-verdict")
DEFAULT_MODELS = "qwen2.5-coder-1.5b,qwen2.5-coder-0.5b"
SETS = ("minimal", "abstractive")
_CLAUSE_JOIN = re.compile(r",?\s*(?:;|, and|, but|, while|, whereas|, so)\s+")


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
    wide_score: float | None = None
    """The judge model's P(supported) when shown every selected passage (`--variants`)."""
    atomic_score: float | None = None
    """The lowest P(supported) of the claim's clauses judged one by one (`--variants`)."""
    claim: str = ""


class WithoutLogprobs:
    """A model that never returns token probabilities (how the judge sees Anthropic)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        parameters = request_parameters(parameters, keywords)
        response = await self.inner.request(
            messages, parameters.model_copy(update={"top_logprobs": None})
        )
        return response.model_copy(update={"logprobs": None})


def all_groups(sets: Sequence[str] = SETS) -> list[dict[str, Any]]:
    """The groups of the chosen sets: `minimal` (the minimal pairs of `items.json`) and
    `abstractive` (`bench.grounding_data.abstractive`)."""
    groups = json.loads(DATA.read_text(encoding="utf-8"))["groups"] if "minimal" in sets else []
    return groups + (abstractive.groups() if "abstractive" in sets else [])


def set_of(kind: str) -> str:
    return "abstractive" if kind == "abstractive" else "minimal"


def load_groups(split: str, limit: int | None, sets: Sequence[str] = SETS) -> list[dict[str, Any]]:
    """The split's groups, kinds interleaved so that `limit` groups cover every kind."""
    groups = all_groups(sets)
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


def clauses(claim: str) -> list[str]:
    """A claim cut into its clauses at `;`, ", and", ", but", ", while", ", whereas", ", so"
    (each of four words or more; else the claim itself): the rule-based atomic-fact rewriting
    the `--variants` table measures."""
    parts = [p.strip(" .") for p in _CLAUSE_JOIN.split(claim)]
    if len(parts) < 2 or any(len(p.split()) < 4 for p in parts):
        return [claim]
    return [p[0].upper() + p[1:] + "." for p in parts]


async def variant_scores(
    model: Model, claims: list[str], evidence: list[EvidenceItem], verdicts: Sequence[Any]
) -> tuple[list[float | None], list[float | None]]:
    """Each claim's model score shown every selected passage (`focus_share=0`; answers to the
    questions already asked are reused), and the lowest score of its clauses judged one by one
    (`clauses`; a claim of one clause keeps its own score)."""
    earlier = [v.answer for v in verdicts if v.answer is not None]
    wide_report = await ground_claims(
        claims,
        evidence,
        model,
        concurrency=1,
        quote_question=False,
        focus_share=0.0,
        earlier=earlier,
    )
    atomic: list[float | None] = []
    for claim, verdict in zip(claims, verdicts, strict=True):
        parts = clauses(claim)
        if len(parts) == 1:
            atomic.append(verdict.model_score)
            continue
        parts_report = await ground_claims(
            parts, evidence, model, concurrency=1, quote_question=False, earlier=earlier
        )
        atomic.append(min(v.model_score or 0.0 for v in parts_report.claims))
    return [v.model_score for v in wide_report.claims], atomic


async def run_judge(
    judge: str, model: Model | None, group: dict[str, Any], *, variants: bool = False
) -> list[Outcome]:
    """Judge every claim of one group; returns an outcome per claim. With `variants`, a claim
    judge also scores each claim shown every selected passage and clause by clause."""
    evidence = [EvidenceItem.model_validate(item) for item in group["evidence"]]
    claims = [c["text"] for c in group["claims"]]
    started = time.perf_counter()
    wide: list[float | None] = [None] * len(claims)
    atomic: list[float | None] = [None] * len(claims)
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
    elapsed = time.perf_counter() - started
    if variants and judge == "claim":
        assert model is not None
        wide, atomic = await variant_scores(model, claims, evidence, report.claims)
    seconds = elapsed / len(claims)
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
            wide_score=wide[n],
            atomic_score=atomic[n],
            claim=claim["text"],
        )
        for n, (claim, verdict) in enumerate(zip(group["claims"], report.claims, strict=True))
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
    by_id = {g["id"]: g for g in all_groups()}
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


FITTED: list[str] = []
"""The calibrations `refit` fitted, as Python for `sleuth/grounding/calibration.py`."""


def refit(key: tuple[str, str], outcomes: list[Outcome], split: str) -> list[Outcome]:
    """A claim-level judge's outcomes scored by a calibration fitted on `split`'s groups alone
    (both sets), so the other split's figures are held out of the fit."""
    judge, model = key
    if judge not in METHODS:
        return outcomes
    fitted_on = [o for o in outcomes if _split(o) == split]
    bias, weights, threshold = fit(fitted_on)
    if judge == "checks":
        weights.pop("model")
        weights.pop("quote")
    family = model if judge != "checks" else "checks"
    FITTED.append(
        f"Calibration({family!r}, {METHODS[judge]!r}, {bias}, {weights}, {threshold}),"
        f"  # fitted on the {split} split's {len(fitted_on)} claims"
    )
    calibration = Calibration(family, METHODS[judge], bias, weights, threshold)
    return [scored_by(calibration, o) for o in outcomes]


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


FINDING_CLASS = {
    "numbers": "circumstance",
    "names": "entity",
    "negation": "negation",
    "swapped_roles": "roles",
    "unsupported_content": "addition",
    "inserted_negation": "negation",
}
"""The error class each deterministic finding is meant to catch (its recall is over that class)."""


def finding_rows(outcomes: list[Outcome]) -> list[list[str]]:
    """Per finding (then decisive ones, and every veto): how often it fired, its precision (the share
    of claims it fired on that are falsified) and its recall (of its class, and of every
    falsified claim)."""
    rows = []
    falsified = [o for o in outcomes if not o.supported]
    for name in [*FINDING_CLASS, "decisive", "any veto"]:
        if name == "any veto":
            fired = [o for o in outcomes if o.features and vetoed(o.features)]
        else:
            key = "vetoed" if name == "decisive" else name
            fired = [o for o in outcomes if o.features.get(key)]
        wrong = [o for o in fired if not o.supported]
        target = FINDING_CLASS.get(name)
        in_class = [o for o in falsified if o.label_class == target] if target else []
        rows.append(
            [
                name,
                str(len(fired)),
                f"{len(wrong) / len(fired):.3f}" if fired else "-",
                f"{sum(bool(o.features.get(name)) for o in in_class) / len(in_class):.3f}"
                if in_class
                else "-",
                f"{len(wrong) / len(falsified):.3f}" if falsified else "-",
            ]
        )
    return rows


def accepted_rows(results: dict[tuple[str, str], list[Outcome]]) -> list[list[str]]:
    """Per judge and set: the share of correct claims grounded, and of each class of falsified
    claims grounded (the goal: at most 5 % per class), at the default threshold."""
    rows = []
    for (judge, model), outcomes in results.items():
        for name in SETS:
            chosen = [o for o in outcomes if set_of(o.kind) == name]
            if not chosen:
                continue
            cells = [judge, model, name]
            supported = [o for o in chosen if o.supported]
            cells.append(_share(supported))
            for label_class in CLASSES:
                cells.append(_share([o for o in chosen if o.label_class == label_class]))
            rows.append(cells)
    return rows


def _share(outcomes: list[Outcome]) -> str:
    if not outcomes:
        return "-"
    return f"{sum(o.grounded for o in outcomes)}/{len(outcomes)}"


def summary_auroc(outcomes: list[Outcome]) -> float:
    """AUROC of the mean claim score of each correct summary against each hallucinated one
    (a summary: one group's claims of one label)."""
    means: dict[tuple[str, bool], list[float]] = {}
    for o in outcomes:
        means.setdefault((o.group, o.supported), []).append(o.score)
    keys = sorted(means)
    return auroc([k[1] for k in keys], [statistics.mean(means[k]) for k in keys])


VARIANTS = {
    "model alone (focused passages)": lambda o: o.model_score,
    "several passages at once (all selected)": lambda o: o.wide_score,
    "atomic clauses (lowest clause)": lambda o: o.atomic_score,
    "quote question alone": lambda o: o.quote_score,
    "model + quote (mean logit)": lambda o: _mean_logit(o.model_score, o.quote_score),
}


def _mean_logit(*probabilities: float | None) -> float | None:
    if any(p is None for p in probabilities):
        return None
    total = sum(logit(p) for p in probabilities if p is not None) / len(probabilities)
    return 1.0 / (1.0 + np.exp(-total))


def variant_rows(outcomes: list[Outcome]) -> list[list[str]]:
    """The paraphrase options side by side on the abstractive set's held-out (test) groups:
    AUROC of each variant's score over the claims, and the calibrated judge's (checks and
    vetoes included), fitted on the dev groups of both sets, with each score in the model's
    place."""
    test = [o for o in outcomes if set_of(o.kind) == "abstractive" and _split(o) == "test"]
    dev = [o for o in outcomes if _split(o) == "dev"]
    rows = []
    for name, score in VARIANTS.items():
        scored = [(o, score(o)) for o in test]
        usable = [(o, v) for o, v in scored if v is not None]
        if not usable:
            continue
        raw = auroc([o.supported for o, _ in usable], [v for _, v in usable])
        swapped = [replace(o, model_score=v) for o, v in usable]
        dev_swapped = [replace(o, model_score=score(o)) for o in dev if score(o) is not None]
        calibrated = float("nan")
        if dev_swapped and len({o.supported for o in dev_swapped}) == 2:
            bias, weights, threshold = fit(dev_swapped)
            calibration = Calibration("variant", "logprobs", bias, weights, threshold)
            rescored = [scored_by(calibration, o) for o in swapped]
            calibrated = auroc([o.supported for o in rescored], [o.score for o in rescored])
        rows.append([name, str(len(usable)), f"{raw:.3f}", f"{calibrated:.3f}"])
    return rows


SPLITS: dict[str, str] = {}


def _split(outcome: Outcome) -> str:
    if not SPLITS:
        SPLITS.update({g["id"]: g["split"] for g in all_groups()})
    return SPLITS.get(outcome.group, "test")


def format_rows(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


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
    vetoes = np.array([vetoed(o.features) for o in usable])
    scores = np.where(vetoes, np.minimum(scores, VETO_CAP), scores)
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


DOCS = Path(__file__).parent.parent / "docs" / "benchmarks.md"
START, END = "<!-- bench:grounding:start -->", "<!-- bench:grounding:end -->"


def write_docs(
    path: Path,
    table: list[tuple[str, str, dict[str, float]]],
    sections: list[tuple[str, str]],
) -> None:
    """Replace the grounding section of `path` (between `START` and `END`; appended when
    missing, the file created) with this run's tables, its command, date and machine."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        print_table(table)
    command = "python -m bench.grounding " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the end"
    )
    body = [
        START,
        "## Grounding",
        "",
        f"`{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} ({machine}).",
        "",
        "```",
        buffer.getvalue().rstrip(),
        "```",
    ]
    for title, text in sections:
        body += ["", f"**{title}**", "", "```", text, "```"]
    body.append(END)
    section = "\n".join(body)
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if START in old and END in old:
        head, rest = old.split(START, 1)
        new = head + section + rest.split(END, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new, encoding="utf-8")


def save(path: str, results: dict[tuple[str, str], list[Outcome]]) -> None:
    Path(path).write_text(
        json.dumps({f"{j}|{m}": [asdict(o) for o in rows] for (j, m), rows in results.items()})
    )


async def main_async(args: argparse.Namespace) -> None:
    judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    model_names = [m.strip() for m in args.models.split(",") if m.strip()]
    sets = [name.strip() for name in args.sets.split(",") if name.strip()]
    groups = load_groups(args.split, args.limit, sets)
    results: dict[tuple[str, str], list[Outcome]] = {}
    every_split: dict[tuple[str, str], list[Outcome]] = {}
    # Loaded outcomes of every split: the paraphrase options are fitted on the dev split.
    if args.load:
        for key, rows in json.loads(Path(args.load).read_text()).items():
            judge, _, model = key.partition("|")
            known = {group["id"] for group in all_groups(sets)}
            kept = [Outcome(**row) for row in rows if row["group"] in known]
            if kept:
                results[(judge, model)] = kept
        if args.recheck:
            results = {key: await recheck(key, rows) for key, rows in results.items()}
        if args.fit_split:
            results = {key: refit(key, rows, args.fit_split) for key, rows in results.items()}
        every_split.update(results)
        # Only the chosen split's groups (a file saved with `--split all` holds both).
        wanted = {group["id"] for group in groups}
        results = {
            key: [o for o in rows if o.group in wanted]
            for key, rows in results.items()
            if any(o.group in wanted for o in rows)
        }
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
                results[(judge, name)] = outcomes
                for number, group in enumerate(groups, start=1):
                    variants = args.variants and group["kind"] == "abstractive"
                    outcomes.extend(await run_judge(judge, model, group, variants=variants))
                    print(f"  {judge} {name}: group {number}/{len(groups)}", end="\r", flush=True)
                    if args.save:  # as it goes: a long run stopped early keeps what it judged
                        save(args.save, results)
        print(" " * 60, end="\r")
        print(f"load average after the run: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.save:
        save(args.save, results)
    table = [(j, m, summarize(rows)) for (j, m), rows in results.items()]
    if args.cv:
        table += [
            (f"{j} (CV)", m, summarize(cross_validate(rows)))
            for (j, m), rows in results.items()
            if METHODS.get(j) == "logprobs"
        ]
    print_table(table)
    sections = [
        (
            "Claims grounded at the default threshold (correct; then falsified, per class)",
            format_rows(["judge", "model", "set", "correct", *CLASSES], accepted_rows(results)),
        )
    ]
    checked = next((rows for (j, _), rows in results.items() if j in METHODS), None)
    if checked:
        for name in SETS:
            chosen = [o for o in checked if set_of(o.kind) == name]
            if chosen:
                sections.append(
                    (
                        f"Deterministic findings on the {name} set ({len(chosen)} claims)",
                        format_rows(
                            [
                                "finding",
                                "fired",
                                "precision",
                                "recall (its class)",
                                "recall (all falsified)",
                            ],
                            finding_rows(chosen),
                        ),
                    )
                )
    for (judge, model), rows in results.items():
        abstract = [o for o in rows if set_of(o.kind) == "abstractive"]
        if abstract:
            sections.append(
                (
                    f"Abstractive set, {judge} {model}",
                    f"claim AUROC {auroc([o.supported for o in abstract], [o.score for o in abstract]):.3f}, "
                    f"summary AUROC (mean claim score) {summary_auroc(abstract):.3f}",
                )
            )
        variants = variant_rows(every_split.get((judge, model), rows)) if judge == "claim" else []
        if variants:
            sections.append(
                (
                    f"Paraphrase options, {model}: abstractive test groups (calibration fitted on dev)",
                    format_rows(
                        ["option", "claims", "AUROC (score alone)", "AUROC (calibrated)"], variants
                    ),
                )
            )
    if FITTED:
        sections.append(("Calibrations fitted (`--fit-split`)", "\n".join(FITTED)))
    for title, body in sections:
        print(f"\n{title}\n{body}")
    if args.docs:
        write_docs(Path(args.docs), table, sections)
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
        "--sets",
        default=",".join(SETS),
        help="minimal (the minimal pairs), abstractive (paraphrased and hallucinated summaries)",
    )
    parser.add_argument(
        "--variants",
        action="store_true",
        help="on the abstractive set, also score each claim shown every selected passage and "
        "clause by clause, for the table of paraphrase options",
    )
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
    parser.add_argument(
        "--docs",
        nargs="?",
        const=str(DOCS),
        default=None,
        help="write the tables into this Markdown file's grounding section (default "
        "docs/benchmarks.md)",
    )
    parser.add_argument("--load", help="read outcomes saved by --save instead of running judges")
    parser.add_argument(
        "--fit-split",
        choices=("dev", "test"),
        help="with --load: score the claim judges by a calibration fitted on this split's "
        "groups alone (report the other split: held out)",
    )
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
