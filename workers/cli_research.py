"""`sleuth research "prompt"`: start a `ResearchWorkflow`, follow it node by node, print the report."""

from __future__ import annotations

import argparse
import json
import re
import sys
import uuid

from temporalio.client import WorkflowFailureError

from sleuth.activities.errors import unwrap_cause
from sleuth.activities.research_models import ResearchOutcome, ResearchRequest
from sleuth.flows.review import ReviewSettings
from sleuth.research import ResearchReport
from sleuth.runtime.paths import workflow_link
from sleuth.usage.pricing import usd
from sleuth.workers.cli import EXIT_UNGROUNDED
from sleuth.workers.cli_events import showing_steps
from sleuth.workers.cli_report import add_output_argument, check_output, save_report
from sleuth.workers.render import print_report
from sleuth.workers.session import add_session_arguments, open_session, workflow_pollers
from sleuth.workflows.research import ResearchWorkflow

# `sleuth research`'s exit code when the run ended with a report that is not grounded (status
# `partial` or `not_found`); `--allow-ungrounded` makes it 0. A failed run (or an option out of
# bounds) exits 1, a command line that does not parse 2 (every code: cli.EXIT_CODES).


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "research",
        help="run a research config durably and print its report",
        description=(
            "Start a ResearchWorkflow, show its progress node by node and print the report: "
            "summary, findings, sources, grounding score, replans and regenerations. A worker for "
            "the App runs in this process when none serves the task queue. Exits 0 when the "
            "report is grounded, 3 when it is partial or not_found (0 with --allow-ungrounded), "
            "1 when the run failed or an option is out of bounds."
        ),
    )
    parser.add_argument("prompt", help="the research question")
    parser.add_argument(
        "--research",
        default="default",
        metavar="NAME",
        help="the research config registered on the App (default: %(default)s)",
    )
    add_session_arguments(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the outcome as JSON (progress goes to stderr)"
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="start the run and exit; a `sleuth worker` must serve the task queue",
    )
    parser.add_argument(
        "--grounding-threshold",
        type=float,
        metavar="SHARE",
        help="share of grounded claims needed, 0..1 (default: the research config's)",
    )
    parser.add_argument(
        "--claim-threshold",
        type=float,
        metavar="SCORE",
        help="score a claim needs to count as grounded, 0..1 (default: the config's, else the "
        "judge's calibrated threshold)",
    )
    parser.add_argument(
        "--max-replans", type=int, metavar="N", help="replans allowed (default: the config's)"
    )
    parser.add_argument(
        "--max-regenerations",
        type=int,
        metavar="N",
        help="regenerations allowed (default: the config's)",
    )
    parser.add_argument(
        "--max-cost-usd",
        type=float,
        metavar="USD",
        help="the run's cost budget at the models' prices (default: the config's)",
    )
    parser.add_argument(
        "--review",
        metavar="POINTS",
        help="pause for a person at these points: plan, summary or plan,summary; answer with "
        "`sleuth review RUN_ID` (default: the config's review policy)",
    )
    parser.add_argument(
        "--no-events",
        action="store_true",
        help="show only the run's steps, not the agents' events (model turns, tool calls) under them",
    )
    parser.add_argument(
        "--allow-ungrounded",
        action="store_true",
        help=f"exit 0 when the report is not grounded (status partial or not_found); without it "
        f"such a run exits {EXIT_UNGROUNDED}",
    )
    add_output_argument(parser)
    parser.set_defaults(func=run_research_command)


