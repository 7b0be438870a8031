"""The abstractive grounding set: correct summaries in other words beside hallucinated ones.

`abstractive.yaml` holds, per document of `abstractive/`, the claims of a correct summary
(`paraphrase`, or `code` when they rest on a signature, a comment or a table row) and of a
hallucinated one that reuses the document's words (labelled by error class). `groups()` turns
them into the benchmark's groups: the evidence is the document as a `read_document` tool
output, after another document of the set (a run reads more than the one that answers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
CLAIMS = HERE / "abstractive.yaml"
DOCUMENTS = HERE / "abstractive"
SUPPORTED = ("paraphrase", "code")
UNSUPPORTED = ("entity", "predicate", "circumstance", "negation", "roles", "addition")


def groups() -> list[dict[str, Any]]:
    """The set's groups, in the benchmark's shape (`id`, `kind`, `split`, `evidence`, `claims`
    with `text`, `class`, `supported`)."""
    entries = yaml.safe_load(CLAIMS.read_text(encoding="utf-8"))
    built = []
    for number, entry in enumerate(entries):
        other = entries[(number + 1) % len(entries)]
        evidence = [
            _read(1, other["document"]),
            _read(2, entry["document"]),
        ]
        claims = []
        for label, texts in entry["claims"].items():
            if label not in SUPPORTED + UNSUPPORTED:
                raise ValueError(f"{entry['id']}: unknown label {label!r}")
            claims += [
                {"text": text, "class": label, "supported": label in SUPPORTED} for text in texts
            ]
        built.append(
            {
                "id": entry["id"],
                "kind": "abstractive",
                "split": entry["split"],
                "evidence": evidence,
                "claims": claims,
            }
        )
    return built


def _read(index: int, name: str) -> dict[str, Any]:
    return {
        "index": index,
        "tool": "read_document",
        "arguments": {"name": name},
        "output": (DOCUMENTS / name).read_text(encoding="utf-8"),
    }
