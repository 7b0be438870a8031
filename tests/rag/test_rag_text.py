"""Query words and phrases for text ranking, and near-duplicate passages."""

from __future__ import annotations

import pytest

from sleuth.rag.text import near_duplicates, query_phrases, query_words


def test_question_words_are_left_out_while_two_others_remain() -> None:
    assert query_words("What does the from clause do?") == ["the", "from", "clause"]
    assert query_words("What is the purpose of is?") == ["is", "the", "of", "is"]
    # Fewer than two words would be left: the query keeps its own.
    assert query_words("how to") == ["how", "to"]
    assert query_words("What does it do?") == ["what", "does", "it", "do"]


def test_phrases_are_adjacent_words_without_question_words() -> None:
    assert query_phrases("What does the from clause do?") == ["from clause", "the from"]
    assert query_phrases("raise") == []


def test_near_duplicates_share_most_of_the_shorter_text() -> None:
    text = " ".join(f"word{i}" for i in range(40))
    assert near_duplicates(text, "Heading. " + text[:-40])
    assert near_duplicates(text, text)
    assert not near_duplicates(text, " ".join(f"other{i}" for i in range(40)))
    # A quarter in common is not enough.
    assert not near_duplicates(text, " ".join(text.split()[:10] + [f"x{i}" for i in range(30)]))


def test_one_bm25_scores_stores_and_grounding_passages() -> None:
    """`BM25Index` is the one Okapi BM25: `bm25_scores` (the stores) and `PassageIndex.bm25`
    (grounding) both score with it."""
    import math
    from collections import Counter

    from sleuth.grounding.passages import Passage, PassageIndex
    from sleuth.rag.text import BM25Index, bm25_scores

    texts = ["alpha beta beta", "beta gamma", "delta"]
    index = BM25Index([Counter(text.split()) for text in texts])
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # "beta" is in 2 of 3 documents
    average = 6 / 3
    expected = [
        idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * n / average)) for f, n in ((2, 3), (1, 2))
    ]
    assert index.scores({"beta"}) == pytest.approx([*expected, 0.0])
    assert bm25_scores("beta", texts) == pytest.approx(index.scores({"beta"}))
    # Out of 100 documents (a store passing only the matching ones), "beta" is rare.
    assert bm25_scores("beta", texts, total=100)[0] > index.scores({"beta"})[0]
    passages = [
        Passage(
            evidence=i,
            tool="search",
            source="",
            location="",
            text=text,
            document_location="",
            row=None,
            start=0,
        )
        for i, text in enumerate(texts)
    ]
    grounding = PassageIndex(passages)
    assert grounding.bm25("beta [1]") == pytest.approx(BM25Index(grounding.counts).scores({"beta"}))
