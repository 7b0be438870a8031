"""`ResearchSpec`: a research configuration, its in-process runner, and what a run returns.

A spec holds configuration only (model, tools, thresholds); everything a run changes lives in
its `ResearchState`, so one spec serves many runs at once. `await spec.execute({"prompt": ...})`
runs the graph in-process; registered on an App, `workflows.ResearchWorkflow` runs the same node
functions durably. Both loop on `next_node` until it says `done`, ask `end_reason` why, and hand
that to `ResearchSpec.finish`, which writes the report. `execute` can keep its execute rounds in a
`RoundJournal` (a knowledge scan's activity journal) so that a retried attempt resumes there. When
`next_node` says `review`, the in-process runner asks the `ReviewPolicy`'s callback (the durable one
waits for its `review` Update) and records the decision with `record_review`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from sleuth._util.signature import takes_parameters_of
from sleuth._util.strict import StrictInput
from sleuth.agent import Agent
from sleuth.agent.state import LoopState
from sleuth.agent.termination import Condition
from sleuth.flows.review import ReviewError, ReviewPolicy, ReviewSettings
from sleuth.models import resolve
from sleuth.models.base import Model, OutputSchema
from sleuth.rag.embeddings import Embedder
from sleuth.rag.tools import wire_datastores
from sleuth.research.nodes import (
    EXECUTE_PROMPT,
    BudgetSpent,
    CheckpointHook,
    causal_inference_node,
    execute_node,
    grounding_eval_node,
    plan_node,
    regenerate_node,
    replan_node,
    summarize_node,
)
from sleuth.research.parts import question_parts, state_unanswered, state_uncovered
from sleuth.research.plan import MAX_SUB_QUESTIONS
from sleuth.research.report import ResearchReport, build_final_state, finish
from sleuth.research.review import ask_reviewer
from sleuth.research.router import (
    MAX_LOOPS,
    EndReason,
    Node,
    end_reason,
    next_node,
    unknown_node,
)
from sleuth.research.state import QuestionPart, ResearchState
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.events import emit
from sleuth.runtime.telemetry import span
from sleuth.tools import Tool
from sleuth.usage.limits import UsageLimits
from sleuth.usage.pricing import require_price

T = TypeVar("T")
Regenerate = Literal["requote", "rewrite"]
"""How the regenerate node repairs a report short of the grounding threshold (see
`sleuth.research.requote`)."""
REGENERATE_MODES: tuple[Regenerate, ...] = get_args(Regenerate)
ModelT = TypeVar("ModelT", bound=BaseModel)

MAX_PROMPT_CHARS = 32_000
"""The longest research prompt. The prompt travels in the run's input and its outcome, which must
stay well inside Temporal's payload limit (2 MB); documents belong in a datastore."""
MAX_ITERATIONS = 100
"""The most model turns one execute round may take."""
MAX_OUTPUT_TOKENS = 200_000
"""The largest `max_output_tokens` a spec accepts."""
MAX_COST_USD = 100_000.0
"""The largest cost budget (`max_cost_usd`) a spec or a run accepts."""
MAX_EXECUTE_TOKENS = 10_000_000
"""The largest `execute_token_budget` a spec accepts."""


def check_prompt(prompt: str) -> str:
    """`prompt` if a run can take it; else a ValueError that says the limit."""
    if not prompt.strip():
        raise InvalidSettingError("a research run needs a non-empty prompt")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise InvalidSettingError(
            f"the prompt is {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}. Ask a "
            "question, and put long documents in a datastore (app.datastore) the run can search"
        )
    return prompt


