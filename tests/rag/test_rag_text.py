"""Query words and phrases for text ranking, and near-duplicate passages."""

from __future__ import annotations

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
