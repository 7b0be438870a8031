"""The research graph: execute → causal inference → summarize → grounding eval → regenerate | replan.

One implementation of each node and one pure router, `next_node(state)`, serve two runners:
`await spec.execute({"prompt": ...})` runs the graph in-process, and `workflows.ResearchWorkflow`
runs every node as a Temporal activity that calls the very same node functions.

A `ResearchSpec` holds configuration only (model, tools, thresholds); everything a run changes
lives in its `ResearchState`, so one spec can serve many runs at once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from sleuth.agent import Agent, _extract_json
from sleuth.events import emit
from sleuth.grounding import JUDGE_INSTRUCTIONS, judge_claims, number_evidence, split_claims
from sleuth.models import resolve
from sleuth.models.base import (
    Message,
    Model,
    ModelResponse,
    OutputSchema,
    ToolSpec,
    Usage,
)
from sleuth.rag.tools import wire_datastores
from sleuth.state import EvidenceItem, LoopState
from sleuth.tools import Tool

NodeName = Literal[
    "execute", "causal_inference", "summarize", "grounding_eval", "regenerate", "replan"
]
NODES: tuple[str, ...] = (
    "execute",
    "causal_inference",
    "summarize",
    "grounding_eval",
    "regenerate",
    "replan",
)
DONE = "done"
START = "start"

EXECUTE_PROMPT = (
    "You are a research agent. Use your tools to gather evidence that answers the question. "
    "Prefer several focused tool calls over guessing; every fact you report must come from a tool "
    "result. When you have enough evidence, answer with your findings in plain prose."
)
CAUSAL_PROMPT = (
    "You are a causal analyst. From the numbered evidence only, write the causal chain behind the "
    "findings: one line per link, 'cause -> effect [evidence numbers]'. Leave out links the "
    "evidence does not state."
)
SUMMARIZE_PROMPT = (
    "You are a research summariser. Distil the numbered evidence into a report that answers the "
    "question. State only what the evidence supports, one fact per sentence, and cite evidence "
    "numbers in square brackets."
)
REGENERATE_PROMPT = (
    "You are a research editor. Rewrite the report so that every sentence is supported by the "
    "numbered evidence: repair the listed unsupported claims from the evidence, or drop them. "
    "Do not add facts the evidence does not state."
)
REPLAN_PROMPT = (
    "You are a research planner. Some claims of the report have no supporting evidence. Write a "
    "short, focused research prompt (at most five sentences) telling a research agent exactly what "
    "to look up so those claims can be confirmed or refuted. Reply with the prompt only."
)
NODE_PROMPTS: dict[str, str] = {
    "causal_inference": CAUSAL_PROMPT,
    "summarize": SUMMARIZE_PROMPT,
    "regenerate": REGENERATE_PROMPT,
    "replan": REPLAN_PROMPT,
    "grounding_eval": JUDGE_INSTRUCTIONS,
}


# -- state ----------------------------------------------------------------------------------------


class ResearchDigest(BaseModel):
    """What the router reads: the last node, the score, the counters and the run's limits.

    Small on purpose: it is what crosses the wire between the durable nodes.
    """

    node: str = START
    """The node that completed last (`start` before any)."""
    grounding_score: float | None = None
    replan_count: int = 0
    regeneration_count: int = 0
    score_history: list[float] = Field(default_factory=list)
    grounding_threshold: float = 0.65
    max_replans: int = 2
    max_regenerations: int = 1
    causal_inference: bool = True
    evidence_count: int = 0
    total_tokens: int = 0


class ClaimRecord(BaseModel):
    """One claim of the summary, its score, and the evidence it rests on."""

    claim: str
    score: float
    grounded: bool
    evidence: list[int] = Field(default_factory=list)
    """1-based indices into the run's evidence trail."""
    evidence_text: list[str] = Field(default_factory=list)
    """The outputs of those evidence items (trimmed)."""
    rationale: str = ""