class ResearchInputs(StrictInput):
    """One run's inputs: the question, and per-run overrides of the spec's settings."""

    # A refused prompt may be megabytes long or private: errors must not echo it.
    model_config = ConfigDict(hide_input_in_errors=True)

    prompt: Annotated[str, AfterValidator(check_prompt)]
    """The research question (at most `MAX_PROMPT_CHARS`, 32,000 characters)."""
    grounding_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """Share of grounded claims needed to finish, 0 to 1 (default: the config's)."""
    max_replans: int | None = Field(default=None, ge=0, le=MAX_LOOPS)
    """Replans allowed, 0 to 10 (default: the config's)."""
    max_regenerations: int | None = Field(default=None, ge=0, le=MAX_LOOPS)
    """Regenerations allowed, 0 to 10 (default: the config's)."""
    max_cost_usd: float | None = Field(default=None, gt=0.0, le=MAX_COST_USD)
    """The run's cost budget in USD, more than 0 (default: the config's; none without one)."""
    review: ReviewSettings | None = None
    """Where the run pauses for a person and how long it waits, e.g. `{"points": ["summary"],
    "timeout_seconds": 3600, "on_timeout": "reject"}` (default: the config's review policy)."""
    causal_inference: bool | None = None
    """Whether the causal inference node runs after execute (default: the config's)."""
    claim_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    """The score a claim needs to count as grounded, 0 to 1 (default: the config's, else the
    judge's calibrated threshold)."""


class DatastoreSource(Protocol):
    """Where a spec that names its datastores finds them: an `App`."""

    def datastore_configs(self, names: list[str] | None) -> dict[str, dict[str, Any]]: ...


class RoundJournal(Protocol):
    """Where `ResearchSpec.execute` keeps its execute rounds so that a retried attempt resumes
    there: the state a later round starts from (entry `research`), the loop's checkpoints within
    a round (`loop`), and the state the round ends with. A knowledge scan passes its activity's
    checkpoint journal (`sleuth.activities.checkpoints.Journal`); the other nodes are model calls only
    and simply run again after a crash."""

    def get(self, key: str, model: type[ModelT]) -> ModelT | None:
        """The entry `key` as a `model`, or None when there is none."""
        ...

    async def save(self, **entries: BaseModel | None) -> object:
        """Replace `entries` (None removes one); durable when it returns."""
        ...


@dataclass
class ResearchResult:
    """What one in-process run produced."""

    final_state: ResearchReport
    """The report: `final_state.structured_output` is an instance of `output_schema`."""
    state: ResearchState
    """The run's whole state (complete evidence trail, conversation-free)."""
    output_schema: type[BaseModel] | None = None

    @property
    def structured_output(self) -> Any:
        """The structured report, an instance of the spec's `output_schema` (None without one or
        when the answer did not validate)."""
        return self.final_state.structured_output

    @property
    def parsed(self) -> Any:
        """The same instance as `structured_output` (the name the agent's result uses)."""
        return self.final_state.structured_output

    @property
    def summary(self) -> str:
        return self.final_state.summary

    @property
    def report(self) -> ResearchReport:
        """The report (`final_state`): `result.report.to_html()`, `.to_markdown()`, `.to_json()`."""
        return self.final_state

    def model_dump(self, *, mode: Literal["json", "python"] = "json") -> dict[str, Any]:
        """The report as plain data (`final_state.model_dump()`), as a scan's `to_row` may use it."""
        return self.final_state.model_dump(mode=mode)