async def run_research_command(args: argparse.Namespace) -> int:
    problem = check_output(args.output)
    if problem:
        print(f"sleuth: {problem}", file=sys.stderr)
        return 2
    request = ResearchRequest(
        prompt=args.prompt,
        research=args.research,
        grounding_threshold=args.grounding_threshold,
        claim_threshold=args.claim_threshold,
        max_replans=args.max_replans,
        max_regenerations=args.max_regenerations,
        max_cost_usd=args.max_cost_usd,
        review=_review_settings(args.review),
    )
    workflow_id = f"research-{_slug(args.research)}-{uuid.uuid4().hex[:12]}"
    progress_out = sys.stderr if args.json else sys.stdout
    async with open_session(
        args.app, task_queue=args.task_queue, need_worker=not args.no_wait
    ) as session:
        handle = await session.client.start_workflow(
            ResearchWorkflow.run, request, id=workflow_id, task_queue=session.task_queue
        )
        link = workflow_link(workflow_id)
        print(f"research run {workflow_id} started", file=progress_out)
        print(f"  Web UI: {link}", file=progress_out, flush=True)
        if args.no_wait:
            if await workflow_pollers(session.client, session.task_queue) == 0:
                print(
                    f"note: no worker serves task queue {session.task_queue!r} yet; the run waits "
                    f"until one does: sleuth worker --task-queue {session.task_queue}"
                    + (f" --app {args.app}" if args.app else ""),
                    file=sys.stderr,
                )
            print(f"follow it with: temporal workflow show --workflow-id {workflow_id}")
            return 0
        try:
            async with showing_steps(
                session.client, workflow_id, progress_out, details=not args.no_events
            ) as steps:
                try:
                    outcome = await handle.result()
                except WorkflowFailureError as exc:
                    steps.fail(str(unwrap_cause(exc)))
                    raise
        except WorkflowFailureError as exc:
            print(f"research run {workflow_id} failed: {unwrap_cause(exc)}", file=sys.stderr)
            print(f"  Web UI: {link}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(outcome.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print_report(format_report(outcome, link), sys.stdout)
    if args.output:
        save_report(outcome.final_state, args.output, workflow_id, session.client.namespace)
    return exit_code(outcome.final_state, allow_ungrounded=args.allow_ungrounded)


def exit_code(report: ResearchReport, *, allow_ungrounded: bool = False) -> int:
    """0 for a grounded report; `EXIT_UNGROUNDED` (3) for a partial or not-found one unless
    `allow_ungrounded`."""
    if report.status == "grounded" or allow_ungrounded:
        return 0
    return EXIT_UNGROUNDED


NO_EVIDENCE_NOTE = (
    "No evidence: the research gathered none (no tool call returned a result), so nothing in this "
    "report is grounded. Check the model can call tools (see docs/models.md, OpenAI-compatible servers) "
    "and that the research has tools or datastores to search."
)


def format_report(outcome: ResearchOutcome, link: str) -> str:
    """The report a person reads at the end of a run: each finding once, with the judge's verdict,
    its score and the sentence of the evidence it rests on (`source#location: "quote"`)."""
    report = outcome.final_state
    lines = ["", "Summary", "-------", report.summary or "(no summary)", ""]
    if report.evidence_count == 0:
        lines += [NO_EVIDENCE_NOTE, ""]
    lines += [
        f"Status: {report.status} ({STATUS_TEXT[report.status]})   "
        f"Confidence: {report.confidence:.2f}",
        "",
    ]
    lines += format_parts(report)
    if report.structured_output:
        data = report.model_dump(mode="json", include={"structured_output"})["structured_output"]
        structured = json.dumps(data, indent=2, ensure_ascii=False)
        lines += ["Structured output", "-----------------", structured, ""]
    lines += format_coverage(report)
    if report.claims:
        lines += ["Findings", "--------", *_claim_lines(report), ""]
    if report.removed_claims:
        lines += [
            "Removed as unsupported (replaced by the closest quote, or dropped)",
            "------------------------------------------------------------------",
            *(f"- {claim}" for claim in report.removed_claims),
            "",
        ]
    lines += ["Sources", "-------", *_source_lines(report), ""]
    score, threshold = report.grounding_score, report.grounding_threshold
    lines += [
        f"Grounding score: {score:.0%} of claims grounded (the run needs {threshold:.0%}); "
        + _judged_by(report)
        if score is not None
        else "Grounding score: n/a",
        f"Replans: {report.replan_count}   "
        f"Regenerations: {report.regeneration_count}   "
        f"Ended: {report.end_reason}   "
        f"Drafts: {len(report.drafts)}   "
        f"Evidence items: {report.evidence_count}   "
        f"Tokens: {report.usage.total_tokens}   "
        f"Cost: {usd(report.cost_usd)}",
        *(
            f"Review {r.review_id}: {r.decision}" + (f" ({r.remark})" if r.remark else "")
            for r in report.reviews
        ),
        *([f"Final report: {report.end_detail}"] if report.end_detail else []),
        f"Workflow: {outcome.workflow_id}",
        f"Web UI: {link}",
    ]
    return "\n".join(lines)


def _review_settings(points: str | None) -> ReviewSettings | None:
    if points is None:
        return None
    return ReviewSettings.model_validate(
        {"points": [point.strip() for point in points.split(",") if point.strip()]}
    )


def _claim_lines(report: ResearchReport) -> list[str]:
    """`✓ 0.93 claim` then its quotes; a claim that is not grounded says why, and quotes what
    the evidence closest to it says."""
    lines = []
    for claim in report.claims:
        if claim.grounded:
            lines.append(f"✓ {claim.score:.2f} {claim.claim}")
        else:
            lines.append(f"✗ {claim.score:.2f} {claim.claim}")
            lines.append(f"    not supported: {claim.rationale or 'no evidence states it'}")
        for citation in claim.citations:
            quote = " ".join(citation.quote.split())
            closest = "" if claim.grounded else "closest: "
            lines.append(f'    {closest}{_cited(report, citation.reference)}: "{quote}"')
    return lines


STATUS_TEXT = {
    "grounded": "every part of the question answered by grounded claims",
    "partial": "some of the question is answered; see Parts",
    "not_found": "the indexed documents do not answer the question",
}


def _source_lines(report: ResearchReport) -> list[str]:
    """The Sources list, numbered as the summary's `[n]` marks cite it."""
    if not report.sources:
        return ["(none cited)"]
    return [f"[{n}] {source}" for n, source in enumerate(report.sources, start=1)]


def _cited(report: ResearchReport, reference: str) -> str:
    """`[n] reference` with the number of the report's Sources list (the summary's numbering);
    a passage the final report does not cite is named without a number."""
    if reference in report.sources:
        return f"[{report.sources.index(reference) + 1}] {reference}"
    return reference


def format_parts(report: ResearchReport) -> list[str]:
    """The question's own parts, each answered (with the claims that answer it), partly answered
    or not stated."""
    if not report.parts:
        return []
    marks = {"answered": "✓", "partial": "~", "not_stated": "✗"}
    lines = ["Parts of the question", "---------------------"]
    for number, part in enumerate(report.parts, start=1):
        lines.append(f"{marks[part.state]} {number}. {part.text} — {part.state.replace('_', ' ')}")
        if part.statement:
            lines.append(f"     {part.statement}")
        for index in part.claims:
            if 1 <= index <= len(report.claims):
                lines.append(f"     {report.claims[index - 1].claim}")
    lines.append("")
    return lines


def _judged_by(report: ResearchReport) -> str:
    """Who judged the claims, how, and the score a claim needed."""
    how = {
        "logprobs": "from its token probabilities",
        "verdict": "from its generated yes/no",
    }.get(report.grounding_method)
    judge = (
        f"judge {report.grounding_judge} ({how})"
        if report.grounding_judge and how
        else "judged by the deterministic checks alone"
    )
    needed = (
        f", a claim needs a score of {report.claim_threshold:.2f}"
        if report.claim_threshold is not None
        else ""
    )
    return judge + needed


def format_coverage(report: ResearchReport) -> list[str]:
    """The report's Coverage section: each sub-question, then the passages that answer it with
    their evidence numbers and sources (and a note when the report leaves it unanswered), or
    "not found"."""
    if not report.coverage:
        return []
    lines = ["Coverage", "--------"]
    for number, entry in enumerate(report.coverage, start=1):
        mark = "✓" if entry.covered else "✗"
        lines.append(f"{mark} {number}. {entry.question}")
        if not entry.passages:
            lines.append("     not found")
        for passage in entry.passages:
            text = " ".join(passage.text.split())
            text = text if len(text) <= 160 else text[:160] + " …"
            where = f"{passage.source}#{passage.location}" if passage.location else passage.source
            lines.append(f"     {_cited(report, where)}: {text}")
        if entry.passages and entry.answered is False:
            lines.append("     found, but no grounded claim of the report answers it")
    lines.append("")
    return lines


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "run"
