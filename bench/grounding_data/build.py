"""Build the grounding benchmark's items from the hand-written claims and their public sources.

    python -m bench.grounding_data.build [--check] [--review]

Each `claims_*.yaml` file holds groups: a fact located in a source text by an `anchor`, and claims
about it labelled by class (`verbatim` and `paraphrase` are supported; `entity`, `predicate`,
`circumstance`, `negation`, `roles` and `addition` are not). This script cuts the evidence for
every group out of the source, the way a research run would have gathered it, puts a tool call
about another kind of text before it, checks the labels that can be checked mechanically, and
writes `items.json` (evidence included, so the benchmark runs the same on any machine).
`--check` rebuilds and fails if `items.json` differs.

Sources (all read from this machine; their text ships in `items.json` under their licences):

- `python-docs`: CPython 3.11's language reference, `pydoc_data.topics` (PSF licence). Evidence
  is a `search_python_docs` result: chunks cut as `sleuth ingest --demo` cuts them.
- `debian-changelog`: `/usr/share/doc/PACKAGE/changelog.Debian.gz` of Debian 12 packages (each
  group names the licence of the package's debian/ directory). Evidence is a `read_changelog`
  output: the entry with the anchor and its neighbours.
- `apache-licence`: `/usr/share/common-licenses/Apache-2.0` (the ASF permits reproducing it).
  Evidence is a `read_licence` output: the paragraph with the anchor and its neighbours.

Checks: every anchor is found exactly once; every verbatim claim is found verbatim (quotes and
whitespace folded) in its evidence; no unsupported claim is; every group has both labels.
`--review` prints the supported claims whose content words the evidence covers least and the
unsupported ones it covers most, for a reviewer to read again. Every label was written and
reviewed by hand; paraphrases were written by hand too (no model drafted them).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from sleuth.rag.ingest import chunk_spans
from sleuth.rag.text import bm25_scores, words

HERE = Path(__file__).parent
ITEMS = HERE / "items.json"
SUPPORTED = ("verbatim", "paraphrase")
UNSUPPORTED = ("entity", "predicate", "circumstance", "negation", "roles", "addition")
PYTHON_VERSION = "3.11"
APACHE = Path("/usr/share/common-licenses/Apache-2.0")
_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": "", "”": "", '"': "", "`": "", "*": ""})
_ENTRY_HEAD = re.compile(r"^\S.*\(.*\).*;\s*urgency=", re.MULTILINE)


class BuildError(Exception):
    """A group whose anchor, evidence or labels do not check out."""


def fold(text: str) -> str:
    """Text with quotes, backticks and emphasis removed and whitespace folded (for matching)."""
    return " ".join(re.sub(r"-\n\s*", "-", text).translate(_QUOTES).split())


def split_of(group_id: str) -> str:
    """A third of the groups (by hash of the id) are the dev split; the rest are the test split."""
    return "dev" if int(hashlib.sha256(group_id.encode()).hexdigest(), 16) % 3 == 0 else "test"


def find_once(text: str, anchor: str, where: str) -> int:
    """Where `anchor` occurs in folded `text`; it must occur exactly once."""
    folded, needle = fold(text), fold(anchor)
    count = folded.count(needle)
    if count != 1:
        raise BuildError(f"anchor {anchor!r} occurs {count} times in {where}; make it unique")
    return folded.index(needle)


def python_docs_evidence(group: dict[str, Any], topics: dict[str, str]) -> list[dict[str, Any]]:
    """A search result: the chunk with the anchor, the topic's chunks that best match each claim,
    and the best chunk of each `extra` topic, ranked by BM25 against the query (at most 5)."""
    topic = group["topic"]
    text = topics[topic]
    find_once(text, group["anchor"], f"topic {topic!r}")
    spans = chunk_spans(text)
    chunks = [(topic, start, end) for start, end in spans]
    needle = fold(group["anchor"])
    chosen = [next(c for c in chunks if needle in fold(text[c[1] : c[2]]))]
    chunk_texts = [text[start:end] for _, start, end in chunks]
    for claim in all_claims(group):
        scores = bm25_scores(claim, chunk_texts)
        best = chunks[max(range(len(chunks)), key=scores.__getitem__)]
        if best not in chosen:
            chosen.append(best)
    for extra in group.get("extra", []):
        extra_text = topics[extra]
        extra_chunks = [(extra, start, end) for start, end in chunk_spans(extra_text)]
        scores = bm25_scores(group["query"], [extra_text[s:e] for _, s, e in extra_chunks])
        chosen.append(extra_chunks[max(range(len(extra_chunks)), key=scores.__getitem__)])
    chosen = chosen[:5]
    bodies = [topics[name][start:end] for name, start, end in chosen]
    scores = bm25_scores(group["query"], bodies)
    top = max(scores) or 1.0
    rows = [
        {
            "id": hashlib.sha256(f"{name}:{start}".encode()).hexdigest()[:32],
            "source": f"python-docs/{name}",
            "location": f"chars {start}-{end}",
            "score": round(score / top, 4),
            "text": body,
        }
        for (name, start, end), body, score in zip(chosen, bodies, scores, strict=True)
    ]
    rows.sort(key=lambda row: -row["score"])
    return [
        {
            "index": 1,
            "tool": "search_python_docs",
            "arguments": {"query": group["query"]},
            "output": json.dumps(rows, ensure_ascii=False),
        }
    ]


def changelog_evidence(group: dict[str, Any]) -> list[dict[str, Any]]:
    """A `read_changelog` output: the entry with the anchor and the entries either side of it."""
    package = group["package"]
    path = Path("/usr/share/doc") / package / "changelog.Debian.gz"
    if not path.is_file():
        raise BuildError(f"{path} is missing; install the Debian package {package!r}")
    text = gzip.decompress(path.read_bytes()).decode("utf-8")
    starts = [m.start() for m in _ENTRY_HEAD.finditer(text)] + [len(text)]
    entries = [text[a:b].strip("\n") for a, b in zip(starts, starts[1:], strict=False)]
    holding = [i for i, entry in enumerate(entries) if fold(group["anchor"]) in fold(entry)]
    if len(holding) != 1:
        raise BuildError(f"anchor {group['anchor']!r} is in {len(holding)} entries of {path}")
    first = max(0, holding[0] - 1)
    output = "\n\n".join(entries[first : holding[0] + 2])
    return [
        {
            "index": 1,
            "tool": "read_changelog",
            "arguments": {"package": package},
            "output": output,
        }
    ]


def licence_evidence(group: dict[str, Any]) -> list[dict[str, Any]]:
    """A `read_licence` output: the paragraph with the anchor, two before it and three after."""
    text = APACHE.read_text(encoding="utf-8")
    find_once(text, group["anchor"], str(APACHE))
    bounds = [(m.start(), m.end()) for m in re.finditer(r"\S(?:.*\S)?(?:\n[ \t]*\S.*)*", text)]
    holding = [i for i, (a, b) in enumerate(bounds) if fold(group["anchor"]) in fold(text[a:b])]
    if len(holding) != 1:
        raise BuildError(f"anchor {group['anchor']!r} spans paragraphs of {APACHE}; shorten it")
    first, last = max(0, holding[0] - 2), min(len(bounds) - 1, holding[0] + 3)
    output = text[bounds[first][0] : bounds[last][1]]
    return [
        {
            "index": 1,
            "tool": "read_licence",
            "arguments": {"name": "Apache-2.0"},
            "output": output,
        }
    ]


def all_claims(group: dict[str, Any]) -> list[str]:
    return [claim for claims in group["claims"].values() for claim in claims]


def evidence_text(evidence: list[dict[str, Any]]) -> str:
    """The text a reader of the evidence sees (a search result's chunk texts, else the output)."""
    parts = []
    for item in evidence:
        try:
            rows = json.loads(item["output"])
            parts.extend(row["text"] for row in rows)
        except (json.JSONDecodeError, TypeError):
            parts.append(item["output"])
    return "\n\n".join(parts)


def coverage(claim: str, text: str) -> float:
    claim_words = {w for w in words(claim) if len(w) > 3}
    return len(claim_words & set(words(text))) / len(claim_words) if claim_words else 1.0


def build_group(group: dict[str, Any], kind: str, topics: dict[str, str]) -> dict[str, Any]:
    unknown = set(group["claims"]) - set(SUPPORTED) - set(UNSUPPORTED)
    if unknown:
        raise BuildError(f"group {group['id']}: unknown classes {sorted(unknown)}")
    if not set(group["claims"]) & set(SUPPORTED) or not set(group["claims"]) & set(UNSUPPORTED):
        raise BuildError(f"group {group['id']} needs both supported and unsupported claims")
    if kind == "python-docs":
        evidence = python_docs_evidence(group, topics)
        source = f"pydoc_data.topics[{group['topic']!r}] (Python {PYTHON_VERSION})"
        licence = "PSF-2.0"
    elif kind == "debian-changelog":
        evidence = changelog_evidence(group)
        source = f"/usr/share/doc/{group['package']}/changelog.Debian.gz (Debian 12)"
        licence = group["licence"]
    else:
        evidence = licence_evidence(group)
        source = str(APACHE)
        licence = "Apache-2.0 (licence text, reproduced verbatim)"
    seen = fold(evidence_text(evidence))
    claims = []
    for label in (*SUPPORTED, *UNSUPPORTED):
        for text in group["claims"].get(label, []):
            verbatim_in_evidence = fold(text).rstrip(".") in seen
            if label == "verbatim" and not verbatim_in_evidence:
                raise BuildError(f"group {group['id']}: verbatim claim not in evidence: {text!r}")
            if label in UNSUPPORTED and verbatim_in_evidence:
                raise BuildError(f"group {group['id']}: unsupported claim is verbatim: {text!r}")
            claims.append({"text": text, "class": label, "supported": label in SUPPORTED})
    return {
        "id": group["id"],
        "kind": kind,
        "split": split_of(group["id"]),
        "source": source,
        "licence": licence,
        "evidence": evidence,
        "claims": claims,
    }


def build() -> dict[str, Any]:
    if sys.version_info[:2] != (3, 11):
        raise BuildError(
            f"the python-docs evidence comes from Python {PYTHON_VERSION}'s pydoc_data; "
            f"run this with Python {PYTHON_VERSION} (this is {sys.version.split()[0]})"
        )
    from pydoc_data.topics import topics

    groups = []
    for path, kind in (
        (HERE / "claims_python_docs.yaml", "python-docs"),
        (HERE / "claims_debian_changelogs.yaml", "debian-changelog"),
        (HERE / "claims_apache_licence.yaml", "apache-licence"),
    ):
        for group in yaml.safe_load(path.read_text(encoding="utf-8")):
            groups.append(build_group(group, kind, topics))
    ids = [g["id"] for g in groups]
    if len(set(ids)) != len(ids):
        raise BuildError("group ids must be unique")
    add_distractors(groups)
    return {"version": 1, "groups": groups}


def add_distractors(groups: list[dict[str, Any]]) -> None:
    """Put a tool call of another kind of text before each group's own evidence, as a research
    trail holds calls that answer other parts of the question (other kinds, so no label can
    change because of it)."""
    own = [list(group["evidence"]) for group in groups]
    for position, group in enumerate(groups):
        others = [i for i, other in enumerate(groups) if other["kind"] != group["kind"]]
        pick = others[int(hashlib.sha256(group["id"].encode()).hexdigest(), 16) % len(others)]
        distractor = dict(own[pick][0], index=1)
        group["evidence"] = [distractor] + [
            dict(item, index=number) for number, item in enumerate(own[position], start=2)
        ]


def review(data: dict[str, Any]) -> None:
    """Print each claim's content-word coverage by its evidence, lowest first per label."""
    rows = []
    for group in data["groups"]:
        seen = evidence_text(group["evidence"])
        for claim in group["claims"]:
            rows.append((claim["supported"], coverage(claim["text"], seen), group["id"], claim))
    print("supported claims the evidence covers least:")
    for _, share, group_id, claim in sorted((r for r in rows if r[0]), key=lambda r: r[1])[:12]:
        print(f"  {share:.2f} {group_id} [{claim['class']}] {claim['text']}")
    print("unsupported claims the evidence covers most:")
    unsupported = sorted((r for r in rows if not r[0]), key=lambda r: -r[1])
    for _, share, group_id, claim in unsupported[:12]:
        print(f"  {share:.2f} {group_id} [{claim['class']}] {claim['text']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if items.json is stale")
    parser.add_argument("--review", action="store_true", help="print claims worth a second look")
    args = parser.parse_args()
    try:
        data = build()
    except BuildError as exc:
        raise SystemExit(f"error: {exc}") from exc
    rendered = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    if args.review:
        review(data)
    if args.check:
        if not ITEMS.is_file() or ITEMS.read_text(encoding="utf-8") != rendered:
            raise SystemExit(f"error: {ITEMS} is stale; run python -m bench.grounding_data.build")
        print(f"{ITEMS} is up to date")
        return
    ITEMS.write_text(rendered, encoding="utf-8")
    claims = [c for g in data["groups"] for c in g["claims"]]
    by_split = {
        split: sum(len(g["claims"]) for g in data["groups"] if g["split"] == split)
        for split in ("dev", "test")
    }
    print(
        f"wrote {ITEMS}: {len(data['groups'])} groups, {len(claims)} claims "
        f"({sum(c['supported'] for c in claims)} supported); dev {by_split['dev']}, "
        f"test {by_split['test']}"
    )


if __name__ == "__main__":
    main()
