"""Text helpers shared by the stores: tokenising for BM25, and cosine similarity."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, underscore)."""
    return _WORD.findall(text.lower())


BM25_K1 = 1.2
BM25_B = 0.75


def bm25_scores(
    query: str,
    texts: Sequence[str],
    *,
    total: int | None = None,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[float]:
    """Okapi BM25 of `query` against each text (0.0 where no query word occurs).

    Word rarity is counted over `texts`, out of `total` documents (default: `len(texts)`); a store
    that passes only the texts containing a query word gives its full document count here.
    """
    query_words = set(words(query))
    if not query_words or not texts:
        return [0.0] * len(texts)
    tokenised = [Counter(words(text)) for text in texts]
    lengths = [sum(counts.values()) for counts in tokenised]
    average_length = (sum(lengths) / len(lengths)) or 1.0
    total = max(total or 0, len(texts))
    idf = {}
    for word in query_words:
        containing = sum(1 for counts in tokenised if word in counts)
        idf[word] = math.log(1 + (total - containing + 0.5) / (containing + 0.5))
    scores = []
    for counts, length in zip(tokenised, lengths, strict=True):
        score = 0.0
        for word in query_words:
            frequency = counts.get(word, 0)
            if frequency:
                score += (
                    idf[word]
                    * frequency
                    * (k1 + 1)
                    / (frequency + k1 * (1 - b + b * length / average_length))
                )
        scores.append(score)
    return scores


def cosine_scores(query: Sequence[float], matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of `query` against each row of `matrix` (zero rows score 0)."""
    return unit_rows_cosine(query, unit_rows(matrix) if matrix.size else matrix)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """`matrix` with every row scaled to length 1 (zero rows stay zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def unit_rows_cosine(query: Sequence[float], unit_matrix: np.ndarray) -> np.ndarray:
    """Cosine similarity of `query` against rows already scaled by `unit_rows`."""
    vector = np.asarray(query, dtype=np.float32)
    if unit_matrix.size == 0:
        return np.zeros(0, dtype=np.float32)
    if unit_matrix.shape[1] != vector.shape[0]:
        raise ValueError(
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