class ResearchState(ResearchDigest):
    """Everything one research run knows. Serialisable: the durable runner stores it by reference."""

    prompt: str
    focused_prompt: str = ""
    """The replan node's prompt for the next execute round ("" before any replan)."""
    focused_prompts: list[str] = Field(default_factory=list)
    evidence: list[EvidenceItem] = Field(default_factory=list)
    findings: str = ""
    """The execute agent's own answer(s), one paragraph per execute round."""
    causal_chain: str = ""
    summary: str = ""
    structured_output: dict[str, Any] | None = None
    output_error: str | None = None
    """Why the summary did not validate against the output schema, if it did not."""
    grounding_method: str = "none"
    claims: list[ClaimRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    nodes: list[str] = Field(default_factory=list)
    """The path taken so far, node by node."""
    agent_stop_reasons: list[str] = Field(default_factory=list)
    end_reason: str | None = None

    def final_state(self, *, evidence_chars: int | None = None) -> dict[str, Any]:
        """The run's result as a plain dict (see `build_final_state`)."""
        return build_final_state(self, evidence_chars=evidence_chars)

    def digest(self) -> ResearchDigest:
        """The router's view, without the (possibly large) evidence."""
        return ResearchDigest.model_validate(
            {name: getattr(self, name) for name in ResearchDigest.model_fields}
        )


# -- the router -----------------------------------------------------------------------------------


def _as_digest(state: ResearchDigest | Mapping[str, Any]) -> ResearchDigest:
    if isinstance(state, ResearchDigest):
        return state
    return ResearchDigest.model_validate(
        {k: v for k, v in state.items() if k in ResearchDigest.model_fields}
    )


def is_grounded(state: ResearchDigest | Mapping[str, Any]) -> bool:
    digest = _as_digest(state)
    return (
        digest.grounding_score is not None and digest.grounding_score >= digest.grounding_threshold
    )


def next_node(state: ResearchDigest | Mapping[str, Any]) -> str:
    """The node to run after `state.node`, or `"done"`. Pure: both runners route with it.

    After grounding eval: score ≥ threshold → done; else regenerations left → regenerate; else
    replans left → replan; else done.
    """
    digest = _as_digest(state)
    last = digest.node
    if last in (START, "replan"):
        return "execute"
    if last == "execute":
        return "causal_inference" if digest.causal_inference else "summarize"
    if last == "causal_inference":
        return "summarize"
    if last in ("summarize", "regenerate"):
        return "grounding_eval"
    if last == "grounding_eval":
        if is_grounded(digest):
            return DONE
        if digest.regeneration_count < digest.max_regenerations:
            return "regenerate"
        if digest.replan_count < digest.max_replans:
            return "replan"
        return DONE
    if last == DONE:
        return DONE
    raise ValueError(f"unknown research node {last!r}; nodes: {', '.join(NODES)}")


def end_reason(state: ResearchDigest | Mapping[str, Any]) -> str:
    """Why a finished run ended: `grounded`, `max_replans` or `max_regenerations`."""
    digest = _as_digest(state)
    if is_grounded(digest):
        return "grounded"
    # Replans are spent after regenerations, so whenever replans were allowed they ran out last.
    return "max_replans" if digest.max_replans > 0 else "max_regenerations"


# -- the spec -------------------------------------------------------------------------------------


@dataclass
class ResearchResult:
    """What one run produced. `final_state` is plain JSON data (see `build_final_state`)."""

    final_state: dict[str, Any]
    state: ResearchState
    output_schema: type[BaseModel] | None = None

    @property
    def structured_output(self) -> Any:
        """The structured report as a dict (None without an output schema or when invalid)."""
        return self.final_state["structured_output"]

    @property
    def parsed(self) -> Any:
        """The structured report as an instance of the spec's `output_schema` (else None)."""
        data = self.final_state["structured_output"]
        if data is None or self.output_schema is None:
            return None
        return self.output_schema.model_validate(data)

    @property
    def summary(self) -> str:
        return str(self.final_state["summary"])


CheckpointHook = Callable[[LoopState], Awaitable[None] | None]


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
    ):
        if not 0.0 <= grounding_threshold <= 1.0:
            raise ValueError(f"grounding_threshold must be within 0..1, got {grounding_threshold}")
        if max_replans < 0 or max_regenerations < 0:
            raise ValueError("max_replans and max_regenerations must be 0 or more")
        self.model = resolve(model)
        self.judge: Model | None = (
            None if judge_model is False else resolve(judge_model) if judge_model else self.model
        )
        self.tools = list(tools)
        self.output_schema = output_schema
        self.grounding_threshold = grounding_threshold
        self.max_replans = max_replans
        self.max_regenerations = max_regenerations
        self.causal_inference = causal_inference
        self.datastores = datastores
        self.system_prompt = system_prompt
        self.max_iterations = max_iterations
        self.max_output_tokens = max_output_tokens
        self.name = name
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
    ) -> ResearchState:
        """A fresh run's state; the keyword arguments override the spec's limits for this run."""
        if not prompt or not prompt.strip():
            raise ValueError("a research run needs a non-empty prompt")
        return ResearchState(
            prompt=prompt,
            grounding_threshold=_pick(grounding_threshold, self.grounding_threshold),
            max_replans=_pick(max_replans, self.max_replans),
            max_regenerations=_pick(max_regenerations, self.max_regenerations),
            causal_inference=self.causal_inference,
        )

    async def execute(self, inputs: Mapping[str, Any] | str, *, app: Any = None) -> ResearchResult:
        """Run the graph in-process. `inputs`: `{"prompt": ..., "grounding_threshold"?, "max_replans"?,
        "max_regenerations"?}` or the prompt itself. `app` resolves datastore names (default: the
        App the current worker serves)."""
        values: Mapping[str, Any] = {"prompt": inputs} if isinstance(inputs, str) else inputs
        if "prompt" not in values:
            raise ValueError("research inputs need a 'prompt'")
        state = self.initial_state(
            str(values["prompt"]),
            grounding_threshold=values.get("grounding_threshold"),
            max_replans=values.get("max_replans"),
            max_regenerations=values.get("max_regenerations"),
        )
        while (node := next_node(state)) != DONE:
            state = await self.run_node(node, state, app=app)
        state = finish(state)
        return ResearchResult(
            final_state=state.final_state(), state=state, output_schema=self.output_schema
        )

    async def run_node(
        self,
        node: str,
        state: ResearchState,
        *,
        app: Any = None,
        checkpoint: LoopState | None = None,
        on_checkpoint: CheckpointHook | None = None,
    ) -> ResearchState:
        """Run one node on `state` and return the new state (`state` itself is not changed)."""
        if node == "execute":
            updated = await execute_node(
                self, state, app=app, checkpoint=checkpoint, on_checkpoint=on_checkpoint
            )
        elif node == "causal_inference":
            updated = await causal_inference_node(self, state)
        elif node == "summarize":
            updated = await summarize_node(self, state)
        elif node == "grounding_eval":
            updated = await grounding_eval_node(self, state)
        elif node == "regenerate":
            updated = await regenerate_node(self, state)
        elif node == "replan":
            updated = await replan_node(self, state)
        else:
            raise ValueError(f"unknown research node {node!r}; nodes: {', '.join(NODES)}")
        updated.node = node
        updated.nodes = [*state.nodes, node]
        updated.evidence_count = len(updated.evidence)
        updated.total_tokens = updated.usage.total_tokens
        emit(
            "research.node",
            research=self.name,
            node=node,
            grounding_score=updated.grounding_score,
            replan_count=updated.replan_count,
            regeneration_count=updated.regeneration_count,
        )
        return updated

    # -- helpers the nodes share ------------------------------------------------------------

    def build_agent(self, app: Any = None) -> Agent:
        """A fresh execute agent: the spec's tools plus a `search_<name>` tool per datastore."""
        datastores = self.datastores
        if datastores is not None and not isinstance(datastores, Mapping):
            if app is None:
                from sleuth.app import current_app

                app = current_app()
            datastores = app.datastore_configs(list(datastores))
        datastore_tools, routing = wire_datastores(datastores)
        system = "\n\n".join(p for p in (self.system_prompt or EXECUTE_PROMPT, routing) if p)
        return Agent(
            self.model,
            tools=[*self.tools, *datastore_tools],
            system_prompt=system,
            reflexion=True,
            max_iterations=self.max_iterations,
            max_output_tokens=self.max_output_tokens,
            name=f"{self.name}.execute",
        )

    def output_json_schema(self) -> OutputSchema | None:
        if self.output_schema is None:
            return None
        return OutputSchema(
            name=self.output_schema.__name__, json_schema=self.output_schema.model_json_schema()
        )


