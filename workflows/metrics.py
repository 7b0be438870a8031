"""Sleuth's own metrics, recorded by workflows through `workflow.metric_meter()` (replay-safe:
nothing is recorded while a history replays). A worker started with `SLEUTH_METRICS_PORT`
exports them with the Temporal SDK's metrics on one Prometheus endpoint
(`sleuth.workers.telemetry.metrics_runtime`).

| metric | kind | labels |
| --- | --- | --- |
| `sleuth_runs` | counter | `kind` (research, agent), `name`, `end_reason` |
| `sleuth_grounding_score` | histogram (0–1) | `kind`, `name` |
| `sleuth_tokens` | counter | `kind`, `name` |
| `sleuth_run_cost_usd` | histogram (USD per finished run) | `kind`, `name` |
| `sleuth_reviews` | counter | `kind` (plan, summary, tool), `decision` |
| `sleuth_tool_errors` | counter (recorded by activities) | `tool`, `error` |
"""

from __future__ import annotations

from temporalio import workflow

GROUNDING_BUCKETS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
COST_BUCKETS = [0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 50.0]
HISTOGRAM_BUCKETS = {
    "sleuth_grounding_score": GROUNDING_BUCKETS,
    "sleuth_run_cost_usd": COST_BUCKETS,
}
"""Bucket boundaries for the Prometheus exporter (the SDK's defaults suit durations, not these)."""


def record_tokens(kind: str, name: str, tokens: int) -> None:
    """Count `tokens` just spent by a run of `kind` named `name`."""
    if tokens > 0:
        counter = workflow.metric_meter().create_counter(
            "sleuth_tokens", "Model tokens spent by Sleuth runs", "tokens"
        )
        counter.add(tokens, {"kind": kind, "name": name})


def record_grounding(kind: str, name: str, score: float) -> None:
    histogram = workflow.metric_meter().create_histogram_float(
        "sleuth_grounding_score", "Grounding score of each grounding eval", "ratio"
    )
    histogram.record(score, {"kind": kind, "name": name})


def record_run_end(kind: str, name: str, end_reason: str, cost_usd: float) -> None:
    """Count a finished run by why it ended, and record what it cost."""
    meter = workflow.metric_meter()
    labels = {"kind": kind, "name": name}
    meter.create_counter("sleuth_runs", "Finished Sleuth runs by end reason", "runs").add(
        1, {**labels, "end_reason": end_reason}
    )
    meter.create_histogram_float(
        "sleuth_run_cost_usd", "What each finished run cost at the models' prices", "usd"
    ).record(cost_usd, labels)


def record_review(kind: str, decision: str) -> None:
    workflow.metric_meter().create_counter(
        "sleuth_reviews", "Reviews decided, by kind and decision", "reviews"
    ).add(1, {"kind": kind, "decision": decision})
