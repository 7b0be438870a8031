"""A finished run's `ResearchReport` as a file to keep and share: Markdown, HTML or JSON.

Every format holds the same sections, built once by `report_view` from the report: the question;
the answer with numbered citations; each claim with its verdict, score and quoted span; the
coverage of each part of the question ("not in the sources" where that is the answer); the
claims taken out as unsupported; the numbered sources; the run's counters (grounding, replans,
regenerations, tokens, cost); and the workflow id and Web UI link when the caller knows them.

The HTML is one self-contained file (inline CSS and SVG, no script, nothing fetched), readable
offline, printable and dark-mode aware; Jinja2 renders it with autoescaping on. Each section is
its own small function, so a new field of the report is one more function.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from sleuth.usage.pricing import usd

if TYPE_CHECKING:
    from sleuth.research.report import ResearchReport

ReportFormat = Literal["markdown", "html", "json"]
FORMATS: dict[str, ReportFormat] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".json": "json",
}
"""File extensions and the format each one means."""
NOT_IN_SOURCES = "not in the sources"

_MARK = re.compile(r"\[\s*(\d+(?:\s*[,;\-–]\s*\d+)*)\s*\]")
_CHART_WIDTH, _CHART_HEIGHT, _CHART_PAD = 320, 120, 18


def format_for(filename: str) -> ReportFormat:
    """The format a file name's extension asks for; ValueError naming the accepted ones."""
    lowered = filename.lower()
    for extension, name in FORMATS.items():
        if lowered.endswith(extension):
            return name
    raise ValueError(
        f"cannot tell the report format of {filename!r}: end the file name with "
        + ", ".join(FORMATS)
    )


def render(
    report: ResearchReport,
    fmt: ReportFormat,
    *,
    workflow_id: str | None = None,
    web_ui: str | None = None,
) -> str:
    """`report` in `fmt` (`markdown`, `html` or `json`)."""
    renderers: dict[str, Callable[..., str]] = {
        "markdown": to_markdown,
        "html": to_html,
        "json": to_json,
    }
    if fmt not in renderers:
        raise ValueError(f"unknown report format {fmt!r}; use one of: {', '.join(renderers)}")
    return renderers[fmt](report, workflow_id=workflow_id, web_ui=web_ui)


# -- the view: every section as plain data ----------------------------------------------------------


def report_view(
    report: ResearchReport, *, workflow_id: str | None = None, web_ui: str | None = None
) -> dict[str, Any]:
    """Every section of the report as plain JSON data, in the order the formats show them."""
    if web_ui is not None and not web_ui.startswith(("http://", "https://")):
        raise ValueError(f"the Web UI link must be an http(s) URL, not {web_ui!r}")
    numbers = source_numbers(report)
    view: dict[str, Any] = {
        "question": report.prompt,
        "status": report.status,
        "answer": _answer(report, numbers),
        "parts": _parts(report),
        "claims": _claims(report, numbers),
        "coverage": _coverage(report),
        "removed_claims": list(report.removed_claims),
        "sources": [{"number": n, "reference": ref} for ref, n in numbers.items()],
        "run": _run(report),
        "workflow_id": workflow_id,
        "web_ui": web_ui,
    }
    if report.structured_output is not None:
        view["structured_output"] = report.model_dump(mode="json", include={"structured_output"})[
            "structured_output"
        ]
    return view


def source_numbers(report: ResearchReport) -> dict[str, int]:
    """Each source the report cites and its number: first those the answer's `[n]` marks cite,
    in order, then those the grounded claims cite."""
    ordered: list[str] = []
    for number in _marked_numbers(report.summary):
        if 1 <= number <= len(report.passage_references):
            reference = report.passage_references[number - 1]
            if reference not in ordered:
                ordered.append(reference)
    for reference in report.sources:
        if reference not in ordered:
            ordered.append(reference)
    return {reference: n for n, reference in enumerate(ordered, start=1)}


def _marked_numbers(text: str) -> list[int]:
    found: list[int] = []
    for match in _MARK.finditer(text):
        found += _mark_numbers(match.group(1))
    return found


def _mark_numbers(inside: str) -> list[int]:
    """The numbers of one mark's inside: `2`, `1, 3`, `4-6` (a range of at most 50)."""
    numbers: list[int] = []
    for part in re.split(r"\s*[,;]\s*", inside.strip()):
        bounds = re.split(r"\s*[\-–]\s*", part)
        if len(bounds) == 1 and part.isdigit():
            numbers.append(int(part))
        elif len(bounds) == 2 and all(bound.isdigit() for bound in bounds):
            low, high = int(bounds[0]), int(bounds[1])
            if low <= high <= low + 50:
                numbers += range(low, high + 1)
    return numbers


