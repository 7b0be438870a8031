"""The grounding benchmark's report: findings' precision and recall, claims grounded per class,
and the docs section it replaces rather than appends to."""

from __future__ import annotations

from pathlib import Path

from bench.grounding import Outcome, accepted_rows, finding_rows, summary_auroc, write_docs
from bench.grounding_data import abstractive


def outcome(group: str, label: str, supported: bool, score: float, **fired: float) -> Outcome:
    return Outcome(
        group=group,
        kind="abstractive",
        label_class=label,
        supported=supported,
        score=score,
        grounded=score >= 0.5,
        seconds=0.0,
        features={"coverage": 1.0, **fired},
    )


def test_findings_report_precision_and_recall_of_their_class() -> None:
    rows = [
        outcome("a", "negation", False, 0.1, negation=1.0),
        outcome("a", "negation", False, 0.9),
        outcome("a", "paraphrase", True, 0.8, negation=1.0),
        outcome("a", "circumstance", False, 0.2, numbers=1.0),
    ]
    table = {row[0]: row for row in finding_rows(rows)}
    assert table["negation"][1:4] == ["2", "0.500", "0.500"]
    assert table["numbers"][1:4] == ["1", "1.000", "1.000"]
    assert table["any veto"][1:3] == ["1", "1.000"]
    (grounded,) = accepted_rows({("claim", "m"): rows})
    assert grounded[:4] == ["claim", "m", "abstractive", "1/1"]
    assert grounded[4 + 2] == "0/1"  # circumstance
    assert grounded[4 + 3] == "1/2"  # negation: the one without a finding passed


def test_summary_auroc_compares_mean_scores_of_whole_summaries() -> None:
    rows = [
        outcome("a", "paraphrase", True, 0.9),
        outcome("a", "paraphrase", True, 0.3),
        outcome("a", "predicate", False, 0.5),
        outcome("b", "paraphrase", True, 0.7),
        outcome("b", "roles", False, 0.8),
    ]
    assert summary_auroc(rows) == 0.5  # a: 0.6 > 0.5; b: 0.7 < 0.8; across: 0.6 < 0.8, 0.7 > 0.5


def test_the_docs_section_is_replaced_not_appended(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text("# Benchmarks\n\nintro\n", encoding="utf-8")
    write_docs(docs, [], [("First", "one")])
    write_docs(docs, [], [("Second", "two")])
    text = docs.read_text(encoding="utf-8")
    assert text.count("<!-- bench:grounding:start -->") == 1 and "intro" in text
    assert "Second" in text and "First" not in text and "python -m bench.grounding" in text


def test_the_abstractive_set_has_both_labels_and_documents_on_file() -> None:
    groups = abstractive.groups()
    assert {g["split"] for g in groups} == {"dev", "test"}
    for group in groups:
        labels = {c["supported"] for c in group["claims"]}
        assert labels == {True, False}, group["id"]
        assert all(item["output"].strip() for item in group["evidence"])
