"""Text helpers shared by the stores: tokenising for BM25, and cosine similarity."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Collection, Sequence

import numpy as np

from sleuth.runtime.errors import InvalidSettingError

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, underscore)."""
    return _WORD.findall(text.lower())


QUESTION_WORDS = frozenset(
    {"what", "which", "who", "whom", "whose", "why", "how", "does", "do", "did", "purpose"}
)
"""Words that frame a question ("what does ...", "how do ...", "the purpose of ...") rather than
name what it is about. Reference text seldom asks questions, so these words are rare in it, and
BM25 gives a rare word a high weight: a search for "What is the purpose of the from clause in a
raise statement?" ranked a passage on name binding first, for holding "purpose" once."""


def query_words(query: str) -> list[str]:
    """The words of a search query that text ranking should weigh: its words without the
    question words (`QUESTION_WORDS`), unless fewer than two others would remain (a search for
    "how to" keeps its words)."""
    found = words(query)
    kept = [word for word in found if word not in QUESTION_WORDS]
    return kept if len(kept) >= 2 else found


def query_phrases(query: str) -> list[str]:
    """Each two adjacent words of a search query, question words aside ("from clause", "raise
    statement"): a store that can match phrases ranks a passage that holds the words together, as
    the query has them, above one that holds them apart."""
    found = words(query)
    return sorted(
        {
            f"{first} {second}"
            for first, second in zip(found, found[1:], strict=False)
            if first not in QUESTION_WORDS and second not in QUESTION_WORDS
        }
    )


def shingles(text: str, size: int = 5) -> set[tuple[str, ...]]:
    """The runs of `size` consecutive words of `text` (one run, of all its words, when shorter)."""
    found = words(text)
    return {tuple(found[i : i + size]) for i in range(max(1, len(found) - size + 1))}


NEAR_DUPLICATE_SHARE = 0.5
"""Two passages are near duplicates when half the five-word runs of the shorter are in the other:
the same section stored twice with different chunk boundaries (a page and its chapter)."""


def near_duplicates(first: str, second: str) -> bool:
    """Whether two passages are mostly the same text (`NEAR_DUPLICATE_SHARE`)."""
    a, b = shingles(first), shingles(second)
    return len(a & b) >= NEAR_DUPLICATE_SHARE * max(1, min(len(a), len(b)))


BM25_K1 = 1.2
BM25_B = 0.75


class BM25Index:
    """Okapi BM25 over tokenised documents: built once, scored for many queries. The one BM25 of
    the stores (`bm25_scores`) and of grounding (`sleuth.grounding.PassageIndex`).

    Word rarity is counted over `documents`, out of `total` documents (default: as many as there
    are); a store that passes only the texts containing a query word gives its full count here.
    """

    def __init__(self, documents: Sequence[Counter[str]], *, total: int | None = None) -> None:
        self.documents = documents
        self.lengths = [sum(counts.values()) for counts in documents]
        self.average_length = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        self.total = max(total or 0, len(documents))
        self._idf: dict[str, float] = {}

    def idf(self, word: str) -> float:
        """How rare `word` is: log(1 + (N - n + 0.5) / (n + 0.5)) for n of N documents."""
        found = self._idf.get(word)
        if found is None:
            containing = sum(1 for counts in self.documents if word in counts)
            found = math.log(1 + (self.total - containing + 0.5) / (containing + 0.5))
            self._idf[word] = found
        return found

    def scores(
        self, terms: Collection[str], *, k1: float = BM25_K1, b: float = BM25_B
    ) -> list[float]:
        """Each document's BM25 score for `terms` (0.0 where none occurs)."""
        average_length = self.average_length or 1.0
        idf = {term: self.idf(term) for term in terms}
        scores = []
        for counts, length in zip(self.documents, self.lengths, strict=True):
            score = 0.0
            for term in terms:
                frequency = counts.get(term, 0)
                if frequency:
                    score += (
                        idf[term]
                        * frequency
                        * (k1 + 1)
                        / (frequency + k1 * (1 - b + b * length / average_length))
                    )
            scores.append(score)
        return scores


def bm25_scores(
    query: str,
    texts: Sequence[str],
    *,
    total: int | None = None,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[float]:
    """Okapi BM25 of `query`'s words (`query_words`) against each text (0.0 where no query word
    occurs); `total` as for `BM25Index`."""
    wanted = set(query_words(query))
    if not wanted or not texts:
        return [0.0] * len(texts)
    index = BM25Index([Counter(words(text)) for text in texts], total=total)
    return index.scores(wanted, k1=k1, b=b)


def cosine_scores(query: Sequence[float], matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of `query` against each row of `matrix` (zero rows score 0)."""
    return unit_rows_cosine(query, unit_rows(matrix) if matrix.size else matrix)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """`matrix` with every row scaled to length 1 (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    scaled: np.ndarray = matrix / norms
    return scaled


def unit_rows_cosine(query: Sequence[float], unit_matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of `query` against rows already scaled by `unit_rows`."""
    vector = np.asarray(query, dtype=np.float32)
    if unit_matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    if unit_matrix.shape[1] != vector.shape[0]:
        raise InvalidSettingError(
            f"query embedding has {vector.shape[0]} dimensions but the store holds "
            f"{unit_matrix.shape[1]}; embed queries with the model the store was filled with"
        )
    return unit_matrix @ (vector / (np.linalg.norm(vector) or 1.0))


def term_id(word: str) -> int:
    """A stable 32-bit id for a word (sparse-vector index); the same in every process."""
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")


def bm25_term_weights(
    text: str, *, average_length: float, k1: float = BM25_K1, b: float = BM25_B
) -> dict[int, float]:
    """BM25's term-frequency part for each word of a document, keyed by `term_id`.

    Multiplied by a word's IDF (which a store with an IDF modifier computes from its own counts)
    this is the word's BM25 contribution, with `average_length` standing in for the corpus's.
    """
    counts = Counter(words(text))
    length = sum(counts.values())
    norm = k1 * (1 - b + b * length / (average_length or 1.0))
    weights: dict[int, float] = {}
    for word, frequency in counts.items():
        key = term_id(word)
        weights[key] = weights.get(key, 0.0) + frequency * (k1 + 1) / (frequency + norm)
    return weights