def _answer(report: ResearchReport, numbers: dict[str, int]) -> dict[str, Any]:
    """The answer's text with its `[n]` marks renumbered to the source list, and the numbers it
    cites (when the writer put no marks in, the grounded claims' sources)."""

    def renumber(match: re.Match[str]) -> str:
        cited = []
        for number in _mark_numbers(match.group(1)):
            if 1 <= number <= len(report.passage_references):
                ours = numbers.get(report.passage_references[number - 1])
                if ours is not None and ours not in cited:
                    cited.append(ours)
        return "[" + ", ".join(str(n) for n in sorted(cited)) + "]" if cited else ""

    text = _MARK.sub(renumber, report.summary).strip()
    cited = sorted(set(_marked_numbers(text)))
    if not cited:
        cited = sorted(
            {
                numbers[c.reference]
                for claim in report.claims
                if claim.grounded
                for c in claim.citations
                if c.reference in numbers
            }
        )
    return {"text": text, "cited": cited}


def _claims(report: ResearchReport, numbers: dict[str, int]) -> list[dict[str, Any]]:
    return [
        {
            "claim": claim.claim,
            "verdict": "grounded" if claim.grounded else "not supported",
            "score": round(claim.score, 4),
            "rationale": claim.rationale,
            "quotes": [
                {
                    "source": numbers.get(citation.reference),
                    "reference": citation.reference,
                    "evidence": citation.evidence,
                    "quote": " ".join(citation.quote.split()),
                }
                for citation in claim.citations
            ],
        }
        for claim in report.claims
    ]


def _coverage(report: ResearchReport) -> list[dict[str, Any]]:
    """Each sub-question of the plan: `answered`, `found, not answered` or `not in the sources`."""
    entries = []
    for entry in report.coverage:
        if not entry.covered:
            state = NOT_IN_SOURCES
        elif entry.answered is False:
            state = "found, but the report does not answer it"
        else:
            state = "answered" if entry.answered else "found"
        entries.append(
            {
                "question": entry.question,
                "state": state,
                "evidence": list(entry.evidence),
                "passages": [
                    {
                        "evidence": passage.evidence,
                        "reference": (
                            f"{passage.source}#{passage.location}"
                            if passage.location
                            else passage.source
                        ),
                        "text": " ".join(passage.text.split()),
                    }
                    for passage in entry.passages
                ],
            }
        )
    return entries


def _parts(report: ResearchReport) -> list[dict[str, Any]]:
    """The question's own parts with what the report says of each."""
    return [
        {
            "text": part.text,
            "state": NOT_IN_SOURCES if part.state == "not_stated" else part.state,
            "statement": part.statement,
            "claims": list(part.claims),
        }
        for part in report.parts
    ]


def _run(report: ResearchReport) -> dict[str, Any]:
    return {
        "grounding_score": report.grounding_score,
        "grounding_threshold": report.grounding_threshold,
        "grounding_method": report.grounding_method,
        "grounding_judge": report.grounding_judge,
        "claim_threshold": report.claim_threshold,
        "score_history": list(report.score_history),
        "replans": report.replan_count,
        "regenerations": report.regeneration_count,
        "revisions": report.revision_count,
        "evidence_items": report.evidence_count,
        "end_reason": report.end_reason,
        "input_tokens": report.usage.input_tokens,
        "output_tokens": report.usage.output_tokens,
        "total_tokens": report.usage.total_tokens,
        "cost_usd": report.cost_usd,
        "cost": usd(report.cost_usd),
        "max_cost_usd": report.max_cost_usd,
        "reviews": [
            {"review_id": r.review_id, "decision": r.decision, "remark": r.remark}
            for r in report.reviews
        ],
    }


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def score_chart(history: list[float], threshold: float) -> dict[str, Any] | None:
    """The grounding score per evaluation as SVG coordinates (None without an evaluation)."""
    if not history:
        return None
    inner_w = _CHART_WIDTH - 2 * _CHART_PAD
    inner_h = _CHART_HEIGHT - 2 * _CHART_PAD
    step = inner_w / max(1, len(history) - 1)

    def y(score: float) -> float:
        return round(_CHART_PAD + (1 - min(1.0, max(0.0, score))) * inner_h, 1)

    points = [
        {
            "x": round(_CHART_PAD + (i * step if len(history) > 1 else inner_w / 2), 1),
            "y": y(score),
            "label": f"evaluation {i + 1}: {score:.0%}",
        }
        for i, score in enumerate(history)
    ]
    return {
        "width": _CHART_WIDTH,
        "height": _CHART_HEIGHT,
        "pad": _CHART_PAD,
        "points": points,
        "polyline": " ".join(f"{p['x']},{p['y']}" for p in points),
        "threshold_y": y(threshold),
        "threshold": f"{threshold:.0%}",
    }


