"""Claims: an answer split into sentence-sized statements, and the words that carry their content."""

from __future__ import annotations

import re

from sleuth.grounding.sentences import prose_sentences

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "more",
        "most",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "out",
        "over",
        "she",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "under",
        "up",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "also",
        "about",
        "after",
        "all",
        "any",
        "because",
        "before",
        "both",
        "each",
        "few",
        "further",
        "here",
        "just",
        "only",
        "other",
        "own",
        "same",
        "very",
    ]
)
WORD = re.compile(r"[a-z0-9][a-z0-9.\-%$]*[a-z0-9%]|[a-z0-9]", re.IGNORECASE)
CITATION = re.compile(r"\[\s*\d+(?:\s*[,;\-–]\s*\d+)*\s*\]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
"""A sentence's end followed by a capital: the research nodes' fallback split of a rewritten
answer. Claims themselves are cut by pysbd (`prose_sentences`), which knows abbreviations."""
BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
"""A list item's marker at the start of a line (`- `, `* `, `• `, `1. `, `2) `)."""


def split_claims(text: str, *, min_words: int = 4) -> list[str]:
    """Split prose or bullet lists into sentence-sized claims; headings, fragments and lone tokens
    (a field name, a path) are skipped. Sentences are cut by pysbd, so "e.g.", "Dr." or
    "Oct. 2023" stay inside their sentence."""
    claims: list[str] = []
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        line = BULLET.sub("", line)
        for sentence in prose_sentences(line):
            sentence = sentence.strip()
            # One token is no claim, however many words it joins: a writer's stray field name
            # (`related_questions_and_answers`), a path or a URL.
            if len(WORD.findall(sentence)) >= min_words and len(sentence.split()) > 1:
                claims.append(sentence)
    return claims


def without_citation_marks(text: str) -> str:
    """`text` without `[n]` citation marks, its space normalised (`grew 12% [1].` -> `grew 12%.`)."""
    cleaned = " ".join(CITATION.sub(" ", text).split())
    return re.sub(r"\s+([.,;:!?])", r"\1", cleaned)


def content_words(text: str) -> set[str]:
    """The lower-cased words of `text` that are not stopwords (numbers kept whole: `3.10`, `50%`)."""
    return {
        w.lower().strip(".")
        for w in WORD.findall(text)
        if w.lower() not in STOPWORDS and len(w) > 1
    }


_IRREGULAR_FORMS = """
arise arose arisen|awake awoke awoken|be was were been|bear bore borne born|beat beaten|
become became|begin began begun|bend bent|bet|bind bound|bite bit bitten|bleed bled|blow blew
blown|break broke broken|bring brought|build built|burn burnt|buy bought|catch caught|choose
chose chosen|come came|cost|cut|deal dealt|dig dug|do did done does|draw drew drawn|drink drank
drunk|drive drove driven|eat ate eaten|fall fell fallen|feed fed|feel felt|fight fought|find
found|fly flew flown|forbid forbade forbidden|forget forgot forgotten|freeze froze frozen|get
got gotten|give gave given|go went gone goes|grow grew grown|hang hung|have has had|hear heard|
hide hid hidden|hit|hold held|hurt|keep kept|know knew known|lay laid|lead led|leave left|lend
lent|let|lose lost|make made|mean meant|meet met|pay paid|put|quit|read|ride rode
ridden|ring rang rung|rise rose risen|run ran|say said|see saw seen|seek sought|sell sold|send
sent|set|shake shook shaken|shine shone|shoot shot|show showed shown|shrink shrank shrunk|shut|
sing sang sung|sink sank sunk|sit sat|sleep slept|slide slid|speak spoke spoken|spend spent|
split|spread|stand stood|steal stole stolen|stick stuck|strike struck|swear swore sworn|sweep
swept|swim swam swum|take took taken|teach taught|tear tore torn|tell told|think thought|throw
threw thrown|understand understood|wake woke woken|wear wore worn|win won|write wrote written
"""
IRREGULAR_BASE: dict[str, str] = {
    form: forms.split()[0]
    for forms in _IRREGULAR_FORMS.replace("\n", " ").split("|")
    if forms.split()
    for form in forms.split()
}
"""Each inflected form of a common English irregular verb mapped to its base form (`grew` ->
`grow`), so a crude prefix stem matches a question's `grow` with an answer's `grew`."""

STEM_CHARS = 5
"""Words are compared by their first `STEM_CHARS` letters (`growth`, `growing` -> `growt`, `growi`
differ; `markets`, `market` agree)."""


def stem(word: str) -> str:
    """A crude stem of a lower-cased word: an irregular verb's base form (`IRREGULAR_BASE`),
    then its first `STEM_CHARS` letters."""
    return IRREGULAR_BASE.get(word, word)[:STEM_CHARS]
