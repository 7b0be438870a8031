"""Text helpers shared by the stores: tokenising for BM25, and cosine similarity."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, underscore)."""
    return _WORD.findall(text.lower())


def bm25_scores(
    query: str, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """Okapi BM25 of `query` against each text (0.0 where no query word occurs)."""
    query_words = set(words(query))
    if not query_words or not texts:
        return [0.0] * len(texts)
    tokenised = [Counter(words(text)) for text in texts]
    lengths = [sum(counts.values()) for counts in tokenised]
    average_length = (sum(lengths) / len(lengths)) or 1.0
    total = len(texts)
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