def create_research_workflow(
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
) -> ResearchSpec:
    """A research graph with a post-hoc grounding loop.

    `model` is a `Model` or `"provider:name"` (None: the default model); `judge_model` scores the
    claims (None: the same model; False: lexical judging only). `datastores` is a mapping
    `{name: {"retriever", "description", "top_k", "threshold"}}` or a list of names an `App`
    registered. Run it with `await spec.execute({"prompt": ...})`; read
    `result.final_state["structured_output"]`, `["grounding_score"]`, `["replan_count"]`.
    """
    return ResearchSpec(
        model=model,
        tools=tools,
        output_schema=output_schema,
        grounding_threshold=grounding_threshold,
        max_replans=max_replans,
        max_regenerations=max_regenerations,
        causal_inference=causal_inference,
        datastores=datastores,
        system_prompt=system_prompt,
        judge_model=judge_model,
        max_iterations=max_iterations,
        max_output_tokens=max_output_tokens,
        name=name,
    )


# -- nodes ----------------------------------------------------------------------------------------


class _Meter:
    """Counts the tokens of every request one node makes (a fresh meter per node call)."""

    def __init__(self, model: Model):
        self.model = model
        self.name = model.name
        self.usage = Usage()

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
        response = await self.model.request(
            messages,
            tools=tools,
            output_schema=output_schema,
            max_output_tokens=max_output_tokens,
            tool_choice=tool_choice,
            top_logprobs=top_logprobs,
        )
        self.usage = self.usage + response.usage
        return response


