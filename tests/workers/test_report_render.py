"""Reports you can share: one scripted run's report as Markdown, HTML and JSON, each holding
every part; the HTML self-contained, escaped, and rendered by headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sleuth import create_research_workflow
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall
from sleuth.research import ClaimRecord, ResearchReport, node_of_request
from sleuth.research.render import format_for, report_view, write_report
from tests.helpers.browser import CHROMIUM, open_page
from tests.helpers.research_scripts import (
    FACT,
    REWORDED,
    ResearchScript,
    judge_answer,
    lookup,
    scripted_model,
)

QUESTION = "How fast did the CRM market grow, and which penguin colonies buy CRM seats?"
MISSING_PART = "Which penguin colonies buy CRM seats in Antarctica?"
UNSUPPORTED = "Penguins buy most CRM seats."
WORKFLOW_ID = "research-demo-0123456789ab"
WEB_UI = "http://localhost:8233/namespaces/default/workflows/research-demo-0123456789ab"
HOSTILE = '<script>alert("owned")</script><img src=x onerror=alert(1)>'


class PenguinDoubter(ResearchScript):
    """The judge rejects every claim about penguins, and follows `verdicts` for the rest."""

    def __call__(self, call: ModelCall) -> ModelResponse:
        asked = call.messages[-1].content or ""
        if node_of_request(call.messages) not in NODES_THAT_WRITE and "Penguins" in asked:
            self.seen.append("judge")
            return judge_answer(False)
        return super().__call__(call)


NODES_THAT_WRITE = {"execute", "causal_inference", "summarize", "regenerate", "replan", "plan"}


@pytest.fixture(scope="module")
async def report() -> ResearchReport:
    """A scripted run that regenerates, replans, removes a claim and leaves one part of the
    question without evidence."""
    script = PenguinDoubter(
        verdicts=[False, True],
        summary=f"{FACT} {UNSUPPORTED}",
        rewrite=f"{REWORDED} {UNSUPPORTED}",
        sub_questions=["How fast did the CRM market grow?", MISSING_PART],
    )
    spec = create_research_workflow(
        model=scripted_model(script), tools=[lookup], max_replans=1, max_regenerations=2
    )
    result = await spec.execute(QUESTION)
    assert result.report is result.final_state
    made = result.report
    assert made.removed_claims == [UNSUPPORTED] and len(made.score_history) >= 2
    assert made.replan_count and made.regeneration_count
    return made


def every_part(report: ResearchReport, counter: str = "{}: {}") -> list[str]:
    """What each format must show, as text a reader sees (`counter` lays out a name and value)."""
    [claim] = report.claims
    return [
        QUESTION,
        FACT,  # the answer, and the claim's quoted span
        "[1]",  # a numbered citation
        "grounded",
        f"{claim.score:.2f}",
        MISSING_PART,
        "not in the sources",
        UNSUPPORTED,
        report.sources[0],
        counter.format("Replans", report.replan_count),
        counter.format("Regenerations", report.regeneration_count),
        f"{report.usage.total_tokens:,}",
        "$0",
        WORKFLOW_ID,
        WEB_UI,
    ]


def test_markdown_holds_every_part(report: ResearchReport) -> None:
    text = report.to_markdown(workflow_id=WORKFLOW_ID, web_ui=WEB_UI)
    for part in every_part(report):
        assert part in text.replace("\\#", "#"), f"{part!r} missing from:\n{text}"
    assert "## Coverage" in text and f"{MISSING_PART} — **not in the sources**" in text
    assert f"1. {report.sources[0]}" in text  # sources are numbered
    scores = ", ".join(f"{s:.0%}" for s in report.score_history)
    assert f"Score per evaluation: {scores}" in text


def test_json_holds_every_part(report: ResearchReport) -> None:
    data = json.loads(report.to_json(workflow_id=WORKFLOW_ID, web_ui=WEB_UI))
    assert data["question"] == QUESTION
    assert data["answer"]["text"] == report.summary and data["answer"]["cited"] == [1]
    assert report.claims[0].claim in data["answer"]["text"] and UNSUPPORTED not in report.summary
    [claim] = data["claims"]
    assert claim["verdict"] == "grounded" and claim["score"] == round(report.claims[0].score, 4)
    assert claim["quotes"][0]["quote"] == FACT and claim["quotes"][0]["source"] == 1
    assert [(c["question"], c["state"]) for c in data["coverage"]] == [
        ("How fast did the CRM market grow?", "answered"),
        (MISSING_PART, "not in the sources"),
    ]
    assert data["removed_claims"] == [UNSUPPORTED]
    assert data["sources"] == [{"number": 1, "reference": report.sources[0]}]
    run = data["run"]
    assert run["score_history"] == report.score_history
    assert (run["replans"], run["regenerations"]) == (
        report.replan_count,
        report.regeneration_count,
    )
    assert run["total_tokens"] == report.usage.total_tokens and run["cost_usd"] == 0.0
    assert (data["workflow_id"], data["web_ui"]) == (WORKFLOW_ID, WEB_UI)
    assert data["status"] == report.status == "partial"
    assert [(p["text"], p["state"]) for p in data["parts"]] == [
        ("How fast did the CRM market grow?", "answered"),
        ("Which penguin colonies buy CRM seats?", "not in the sources"),
    ]


def test_the_answers_marks_are_renumbered_to_the_source_list(report: ResearchReport) -> None:
    cited = report.model_copy(
        update={
            "summary": "Growth was 12 percent [2]. Gartner said so [1, 2].",
            "passage_references": ["other.pdf#chars 0-9", report.sources[0]],
        }
    )
    view = report_view(cited)
    # [2] is the report's first source: it becomes [1]; the answer's sources come first.
    assert view["answer"]["text"] == "Growth was 12 percent [1]. Gartner said so [1, 2]."
    assert [s["reference"] for s in view["sources"]] == [report.sources[0], "other.pdf#chars 0-9"]
    html = cited.to_html()
    assert '[<a href="#source-1">1</a>, <a href="#source-2">2</a>]' in html
    assert '<li id="source-2">other.pdf#chars 0-9</li>' in html


def test_html_holds_every_part_and_loads_nothing(report: ResearchReport) -> None:
    html = report.to_html(workflow_id=WORKFLOW_ID, web_ui=WEB_UI)
    for part in every_part(report, "<td>{}</td><td>{}</td>"):
        assert part in html, f"{part!r} missing"
    assert html.startswith("<!DOCTYPE html>") and "prefers-color-scheme: dark" in html
    assert "@media print" in html
    # One file: no script, stylesheet, image, frame, font or import from anywhere.
    for resource in ("<script", "<link", "<img", "<iframe", "<object", "<embed", "@import", "url("):
        assert resource not in html, resource
    tags_with_urls = re.findall(
        r"<(\w+)[^>]*\b(?:src|href|srcset|action|data|poster)=\"https?://", html
    )
    assert set(tags_with_urls) <= {"a"}, tags_with_urls
    # The chart has one point per grounding eval; each claim's quote expands (and shows on hover).
    assert html.count("<circle") == len(report.score_history)
    assert f'title="{FACT}"' in html and "<details>" in html


def test_hostile_text_is_escaped_in_every_format(report: ResearchReport) -> None:
    hostile = report.model_copy(
        update={
            "prompt": HOSTILE,
            "claims": [
                *report.claims,
                ClaimRecord(claim=HOSTILE, score=0.1, grounded=False, rationale=HOSTILE),
            ],
            "removed_claims": [HOSTILE],
        }
    )
    html = hostile.to_html(workflow_id=WORKFLOW_ID)
    assert "<script" not in html and "<img" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;" in html
    markdown = hostile.to_markdown()
    assert "<script" not in markdown and "&lt;script&gt;" in markdown
    assert json.loads(hostile.to_json())["removed_claims"] == [HOSTILE]  # data stays as written
    with pytest.raises(ValueError, match="must be an http"):
        hostile.to_html(web_ui="javascript:alert(1)")


def test_a_report_file_is_written_whole_in_the_format_its_name_says(
    report: ResearchReport, tmp_path: Path
) -> None:
    assert [format_for(n) for n in ("r.md", "R.HTML", "r.json")] == ["markdown", "html", "json"]
    with pytest.raises(ValueError, match=r"end the file name with \.md, .*\.html, .*\.json"):
        format_for("report.pdf")
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "report.html"
    assert write_report(report, target, workflow_id=WORKFLOW_ID) is False
    assert target.read_text().startswith("<!DOCTYPE html>")
    target.chmod(0o640)
    assert write_report(report, target) is True  # replaced, and says so
    assert target.stat().st_mode & 0o777 == 0o640
    with pytest.raises(ValueError):
        write_report(report, folder / "report.txt")
    with pytest.raises(FileNotFoundError, match="create the folder"):
        write_report(report, folder / "no" / "report.md")
    assert sorted(p.name for p in folder.iterdir()) == ["report.html"]  # no temporary left


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
async def test_the_html_file_renders_offline_in_chromium(
    report: ResearchReport, tmp_path: Path
) -> None:
    target = tmp_path / "report.html"
    write_report(report, target, workflow_id=WORKFLOW_ID, web_ui=WEB_UI)
    async with open_page(target.as_uri()) as page:
        text = await page.wait_for_text("not in the sources")
        for part in (QUESTION, UNSUPPORTED, "✓ grounded", f"Replans\t{report.replan_count}"):
            assert part in text, part
        points = await page.call(
            "Runtime.evaluate", expression="document.querySelectorAll('svg.chart circle').length"
        )
        assert points["result"]["value"] == len(report.score_history)
        # A claim's quote is folded away until the reader expands it.
        quote_shown = "document.querySelector('#claims details blockquote').checkVisibility()"
        folded = await page.call("Runtime.evaluate", expression=quote_shown)
        assert folded["result"]["value"] is False
        opened = await page.call(
            "Runtime.evaluate",
            expression=f"document.querySelector('#claims details').open = true; {quote_shown}",
        )
        assert opened["result"]["value"] is True