# -- JSON -----------------------------------------------------------------------------------------


def to_json(
    report: ResearchReport, *, workflow_id: str | None = None, web_ui: str | None = None
) -> str:
    """The report's sections as indented JSON (`report_view`)."""
    view = report_view(report, workflow_id=workflow_id, web_ui=web_ui)
    return json.dumps(view, indent=2, ensure_ascii=False) + "\n"


# -- Markdown -------------------------------------------------------------------------------------


def to_markdown(
    report: ResearchReport, *, workflow_id: str | None = None, web_ui: str | None = None
) -> str:
    """The report as Markdown. Text from the run is escaped, so a claim holding HTML or
    Markdown syntax reads as written and runs nothing in a viewer."""
    view = report_view(report, workflow_id=workflow_id, web_ui=web_ui)
    sections = [
        _md_question(view),
        _md_answer(view),
        _md_parts(view),
        _md_claims(view),
        _md_coverage(view),
        _md_removed(view),
        _md_sources(view),
        _md_structured(view),
        _md_run(view),
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def md_escape(text: str) -> str:
    """`text` safe inside Markdown prose: HTML characters as entities, markup characters escaped."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]])", r"\\\1", " ".join(text.split()))


def _md_question(view: dict[str, Any]) -> str:
    status = f"\n\n**Status:** {md_escape(view['status'])}" if view["status"] else ""
    return f"# Research report\n\n**Question:** {md_escape(view['question'])}{status}"


def _md_answer(view: dict[str, Any]) -> str:
    answer = view["answer"]
    # The renumbered marks are ours: keep their brackets unescaped.
    text = re.sub(r"\\\[([\d, ]+)\\\]", r"[\1]", md_escape(answer["text"])) or "(no answer)"
    cited = ", ".join(f"[{n}]" for n in answer["cited"])
    tail = f"\n\nCites: {cited}" if cited and not _MARK.search(answer["text"]) else ""
    return f"## Answer\n\n{text}{tail}"


def _md_parts(view: dict[str, Any]) -> str:
    if not view["parts"]:
        return ""
    lines = ["## Parts of the question", ""]
    for number, part in enumerate(view["parts"], start=1):
        lines.append(f"{number}. {md_escape(part['text'])} — **{md_escape(part['state'])}**")
        if part["statement"]:
            lines.append(f"   {md_escape(part['statement'])}")
    return "\n".join(lines)


def _md_claims(view: dict[str, Any]) -> str:
    if not view["claims"]:
        return "## Claims\n\n(no claims)"
    lines = ["## Claims", ""]
    for number, claim in enumerate(view["claims"], start=1):
        mark = "✓" if claim["verdict"] == "grounded" else "✗"
        lines.append(
            f"{number}. {mark} **{claim['verdict']}** (score {claim['score']:.2f}): "
            f"{md_escape(claim['claim'])}"
        )
        if claim["verdict"] != "grounded" and claim["rationale"]:
            lines.append(f"   - why: {md_escape(claim['rationale'])}")
        for quote in claim["quotes"]:
            where = f"[{quote['source']}]" if quote["source"] else md_escape(quote["reference"])
            label = "quote" if claim["verdict"] == "grounded" else "closest"
            lines.append(f"   - {label} {where}: “{md_escape(quote['quote'])}”")
    return "\n".join(lines)


def _md_coverage(view: dict[str, Any]) -> str:
    if not view["coverage"]:
        return ""
    lines = ["## Coverage", ""]
    for number, entry in enumerate(view["coverage"], start=1):
        lines.append(f"{number}. {md_escape(entry['question'])} — **{entry['state']}**")
        for passage in entry["passages"]:
            lines.append(
                f"   - [evidence {passage['evidence']}] {md_escape(passage['reference'])}: "
                f"{md_escape(passage['text'])}"
            )
    return "\n".join(lines)


def _md_removed(view: dict[str, Any]) -> str:
    removed = view["removed_claims"] or []
    body = "\n".join(f"- {md_escape(claim)}" for claim in removed) or "(none)"
    return f"## Removed as unsupported\n\n{body}"


def _md_sources(view: dict[str, Any]) -> str:
    body = "\n".join(
        f"{source['number']}. {md_escape(source['reference'])}" for source in view["sources"]
    )
    return f"## Sources\n\n{body or '(none cited)'}"


def _md_structured(view: dict[str, Any]) -> str:
    if "structured_output" not in view:
        return ""
    data = json.dumps(view["structured_output"], indent=2, ensure_ascii=False)
    return f"## Structured output\n\n```json\n{data.replace('```', '` ` `')}\n```"


def _md_run(view: dict[str, Any]) -> str:
    run = view["run"]
    scores = ", ".join(f"{score:.0%}" for score in run["score_history"]) or "none"
    lines = [
        "## Run",
        "",
        f"- Grounding: {_percent(run['grounding_score'])} of claims grounded "
        f"(needed {_percent(run['grounding_threshold'])}; method {run['grounding_method']}"
        + (f", judge {md_escape(run['grounding_judge'])}" if run["grounding_judge"] else "")
        + ")",
        f"- Score per evaluation: {scores}",
        f"- Replans: {run['replans']}",
        f"- Regenerations: {run['regenerations']}",
        f"- Evidence items: {run['evidence_items']}",
        f"- Ended: {run['end_reason']}",
        f"- Tokens: {run['total_tokens']:,} ({run['input_tokens']:,} in, "
        f"{run['output_tokens']:,} out)",
        f"- Cost: {run['cost']}"
        + (f" (budget {usd(run['max_cost_usd'])})" if run["max_cost_usd"] is not None else ""),
    ]
    lines += [
        f"- Review {md_escape(r['review_id'])}: {r['decision']}"
        + (f" ({md_escape(r['remark'])})" if r["remark"] else "")
        for r in run["reviews"]
    ]
    if view["workflow_id"]:
        lines.append(f"- Workflow: `{view['workflow_id'].replace('`', '')}`")
    if view["web_ui"]:
        lines.append(f"- Web UI: <{view['web_ui'].replace('>', '%3E')}>")
    return "\n".join(lines)


# -- HTML -----------------------------------------------------------------------------------------


@cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("sleuth.research", "templates"),
        autoescape=select_autoescape(["html", "j2"], default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["percent"] = _percent
    return environment


def to_html(
    report: ResearchReport,
    *,
    workflow_id: str | None = None,
    web_ui: str | None = None,
) -> str:
    """The report as one self-contained HTML page (see the module docstring)."""
    return render_html_fragment(report, workflow_id=workflow_id, web_ui=web_ui, standalone=True)


def render_html_fragment(
    report: ResearchReport,
    *,
    workflow_id: str | None = None,
    web_ui: str | None = None,
    standalone: bool = False,
) -> str:
    """The report's HTML: a whole page when `standalone`, else the `<article>` alone with its
    `<style>`, for a page that embeds it (`sleuth serve`'s run page)."""
    view = report_view(report, workflow_id=workflow_id, web_ui=web_ui)
    chart = score_chart(view["run"]["score_history"], view["run"]["grounding_threshold"])
    template = _environment().get_template("report.html.j2")
    return template.render(view=view, chart=chart, standalone=standalone, answer_html=_answer_html)


def _answer_html(text: str, cited: list[int]) -> Markup:
    """The answer's text escaped, its `[n]` marks as links to the numbered sources (and, when
    the writer put no marks in, the sources its grounded claims cite after it)."""
    html = _MARK.sub(lambda match: _source_links(_mark_numbers(match.group(1))), str(escape(text)))
    if cited and not _MARK.search(text):
        html += f' <span class="cites">{_source_links(cited)}</span>'
    return Markup(html)


def _source_links(numbers: list[int]) -> str:
    return "[" + ", ".join(f'<a href="#source-{n}">{n}</a>' for n in numbers) + "]"


# -- files ----------------------------------------------------------------------------------------


def write_report(
    report: ResearchReport,
    path: str | os.PathLike[str],
    *,
    workflow_id: str | None = None,
    web_ui: str | None = None,
) -> bool:
    """Write `report` to `path` in the format its extension names (`.md`, `.html`, `.json`).

    The file appears whole or not at all (written beside it, then renamed over it), so a reader
    never sees half a report and a failed write keeps the previous file. Returns whether a file
    was already there (and is now replaced)."""
    target = Path(path)
    text = render(report, format_for(target.name), workflow_id=workflow_id, web_ui=web_ui)
    if target.is_dir():
        raise IsADirectoryError(
            f"{target} is a folder: name the report file, e.g. {target}/report.html"
        )
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{target.parent} does not exist: create the folder first")
    existed = target.exists()
    # mkstemp makes the file 0600; the report gets the mode a plain write would have given it.
    mode = target.stat().st_mode & 0o777 if existed else 0o666 & ~_umask()
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return existed


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