async def execute_node(
    spec: ResearchSpec,
    state: ResearchState,
    *,
    app: Any = None,
    checkpoint: LoopState | None = None,
    on_checkpoint: CheckpointHook | None = None,
) -> ResearchState:
    """The agent tool loop (reflexion on); its tool calls are appended to the evidence trail."""
    agent = spec.build_agent(app)
    result = await agent.arun(
        execute_prompt(state), checkpoint=checkpoint, on_checkpoint=on_checkpoint
    )
    offset = len(state.evidence)
    gathered = [
        item.model_copy(update={"index": offset + position})
        for position, item in enumerate(result.evidence, start=1)
    ]
    findings = "\n\n".join(p for p in (state.findings, result.message.strip()) if p)
    return state.model_copy(
        update={
            "evidence": [*state.evidence, *gathered],
            "findings": findings,
            "usage": state.usage + result.usage,
            "agent_stop_reasons": [*state.agent_stop_reasons, result.stop_reason],
        }
    )


def execute_prompt(state: ResearchState) -> str:
    """The execute agent's prompt: the question, plus the replan's focus after a replan."""
    if not state.focused_prompt:
        return state.prompt
    return (
        f"{state.prompt}\n\nFollow-up research (earlier findings lacked evidence):\n"
        f"{state.focused_prompt}"
    )


async def causal_inference_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """A causal chain built from the evidence."""
    meter = _Meter(spec.model)
    response = await meter.request(
        [
            Message(role="system", content=CAUSAL_PROMPT),
            Message(role="user", content=_context(state, include_chain=False)),
        ],
        max_output_tokens=spec.max_output_tokens,
    )
    return state.model_copy(
        update={"causal_chain": response.text.strip(), "usage": state.usage + meter.usage}
    )


async def summarize_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """The evidence distilled into a summary (validated against the output schema, if any)."""
    meter = _Meter(spec.model)
    messages = [
        Message(role="system", content=SUMMARIZE_PROMPT),
        Message(role="user", content=_context(state, include_chain=True)),
    ]
    update = await _write_report(spec, meter, messages)
    return state.model_copy(update={**update, "usage": state.usage + meter.usage})


async def grounding_eval_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """Score the summary: the share of its claims the judge finds grounded in the evidence."""
    meter = _Meter(spec.judge) if spec.judge is not None else None
    claims = split_claims(grounded_text(state))
    report = await judge_claims(claims, state.evidence, meter)
    records = [
        ClaimRecord(
            claim=verdict.claim,
            score=verdict.score,
            grounded=verdict.grounded,
            evidence=verdict.evidence,
            evidence_text=[_trim(state.evidence[i - 1].output, 600) for i in verdict.evidence],
            rationale=verdict.rationale,
        )
        for verdict in report.claims
    ]
    return state.model_copy(
        update={
            "grounding_score": report.score,
            "grounding_method": report.method,
            "claims": records,
            "score_history": [*state.score_history, report.score],
            "usage": state.usage + (meter.usage if meter else Usage()),
        }
    )


