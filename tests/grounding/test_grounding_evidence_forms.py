"""The judge reads evidence as people write it: sentences by pysbd, code and tables as facts,
whole-sentence quotes, claims combining two passages, and vetoes the model cannot outvote."""

from __future__ import annotations

import json

from sleuth.agent.state import EvidenceItem
from sleuth.grounding import ground_claims, split_claims
from sleuth.grounding.calibration import VETO_CAP, calibration_for
from sleuth.grounding.checks import run_checks
from sleuth.grounding.facts import read_facts
from sleuth.grounding.judge import quote
from sleuth.grounding.passages import PassageIndex, split_passages
from sleuth.grounding.scoring import judge_messages
from sleuth.grounding.sentences import sentence_spans, split_sentences

TEXTWRAP = (
    "def fill(text, width=70, **kwargs):\n"
    '    """Fill a single paragraph of text, returning a new string.\n'
    "\n"
    "    Reformat the single paragraph in 'text' to fit in lines of no more\n"
    "    than 'width' columns, and return a new string containing the entire\n"
    '    wrapped paragraph."""\n'
    "    w = TextWrapper(width=width, **kwargs)\n"
    "    return w.fill(text)\n"
)
HEAPQ = (
    "heap = []            # creates an empty heap\n"
    "heappush(heap, item) # pushes a new item on the heap\n"
    "heapify(x)           # transforms list into a heap, in-place, in linear time\n"
)
TABLE = (
    "| Compressor name         | Ratio | Compression| Decompress.|\n"
    "| ---------------         | ------| -----------| ---------- |\n"
    "| **zstd 1.5.1 -1**       | 2.887 |   530 MB/s |  1700 MB/s |\n"
    "| [zlib] 1.2.11 -1        | 2.743 |    95 MB/s |   400 MB/s |\n"
)


def item(output: str, index: int = 1, name: str = "doc") -> EvidenceItem:
    return EvidenceItem(index=index, tool="read_document", arguments={"name": name}, output=output)


def test_abbreviations_dates_and_decimals_do_not_cut_a_claim() -> None:
    answer = (
        "Use a context manager, e.g. a with statement, to close files. Dr. Smith released "
        "version 3.10 in Oct. 2023 for all users. It reads `.zst`, `.gz` and `.xz` files."
    )
    assert split_claims(answer) == [
        "Use a context manager, e.g. a with statement, to close files.",
        "Dr. Smith released version 3.10 in Oct. 2023 for all users.",
        "It reads `.zst`, `.gz` and `.xz` files.",
    ]


def test_wrapped_prose_is_one_sentence_and_code_is_cut_at_lines() -> None:
    prose = "If an\n   exception caused the suite to be exited, its type is passed. Otherwise not."
    assert split_sentences(prose) == [
        "If an\n   exception caused the suite to be exited, its type is passed.",
        "Otherwise not.",
    ]
    assert split_sentences(HEAPQ) == HEAPQ.strip().splitlines()
    assert all(HEAPQ[a:b].strip() == HEAPQ[a:b] for a, b in sentence_spans(HEAPQ))


def test_signatures_comments_and_table_rows_become_facts() -> None:
    facts = [f.text for f in read_facts(TEXTWRAP + HEAPQ + "\n" + TABLE)]
    assert "The default width of fill() is 70." in facts
    assert "heapify() transforms list into a heap, in-place, in linear time." in facts
    assert (
        "Compressor name zstd 1.5.1 -1: Ratio 2.887, Compression 530 MB/s, Decompress. 1700 MB/s."
    ) in facts
    # A call passing values is no signature, and a comment above a definition is about it.
    assert not any("default width of TextWrapper" in f for f in facts)
    assert [f.text for f in read_facts("# runs in linear time\ndef radix(items, base=10):")] == [
        "radix() runs in linear time.",
        "The default base of radix() is 10.",
    ]
    csv = read_facts("version,codename,release\n12,Bookworm,2023-06-10\n")
    assert [f.text for f in csv] == ["version 12: codename Bookworm, release 2023-06-10."]
    assert read_facts("Y(width=70, ...)")[0].text == "The default width of Y() is 70."