class ResearchSpec:
    """A research configuration: run it with `await spec.execute({"prompt": ...})`.

    Register it on an App (`app.research("name", spec)`) to run it durably as `ResearchWorkflow`.
    Holds no per-run state, so concurrent runs of one spec are safe.
    """

    def __init__(
        self,
        *,
        model: Model | str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        output_schema: type[BaseModel] | None = None,
        grounding_threshold: float = 0.65,
        max_replans: int = 2,
        max_regenerations: int = 1,
        causal_inference: bool = True,
        datastores: Mapping[str, Mapping[str, Any]] | Sequence[str] | None = None,
        system_prompt: str | None = None,
        judge_model: Model | str | Literal[False] | None = None,
        max_iterations: int = 12,
        max_output_tokens: int | None = None,
        name: str = "research",
        review: ReviewPolicy | None = None,
        max_cost_usd: float | None = None,
        claim_threshold: float | None = None,
        grounding_embedder: Embedder | None = None,
        max_sub_questions: int = 4,
        execute_token_budget: int | None = None,
        stop_when_covered: bool = True,
        regenerate: Regenerate = "requote",
    ):
        _check_range("grounding_threshold", grounding_threshold, 0.0, 1.0)
        if claim_threshold is not None:
            _check_range("claim_threshold", claim_threshold, 0.0, 1.0)
        _check_range("max_sub_questions", max_sub_questions, 1, MAX_SUB_QUESTIONS)
        if execute_token_budget is not None:
            _check_range("execute_token_budget", execute_token_budget, 1, MAX_EXECUTE_TOKENS)
        _check_range("max_replans", max_replans, 0, MAX_LOOPS)
        _check_range("max_regenerations", max_regenerations, 0, MAX_LOOPS)
        _check_range("max_iterations", max_iterations, 1, MAX_ITERATIONS)
        if max_output_tokens is not None:
            _check_range("max_output_tokens", max_output_tokens, 1, MAX_OUTPUT_TOKENS)
        self.model = resolve(model)
        self.judge: Model | None = (
            None if judge_model is False else resolve(judge_model) if judge_model else self.model
        )
        self.tools = list(tools)
        self.output_schema = output_schema
        self.grounding_threshold = grounding_threshold
        self.claim_threshold = claim_threshold
        self.grounding_embedder = grounding_embedder
        self.max_replans = max_replans
        self.max_regenerations = max_regenerations
        self.causal_inference = causal_inference
        self.datastores = datastores
        self.system_prompt = system_prompt
        self.max_iterations = max_iterations
        self.max_output_tokens = max_output_tokens
        self.name = name
        self.review = review
        self.max_cost_usd = max_cost_usd
        if max_cost_usd is not None:
            if not 0 < max_cost_usd <= MAX_COST_USD:
                raise InvalidSettingError(
                    f"max_cost_usd must be more than 0 and at most {MAX_COST_USD:g}, got "
                    f"{max_cost_usd}"
                )
            self.check_priced()
        self.max_sub_questions = max_sub_questions
        self.execute_token_budget = execute_token_budget
        self.stop_when_covered = stop_when_covered
        if regenerate not in REGENERATE_MODES:
            raise InvalidSettingError(
                f"regenerate must be one of {', '.join(map(repr, REGENERATE_MODES))}, got "
                f"{regenerate!r}: 'requote' replaces each unsupported claim by the closest quote "
                "of the evidence (no model call), 'rewrite' asks the writer model again"
            )
        self.regenerate: Regenerate = regenerate
        if isinstance(datastores, Mapping):
            # Wire once now so a bad mapping fails at definition time, not mid-run.
            wire_datastores(datastores)

    # -- runs -------------------------------------------------------------------------------

    def initial_state(
        self,
        prompt: str,
        *,
        grounding_threshold: float | None = None,
        max_replans: int | None = None,
        max_regenerations: int | None = None,
        max_cost_usd: float | None = None,
        review: ReviewSettings | None = None,
        causal_inference: bool | None = None,
        claim_threshold: float | None = None,
    ) -> ResearchState:
        """A fresh run's state; the keyword arguments override the spec's settings (limits,
        review, causal inference) for this run. Out-of-bounds values raise a ValidationError (a
        ValueError) naming the field."""
        inputs = ResearchInputs(
            prompt=prompt,
            grounding_threshold=grounding_threshold,
            max_replans=max_replans,
            max_regenerations=max_regenerations,
            max_cost_usd=max_cost_usd,
            review=review,
            causal_inference=causal_inference,
            claim_threshold=claim_threshold,
        )
        budget = _pick(inputs.max_cost_usd, self.max_cost_usd)
        if budget is not None:
            self.check_priced()
        spec_review = self.review.settings() if self.review is not None else None
        return ResearchState(
            prompt=inputs.prompt,
            grounding_threshold=_pick(inputs.grounding_threshold, self.grounding_threshold),
            max_replans=_pick(inputs.max_replans, self.max_replans),
            max_regenerations=_pick(inputs.max_regenerations, self.max_regenerations),
            causal_inference=_pick(inputs.causal_inference, self.causal_inference),
            max_cost_usd=budget,
            review=inputs.review or spec_review,
            claim_threshold=_pick(inputs.claim_threshold, self.claim_threshold),
            parts=[QuestionPart(text=part) for part in question_parts(inputs.prompt)],
        )

    def check_priced(self) -> None:
        """Raise unless every model of the spec has a price (a cost budget needs them)."""
        require_price(self.model)
        if self.judge is not None:
            require_price(self.judge)

    async def execute(
        self,
        inputs: ResearchInputs | Mapping[str, Any] | str,
        *,
        app: DatastoreSource | None = None,
        journal: RoundJournal | None = None,
    ) -> ResearchResult:
        """Run the graph in-process. `inputs`: `{"prompt": ..., "grounding_threshold"?, "max_replans"?,
        "max_regenerations"?, "max_cost_usd"?, "review"?, "causal_inference"?, "claim_threshold"?}`
        (see `ResearchInputs`) or the prompt itself. `app` resolves datastore names (default: the
        App the current worker serves). With a `journal` the run starts from what it holds and
        records its execute rounds there (see `RoundJournal`).

        With review points, the spec's `ReviewPolicy.callback` decides each review; a review
        that times out with `on_timeout="fail"` raises `ReviewTimedOut`."""
        if isinstance(inputs, str):
            inputs = ResearchInputs(prompt=inputs)
        elif not isinstance(inputs, ResearchInputs):
            inputs = ResearchInputs.model_validate(inputs)
        state = self.initial_state(
            inputs.prompt,
            grounding_threshold=inputs.grounding_threshold,
            max_replans=inputs.max_replans,
            max_regenerations=inputs.max_regenerations,
            max_cost_usd=inputs.max_cost_usd,
            review=inputs.review,
            causal_inference=inputs.causal_inference,
            claim_threshold=inputs.claim_threshold,
        )
        if state.review is not None and (self.review is None or self.review.callback is None):
            raise ReviewError(
                f"research {self.name!r} pauses for review ({', '.join(state.review.points)}) "
                "but has no review callback to ask in-process: pass "
                "create_research_workflow(review=ReviewPolicy(callback=...)), or run it durably "
                "(ResearchWorkflow) and answer with `sleuth review RUN_ID`"
            )
        loop: LoopState | None = None
        if journal is not None:
            state = journal.get("research", ResearchState) or state
            loop = journal.get("loop", LoopState)
        with span(f"research {self.name}", **{"sleuth.research": self.name}):
            while (node := next_node(state)) != Node.DONE:
                if node == Node.REVIEW:
                    assert self.review is not None and self.review.callback is not None
                    state = await ask_reviewer(self.review.callback, self.name, state)
                elif node == Node.EXECUTE and journal is not None:
                    state = await self._journaled_round(state, journal, loop, app)
                    loop = None
                else:
                    state = await self.run_node(node, state, app=app)
            state, report = self.finish(state, end_reason(state))
        return ResearchResult(final_state=report, state=state, output_schema=self.output_schema)

    async def _journaled_round(
        self,
        state: ResearchState,
        journal: RoundJournal,
        loop: LoopState | None,
        app: DatastoreSource | None,
    ) -> ResearchState:
        """One execute round with its start, its loop's checkpoints and its end in `journal`;
        `loop` is the checkpoint a retried attempt resumes the round from."""
        if loop is None and state.nodes:
            await journal.save(research=state)  # a later round: what it starts from
        checkpointed = loop is not None

        async def save_loop(checkpoint: LoopState) -> None:
            nonlocal checkpointed
            # A finished loop's state is saved with the round's end state just below.
            if not checkpoint.finished:
                checkpointed = True
                await journal.save(loop=checkpoint)

        state = await self.run_node(
            Node.EXECUTE, state, app=app, checkpoint=loop, on_checkpoint=save_loop
        )
        if checkpointed:
            # A round that saved nothing (one model turn, no tool call) has nothing to protect.
            await journal.save(research=state, loop=None)
        return state

    async def run_node(
        self,
        node: Node,
        state: ResearchState,
        *,
        app: DatastoreSource | None = None,
        checkpoint: LoopState | None = None,
        on_checkpoint: CheckpointHook | None = None,
    ) -> ResearchState:
        """Run one node on `state` and return the new state (`state` itself is not changed).

        A node whose next model request the run's cost budget cannot pay for stops there: the
        new state says `budget_exhausted`, and the router ends the run."""
        with span(f"research.{node.value}", **{"sleuth.research": self.name}) as node_span:
            try:
                updated = await self._run(node, state, app, checkpoint, on_checkpoint)
            except BudgetSpent as exc:
                updated = state.model_copy(
                    update={"budget_exhausted": True, "usage": state.usage + exc.spent}
                )
            updated.node = node
            updated.nodes = [*state.nodes, node]
            updated.evidence_count = len(updated.evidence)
            updated.total_tokens = updated.usage.total_tokens
            updated.cost_usd = updated.usage.cost_usd
            updated.sub_question_count = len(updated.sub_questions)
            updated.pending_count = len(updated.pending)
            updated.next_sub_question = updated.pending[0] + 1 if updated.pending else 0
            missing = state_uncovered(updated)
            updated.uncovered_count = len(missing)
            updated.unanswered_count = len(state_unanswered(updated, missing))
            node_span.set_attributes(
                {
                    "sleuth.tokens": updated.total_tokens - state.total_tokens,
                    "sleuth.cost_usd": updated.cost_usd - state.cost_usd,
                    "sleuth.evidence_count": updated.evidence_count,
                }
            )
            if updated.grounding_score is not None:
                node_span.set_attribute("sleuth.grounding_score", updated.grounding_score)
        emit(
            "research.node",
            research=self.name,
            node=node.value,
            grounding_score=updated.grounding_score,
            replan_count=updated.replan_count,
            regeneration_count=updated.regeneration_count,
        )
        return updated

    async def _run(
        self,
        node: Node,
        state: ResearchState,
        app: DatastoreSource | None,
        checkpoint: LoopState | None,
        on_checkpoint: CheckpointHook | None,
    ) -> ResearchState:
        match node:
            case Node.PLAN:
                return await plan_node(self, state)
            case Node.EXECUTE:
                return await execute_node(
                    self, state, app=app, checkpoint=checkpoint, on_checkpoint=on_checkpoint
                )
            case Node.CAUSAL_INFERENCE:
                return await causal_inference_node(self, state)
            case Node.SUMMARIZE:
                return await summarize_node(self, state)
            case Node.GROUNDING_EVAL:
                return await grounding_eval_node(self, state)
            case Node.REGENERATE:
                return await regenerate_node(self, state)
            case Node.REPLAN:
                return await replan_node(self, state)
        raise unknown_node(node)

    def finish(
        self, state: ResearchState, reason: EndReason, *, evidence_chars: int | None = None
    ) -> tuple[ResearchState, ResearchReport]:
        """The one step that ends a run, in both runners: record the `reason` the runner decided
        (it never routes itself) and build the report, the structured output as an instance of
        `output_schema`. `evidence_chars` caps the evidence text the report keeps inline."""
        state = finish(state, reason, self.output_schema)
        report = build_final_state(
            state, output_schema=self.output_schema, evidence_chars=evidence_chars
        )
        return state, report

    # -- helpers the nodes share ------------------------------------------------------------

    def build_agent(
        self,
        app: DatastoreSource | None = None,
        *,
        max_iterations: int | None = None,
        max_cost_usd: float | None = None,
        done_when: Condition | None = None,
    ) -> Agent:
        """A fresh execute agent: the spec's tools plus a `search_<name>` tool per datastore.
        `max_iterations` (default: the spec's) is what is left of the execute round's budget, and
        `max_cost_usd` what is left of the run's cost budget (None: no cost budget).

        `done_when` ends the loop after a batch of tool calls (`execute_node` passes
        `sleuth.research.plan.step_done` unless `stop_when_covered` is off)."""
        datastores = self.datastores
        if datastores is not None and not isinstance(datastores, Mapping):
            if app is None:
                from sleuth.apps.app import current_app

                app = current_app()
            datastores = app.datastore_configs(list(datastores))
        datastore_tools, routing = wire_datastores(datastores)
        system = "\n\n".join(p for p in (self.system_prompt or EXECUTE_PROMPT, routing) if p)
        return Agent(
            self.model,
            tools=[*self.tools, *datastore_tools],
            system_prompt=system,
            reflexion=True,
            max_iterations=max_iterations or self.max_iterations,
            max_output_tokens=self.max_output_tokens,
            limits=None if max_cost_usd is None else UsageLimits(max_cost_usd=max(max_cost_usd, 0)),
            termination=done_when,
            name=f"{self.name}.execute",
        )

    def output_json_schema(self) -> OutputSchema | None:
        if self.output_schema is None:
            return None
        return OutputSchema(
            name=self.output_schema.__name__, json_schema=self.output_schema.model_json_schema()
        )