async def regenerate_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """Rewrite the summary without new tool calls, repairing or dropping ungrounded claims."""
    meter = _Meter(spec.model)
    messages = [
        Message(role="system", content=REGENERATE_PROMPT),
        Message(
            role="user",
            content=_context(state, include_chain=True)
            + f"\n\nCurrent report:\n{grounded_text(state)}"
            + f"\n\nUnsupported claims:\n{_ungrounded_list(state)}",
        ),
    ]
    update = await _write_report(spec, meter, messages)
    return state.model_copy(
        update={
            **update,
            "regeneration_count": state.regeneration_count + 1,
            "usage": state.usage + meter.usage,
        }
    )


async def replan_node(spec: ResearchSpec, state: ResearchState) -> ResearchState:
    """A prompt focused on the ungrounded claims, for the next execute round."""
    meter = _Meter(spec.model)
    ungrounded = _ungrounded_list(state)
    response = await meter.request(
        [
            Message(role="system", content=REPLAN_PROMPT),
            Message(
                role="user",
                content=f"Question:\n{state.prompt}\n\nUnsupported claims:\n{ungrounded}",
            ),
        ],
        max_output_tokens=spec.max_output_tokens,
    )
    focused = response.text.strip() or (
        f"Find evidence that confirms or refutes these claims:\n{ungrounded}"
    )
    return state.model_copy(
        update={
            "focused_prompt": focused,
            "focused_prompts": [*state.focused_prompts, focused],
            "replan_count": state.replan_count + 1,
            "usage": state.usage + meter.usage,
        }
    )


def finish(state: ResearchState) -> ResearchState:
    """Mark a run whose router said `done` as ended, with its end reason."""
    return state.model_copy(update={"end_reason": end_reason(state)})


# -- reports --------------------------------------------------------------------------------------


async def _write_report(
    spec: ResearchSpec, model: Model, messages: list[Message]
) -> dict[str, Any]:
    """Ask for the report; with an output schema, validate it (one repair turn, then give up)."""
    schema = spec.output_json_schema()
    response = await model.request(
        messages, output_schema=schema, max_output_tokens=spec.max_output_tokens
    )
    if spec.output_schema is None:
        return {"summary": response.text.strip(), "structured_output": None, "output_error": None}
    parsed, error = _validate(spec.output_schema, response)
    if error is not None:
        repair = [
            *messages,
            Message(role="assistant", content=response.text),
            Message(
                role="user",
                content=f"That does not match the required schema: {error}. Reply with only a JSON "
                "object that matches it.",
            ),
        ]
        response = await model.request(
            repair, output_schema=schema, max_output_tokens=spec.max_output_tokens
        )
        parsed, error = _validate(spec.output_schema, response)
    if parsed is None:
        return {"summary": response.text.strip(), "structured_output": None, "output_error": error}
    summary = parsed.get("summary")
    return {
        "summary": summary if isinstance(summary, str) else report_text(parsed),
        "structured_output": parsed,
        "output_error": None,
    }


def _validate(
    schema: type[BaseModel], response: ModelResponse
) -> tuple[dict[str, Any] | None, str | None]:
    data = response.structured if response.structured is not None else _extract_json(response.text)
    if not isinstance(data, dict):
        return None, "the answer contained no JSON object"
    try:
        return schema.model_validate(data).model_dump(mode="json"), None
    except ValidationError as exc:
        return None, str(exc)


def report_text(structured: Mapping[str, Any]) -> str:
    """The prose of a structured report: its text fields and lists of text, one claim per line."""
    lines: list[str] = []
    for value in structured.values():
        if isinstance(value, str) and value.strip():
            lines.append(value.strip())
        elif isinstance(value, list):
            lines.extend(f"- {v.strip()}" for v in value if isinstance(v, str) and v.strip())
    return "\n".join(lines)


