"""Grounding: split an answer into claims and judge each against the evidence a run gathered.

Two judges:

- `ground_claims` (the claim-level judge): per claim, the evidence passages that match it best,
  one yes/no question to the judge model scored from its token probabilities (or its generated
  verdict where a provider has none), deterministic checks (numbers, names, negation, swapped
  roles, unsupported content), a calibrated threshold, and citations quoted verbatim. The
  findings right at least 95 % of the time on the benchmark (a number the passages lack,
  swapped roles, an inserted negation) are vetoes the model cannot outvote. Evidence written
  as code or tables is read as statements too (`sleuth.grounding.facts`: a signature's
  keyword defaults, comments, table rows with their header), and sentences are cut by pysbd
  (`sleuth.grounding.sentences`).
- `judge_claims` (the former batched judge): all claims in one request against the numbered
  evidence, with a lexical fallback. The research graph and agents use `ground_claims`; this
  stays as the benchmark's baseline.

`python -m bench.grounding` measures both; `docs/benchmarks.md` has the latest numbers.
"""

from sleuth.grounding.batched import (
    JUDGE_INSTRUCTIONS,
    JUDGE_SCHEMA,
    judge_claims,
    lexical_verdict,
    number_evidence,
    parse_judge_output,
)
from sleuth.grounding.calibration import Calibration, calibration_for
from sleuth.grounding.checks import CHECKS, CheckFinding, CheckReport, run_checks
from sleuth.grounding.claims import content_words, split_claims
from sleuth.grounding.judge import ground_claims
from sleuth.grounding.passages import Passage, split_passages
from sleuth.grounding.verdicts import Citation, ClaimVerdict, GroundingReport

__all__ = [
    "CHECKS",
    "JUDGE_INSTRUCTIONS",
    "JUDGE_SCHEMA",
    "Calibration",
    "CheckFinding",
    "CheckReport",
    "Citation",
    "ClaimVerdict",
    "GroundingReport",
    "Passage",
    "calibration_for",
    "content_words",
    "ground_claims",
    "judge_claims",
    "lexical_verdict",
    "number_evidence",
    "parse_judge_output",
    "run_checks",
    "split_claims",
    "split_passages",
]
