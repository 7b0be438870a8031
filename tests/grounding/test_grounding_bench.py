"""The grounding benchmark's data and arithmetic: labels that check out, a reproducible build,
AUROC and the calibration fit."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import bench.grounding as bench_grounding
from bench.grounding import (
    Outcome,
    auroc,
    cross_validate,
    fit,
    load_groups,
    recheck,
    summarize,
)
from bench.grounding_data.build import (
    APACHE,
    ITEMS,
    SUPPORTED,
    UNSUPPORTED,
    evidence_text,
    fold,
)
from sleuth.agent.state import EvidenceItem
from sleuth.grounding import calibration_for, ground_claims

ROOT = Path(__file__).resolve().parents[2]


def test_every_group_has_both_labels_and_checkable_claims() -> None:
    data = json.loads(ITEMS.read_text(encoding="utf-8"))
    kinds = {g["kind"] for g in data["groups"]}
    assert kinds == {"python-docs", "debian-changelog", "apache-licence"}
    for kind in kinds:
        assert {g["split"] for g in data["groups"] if g["kind"] == kind} == {"dev", "test"}
    for group in data["groups"]:
        labels = {c["class"] for c in group["claims"]}
        assert labels & set(SUPPORTED) and labels & set(UNSUPPORTED), group["id"]
        assert group["licence"] and group["source"]
        seen = fold(evidence_text(group["evidence"]))
        for claim in group["claims"]:
            assert claim["supported"] == (claim["class"] in SUPPORTED)
            in_evidence = fold(claim["text"]).rstrip(".") in seen
            if claim["class"] == "verbatim":
                assert in_evidence, claim["text"]
            if not claim["supported"]:
                assert not in_evidence, claim["text"]
    classes = {c["class"] for g in data["groups"] for c in g["claims"]}
    assert classes == set(SUPPORTED) | set(UNSUPPORTED)


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11) or not APACHE.is_file(),
    reason="the sources are Python 3.11's pydoc_data and Debian 12's documentation files",
)
def test_the_items_are_rebuilt_identically_from_their_sources() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.grounding_data.build", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_load_groups_interleaves_kinds_so_a_limit_covers_each() -> None:
    groups = load_groups("test", 3)
    assert len({g["kind"] for g in groups}) == 3 and all(g["split"] == "test" for g in groups)


def test_auroc_counts_ties_as_half() -> None:
    assert auroc([True, False], [0.9, 0.1]) == 1.0
    assert auroc([True, False], [0.1, 0.9]) == 0.0
    assert auroc([True, True, False, False], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert auroc([True, False, False], [0.6, 0.6, 0.2]) == 0.75


def outcome(label_class: str, score: float, grounded: bool, **features: float) -> Outcome:
    return Outcome(
        group="g",
        kind="k",
        label_class=label_class,
        supported=label_class in SUPPORTED,
        score=score,
        grounded=grounded,
        seconds=1.0,
        model_score=score,
        features={"coverage": 1.0, **features},
    )


def test_summarize_reports_auroc_per_error_class_against_the_supported_claims() -> None:
    rows = [
        outcome("verbatim", 0.9, True),
        outcome("paraphrase", 0.7, True),
        outcome("negation", 0.2, False),
        outcome("entity", 0.8, True),
    ]
    summary = summarize(rows)
    assert summary["negation"] == 1.0 and summary["entity"] == 0.5
    assert summary["accuracy"] == 0.75 and summary["claims"] == 4


def test_fit_learns_that_a_check_marks_unsupported_claims() -> None:
    rows = [outcome("verbatim", 0.6, True) for _ in range(20)]
    rows += [outcome("circumstance", 0.6, True, numbers=1.0) for _ in range(20)]
    bias, weights, threshold = fit(rows)
    assert weights["numbers"] < -2 and bias > 0
    assert 0.05 <= threshold <= 0.95


def test_cross_validation_scores_each_group_by_a_fit_that_never_saw_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = []
    for number in range(12):
        # The `numbers` check fires on the unsupported claim of every group but group 0, where
        # it fires on the supported one.
        for supported in (True, False):
            row = outcome("verbatim" if supported else "circumstance", 0.6, supported)
            fired = (not supported) if number else supported
            row.features["numbers"] = 1.0 if fired else 0.0
            rows.append(replace(row, group=f"g{number}"))
    fitted_on: list[set[str]] = []
    real_fit = bench_grounding.fit

    def recording_fit(outcomes: list[Outcome]) -> tuple[float, dict[str, float], float]:
        fitted_on.append({o.group for o in outcomes})
        return real_fit(outcomes)

    monkeypatch.setattr(bench_grounding, "fit", recording_fit)
    scored = cross_validate(rows, folds=4)
    assert sorted((o.group, o.supported) for o in scored) == sorted(
        (o.group, o.supported) for o in rows
    )
    assert len(fitted_on) == 4
    for groups in fitted_on:
        assert len(groups) == 9, "each fit leaves one fold of three groups out"
    held_out = [set(f"g{n}" for n in range(12)) - groups for groups in fitted_on]
    assert set().union(*held_out) == {f"g{n}" for n in range(12)}
    # Group 0 contradicts the fits that score it: both its claims come out wrong.
    group0 = [o for o in scored if o.group == "g0"]
    assert all(o.grounded != o.supported for o in group0)
    assert summarize(scored)["accuracy"] == pytest.approx(22 / 24)
    with pytest.raises(ValueError, match="at least 5 groups"):
        cross_validate(rows[:4])


async def test_recheck_recombines_saved_model_scores_with_todays_checks() -> None:
    group = load_groups("dev", 1)[0]
    stale = [
        Outcome(group["id"], group["kind"], c["class"], c["supported"], 0.5, True, 1.0, 0.9, {})
        for c in group["claims"]
    ]
    rescored = await recheck(("claim", "qwen2.5-coder-1.5b"), stale)
    evidence = [EvidenceItem.model_validate(item) for item in group["evidence"]]
    fresh = await ground_claims([c["text"] for c in group["claims"]], evidence, None)
    calibration = calibration_for("local:qwen2.5-coder-1.5b", "logprobs")
    for outcome, verdict in zip(rescored, fresh.claims, strict=True):
        assert outcome.features == verdict.features and outcome.model_score == 0.9
        assert outcome.score == pytest.approx(calibration.combine(0.9, verdict.features))
        assert outcome.grounded == (outcome.score >= calibration.threshold)
    assert len({o.score for o in rescored}) > 1, "the checks tell the claims apart"
    # A judge without checks is kept as saved.
    assert await recheck(("lexical", "-"), stale) is stale