def grounded_text(state: ResearchState) -> str:
    """What grounding eval judges: the whole structured report if there is one, else the summary."""
    if state.structured_output:
        return report_text(state.structured_output)
    return state.summary


def _context(state: ResearchState, *, include_chain: bool) -> str:
    parts = [f"Question:\n{state.prompt}"]
    if state.findings:
        parts.append(f"Research notes:\n{state.findings}")
    if include_chain and state.causal_chain:
        parts.append(f"Causal chain:\n{state.causal_chain}")
    parts.append(f"Evidence:\n{number_evidence(state.evidence) or '(no evidence was gathered)'}")
    return "\n\n".join(parts)


def _ungrounded_list(state: ResearchState) -> str:
    return "\n".join(f"- {c.claim}" for c in state.claims if not c.grounded) or "- (none listed)"


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


# -- the final state ------------------------------------------------------------------------------


def build_final_state(state: ResearchState, *, evidence_chars: int | None = None) -> dict[str, Any]:
    """The run's result as a plain dict. `evidence_chars` caps the evidence text kept in total
    (the durable runner keeps the full trail in the artifact store and only a preview inline)."""
    per_item = None
    if evidence_chars is not None:
        per_item = max(80, evidence_chars // max(1, len(state.evidence)))
    evidence = [
        {
            "index": item.index,
            "tool": item.tool,
            "arguments": item.arguments,
            "output": item.output if per_item is None else _trim(item.output, per_item),
            "success": item.success,
            "error": item.error,
        }
        for item in state.evidence
    ]
    claims = [c.model_dump() for c in state.claims]
    if per_item is not None:
        for claim in claims:
            claim["evidence_text"] = [_trim(t, per_item) for t in claim["evidence_text"]]
    return {
        "prompt": state.prompt,
        "structured_output": state.structured_output,
        "summary": state.summary,
        "output_error": state.output_error,
        "findings": state.findings,
        "causal_chain": state.causal_chain,
        "grounding_score": state.grounding_score,
        "grounding_threshold": state.grounding_threshold,
        "grounding_method": state.grounding_method,
        "claims": claims,
        "sources": sources(state),
        "score_history": list(state.score_history),
        "replan_count": state.replan_count,
        "regeneration_count": state.regeneration_count,
        "focused_prompts": list(state.focused_prompts),
        "evidence": evidence,
        "evidence_count": len(state.evidence),
        "nodes": list(state.nodes),
        "end_reason": state.end_reason,
        "usage": {
            "input_tokens": state.usage.input_tokens,
            "output_tokens": state.usage.output_tokens,
            "total_tokens": state.usage.total_tokens,
        },
    }


def sources(state: ResearchState) -> list[str]:
    """Where the grounded claims come from: `source`/`url` fields of cited tool outputs, else
    `tool(arguments)` of the cited evidence items; in order of first citation."""
    cited: list[int] = []
    for claim in state.claims:
        for index in claim.evidence:
            if claim.grounded and index not in cited:
                cited.append(index)
    found: list[str] = []
    for index in cited:
        item = state.evidence[index - 1]
        named = _named_sources(item.output)
        if not named:
            named = [f"{item.tool}({json.dumps(item.arguments, ensure_ascii=False, default=str)})"]
        found.extend(s for s in named if s not in found)
    return found


def _named_sources(output: str) -> list[str]:
    try:
        data = json.loads(output)
    except (json.JSONDecodeError, ValueError):
        return []
    rows = data if isinstance(data, list) else [data]
    named = []
    for row in rows:
        if isinstance(row, dict):
            source = row.get("source") or row.get("url")
            if isinstance(source, str) and source:
                location = row.get("location")
                named.append(f"{source}#{location}" if location else source)
    return named


# -- scripted models for tests and benchmarks -----------------------------------------------------


def node_of_request(messages: Sequence[Message]) -> str:
    """Which research node sent a model request (for `ScriptedModel(responder=...)` in tests):
    one of NODES; requests of the execute agent return `"execute"`."""
    system = next((m.content for m in messages if m.role == "system"), "")
    for node, prompt in NODE_PROMPTS.items():
        if system == prompt:
            return node
    return "execute"