def test_a_claim_stated_in_code_is_covered_and_quoted_by_its_line() -> None:
    passages = split_passages([item(TEXTWRAP), item(HEAPQ, 2)])
    claim = "The default width of fill() is 70 columns."
    report = run_checks(claim, passages, "\n".join(p.readable for p in passages))
    assert report.coverage >= 0.8 and not report.fired, report
    assert quote(claim, passages).quote == "def fill(text, width=70, **kwargs):"
    linear = quote("heapify() runs in linear time.", passages)
    assert linear.quote == HEAPQ.splitlines()[2]
    # The judge is told the fact in words, next to the passage's own text.
    prompt = judge_messages(claim, passages[:1])[1].content
    assert "(In words: The default width of fill() is 70." in prompt


def test_a_quote_is_a_whole_sentence_or_line_never_a_fragment() -> None:
    text = "t.\nThe heapify function rebuilds the whole list as a heap, in place, over every item."
    (passage,) = split_passages([item(text)])
    cited = quote("heapify is fast.", [passage])
    assert cited.quote.startswith("The heapify function") and cited.quote.endswith("item.")


def test_a_claim_combining_two_facts_is_judged_against_both_passages() -> None:
    evidence = [
        item("The with statement calls __exit__() when its block ends.", 1, "with"),
        item("A finally clause always runs, even after a return statement.", 2, "try"),
        item("Unrelated text about packaging wheels and sdists.", 3, "packaging"),
    ]
    index = PassageIndex(split_passages(evidence))
    claim = "The with statement calls __exit__() at the end, and a finally clause always runs."
    _, shown = index.select_and_focus(claim, top=3)
    assert {p.evidence for p in shown} == {1, 2}


async def test_a_veto_holds_however_sure_the_model_is() -> None:
    evidence = [item(TEXTWRAP)]
    report = await ground_claims(["The default width of fill() is 80."], evidence, None)
    assert report.claims[0].checks == ["numbers"]
    calibration = calibration_for("local:qwen2.5-coder-1.5b", "logprobs")
    for finding in ("numbers", "swapped_roles"):
        features = {finding: 1.0, "coverage": 1.0}
        assert calibration.combine(0.999, features, 0.999) <= VETO_CAP
    assert calibration.combine(0.999, {"coverage": 1.0}, 0.999) > calibration.threshold
    assert json.dumps(report.claims[0].features)


def test_an_inserted_negation_is_a_veto_and_a_moved_one_is_not() -> None:
    evidence = [item("If the return value was true, the exception is suppressed.")]
    passages = split_passages(evidence)
    inserted = run_checks(
        "If the return value was true, the exception is not suppressed.", passages
    )
    assert {"negation", "inserted_negation"} <= set(inserted.fired)
    calibration = calibration_for("local:qwen2.5-coder-1.5b", "logprobs")
    assert calibration.combine(0.99, inserted.features(), 0.99) <= VETO_CAP
    moved = run_checks(
        "Unless the return value was false, the exception is suppressed.",
        split_passages([item("If the return value was not false, the exception is suppressed.")]),
    )
    assert "inserted_negation" not in moved.fired


def test_a_long_paragraph_is_cut_into_the_sentences_pysbd_finds_in_it_whole() -> None:
    """A paragraph longer than pysbd's window is read window by window (pysbd's time grows with
    the square of its input), and still cut exactly where pysbd cuts the whole of it."""
    import pysbd

    from sleuth.grounding.sentences import PYSBD_WINDOW_CHARS, prose_sentences

    unit = (
        "Dr. Smith met e.g. Mr. Jones in Oct. 2023 at 3.10 pm. The CRM market grew 12 percent. "
        "Was it the U.S. office? It was, said the report (see p. 4). "
    )
    paragraph = unit * (3 * PYSBD_WINDOW_CHARS // len(unit) + 1)
    whole = [s.strip() for s in pysbd.Segmenter(language="en", clean=False).segment(paragraph)]
    assert prose_sentences(paragraph) == [s for s in whole if s]


def test_a_megabyte_line_is_prose_and_is_split() -> None:
    """One line of a megabyte (a tool's output without line breaks) is prose: the patterns for
    code and table rows are not tried on it (two of them backtracked over a whole line)."""
    from sleuth.grounding.sentences import line_kind, split_sentences

    line = "word " * 200_000
    assert line_kind(line) == "prose"
    assert line_kind("Name    Version    Size") == "table"  # aligned columns still count
    assert split_sentences("x = 1  # one\n" * 3) == ["x = 1  # one"] * 3