@takes_parameters_of(ResearchSpec)
def create_research_workflow(**options: Any) -> ResearchSpec:
    """A research graph with a post-hoc grounding loop.

    `model` is a `Model` or `"provider:name"` (None: the default model); `judge_model` scores the
    claims (None: the same model; False: the deterministic checks alone). Each claim is judged
    against the evidence passages that match it best (`sleuth.grounding.ground_claims`; a
    `grounding_embedder` adds embedding similarity to BM25 when choosing them) and counts as
    grounded when its score reaches `claim_threshold` (None: the judge's calibrated threshold,
    recorded in the report). `grounding_threshold` is the share of claims that must be grounded
    for the run to finish without regenerating or replanning. `datastores` is a mapping
    `{name: {"retriever", "description", "top_k", "threshold"}}` or a list of names an `App`
    registered. `max_replans` and `max_regenerations` are 0 to 10. The plan node splits the question
    into at most `max_sub_questions` (1 to 8; 1: the question itself, no model call) and every
    execute round researches them one by one, within `max_iterations` model turns (and
    `execute_token_budget` tokens, None: unlimited) per round; a sub-question's research stops
    as soon as its tool results cover it (`stop_when_covered`; False: the agent reads them and
    answers, or searches on, before the next sub-question). A report short of the grounding
    threshold is regenerated: by default each unsupported claim is replaced by the quote of the
    evidence closest to it, or dropped (`regenerate="requote"`, no model call; the claims taken
    out are the report's `removed_claims`); `regenerate="rewrite"` asks the writer model to
    rewrite the report instead (a part of the question that asks for a comparison or a reason,
    left unanswered, is always rewritten by the writer from the passages it combines). Every
    judged draft is kept and the run ends with the best one (grounding score, then parts of the
    question answered); only the question's own parts, never a planner-only sub-question, make
    it replan. `report.status` is `grounded`, `partial` or `not_found`, `report.confidence` is
    derived from the grounding, and every `[n]` cites `report.sources[n - 1]` (see
    docs/research-loop.md). Run it with
    `result = await spec.execute({"prompt": ...})`; `result.final_state` is a `ResearchReport`:
    `report: Report = result.final_state["structured_output"]`, `["grounding_score"]`,
    `["replan_count"]` (or the same as attributes).

    `review=ReviewPolicy(points=["plan", "summary"], timeout_seconds=..., on_timeout=...,
    callback=...)` pauses runs for a person (see `sleuth.flows.review`); `max_cost_usd` is each run's
    cost budget in USD at the models' prices (`sleuth.usage.pricing`), enforced before every model
    request like the token limits of `UsageLimits`.
    """
    return ResearchSpec(**options)


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise InvalidSettingError(f"{name} must be within {low}..{high}, got {value}")


def _pick(value: T | None, default: T) -> T:
    return default if value is None else value
