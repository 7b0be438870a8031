"""The question's own parts: the clauses a user asked, as opposed to the planner's sub-questions.

The planner may split a question into more sub-questions than it asks (or fewer); those are
research aids, each researched by an execute step. What a report must answer is what the user
asked, so coverage and the end state count the question's own clauses (`question_parts`): a
language-level split at question marks and sentence ends, at enumerations (`1) … 2) …`,
`(a) … (b) …`) and where a coordinated clause starts a new question (`…, and how does …`,
`… or why …`). Each sub-question is mapped to the part it researches (`part_aids`); one that
maps to no part helps the research but can never make a report "uncovered".

After each grounding eval every part is `answered` (a grounded claim states it), `partial` (a
grounded claim states some of it) or `not_stated`; a part that asks for a comparison or a reason
(`asks_synthesis`) is answered only by a claim that itself compares or explains
(`states_relation`), never by a sentence that merely shares its words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from sleuth.agent.state import EvidenceItem
from sleuth.grounding import content_words
from sleuth.grounding.claims import stem
from sleuth.research.plan import COVERAGE_SHARE, coverage
from sleuth.research.report import normalise
from sleuth.research.state import ClaimRecord, QuestionPart, ResearchState, SubQuestionCoverage

MAX_PARTS = 8
"""The most parts a question is split into (the rest stays with the last part)."""

_QUESTION_WORDS = (
    "how|why|what|which|when|where|who|whom|whose|whether|is|are|was|were|does|do|did|can|"
    "could|should|would|will|has|have|had|may|might|must"
)
_SENTENCE = re.compile(r"(?<=[?!;])\s+|(?<=\.)\s+(?=[A-Z(\"'])")
"""Question marks, exclamation marks and semicolons always end a part; a full stop only before a
capital (so `e.g. the` and `3.10` stay whole), and not after an abbreviation (`_ABBREVIATION`)."""
_ABBREVIATION = re.compile(r"(?:^|\s)(?:[A-Za-z]\.|[A-Za-z]+\.[A-Za-z.]*\.|[A-Z][a-z]{0,3}\.)$")
"""The end of a word that is an abbreviation, not a sentence's end: one letter (`J.`), dotted
letters (`e.g.`, `U.S.`), or a capitalised word of at most four letters (`Dr.`, `Oct.`,
`Prof.`)."""
_TRAILING_CONJUNCTION = re.compile(r"[\s,]+(?:and|or|but)$", re.IGNORECASE)
_ENUMERATION = re.compile(
    r"(?:^|\s)(?:\(\s*(?:\d{1,2}|[a-h]|[ivx]{1,4})\s*\)|(?:\d{1,2}|[a-h])\))\s+"
)
"""`(1)`, `(a)`, `(ii)`, `1)`, `a)` before an item of an enumeration."""
_COORDINATED = re.compile(
    rf"(?:,\s*(?:and|or|but)?|\s+(?:and|or|but)(?:\s+also)?)\s+(?=(?:{_QUESTION_WORDS})\b)",
    re.IGNORECASE,
)
"""A comma or a conjunction that starts a new question: `…, and how …`, `… or why …`, `…, what …`.
Only before a question word: `cats and dogs` and `compare X and Y` stay one part."""
_SUBORDINATE = re.compile(
    r"^(?:when|whenever|if|while|after|before|once|unless|although|though|since|given|"
    rf"assuming)\s+(?!(?:{_QUESTION_WORDS})\b)",
    re.IGNORECASE,
)
"""A leading clause that sets a condition (`When the body raises an exception, what …`), not a
question of its own (`When was it accepted?` is one: a question word follows)."""
_LEADING_CONJUNCTION = re.compile(r"^(?:and|or|but|also|then)\s+", re.IGNORECASE)
_COMPARISON = re.compile(
    r"\b(?:compar\w*|contrast\w*|differ\w*|versus|vs\.?|better|worse|faster|slower|advantages?|"
    r"disadvantages?|trade-?offs?|prefer\w*|similar\w*|relat(?:e|es|ed|ion|ionship)|"
    r"whereas|unlike|instead of|rather than)\b",
    re.IGNORECASE,
)
_REASON = re.compile(
    r"^\s*(?:and\s+|or\s+)?why\b|\b(?:reasons?|causes?|because|explain\w*|what makes|leads? to|"
    r"rationale|motivat\w*|purpose)\b",
    re.IGNORECASE,
)
_YES_NO = re.compile(
    r"^(?:is|are|was|were|does|do|did|can|could|should|would|will|has|have|had|may|might|must)\b",
    re.IGNORECASE,
)
_WH = re.compile(r"^(?:how|why|what|which|when|where|who|whom|whose|whether)\b", re.IGNORECASE)


def question_parts(question: str) -> list[str]:
    """The clauses of `question` that a complete answer must cover, in order (at least one: the
    question itself). A fragment with no content word (`and so on?`) joins the part before it."""
    text = " ".join(question.split())
    if not text:
        return []
    pieces: list[tuple[str, bool]] = []
    for sentence in _sentences(text):
        asked = sentence.rstrip().endswith("?")
        for item in _enumeration_items(sentence):
            split = _COORDINATED.split(item)
            # A condition before the first question is context for the question, not a part.
            if len(split) > 1 and _SUBORDINATE.match(split[0].strip()):
                split = split[1:]
            pieces.extend((piece, asked) for piece in split)
    parts: list[str] = []
    for piece, asked in pieces:
        piece = _LEADING_CONJUNCTION.sub("", piece.strip(" ,;:")).strip()
        piece = _TRAILING_CONJUNCTION.sub("", piece).strip(" ,;:")
        if not piece:
            continue
        if parts and not content_words(piece):
            parts[-1] = f"{parts[-1].rstrip('?.!')}, {piece[0].lower()}{piece[1:]}"
            continue
        if asked and not piece.endswith(("?", ".", "!")):
            piece += "?"
        parts.append(piece[0].upper() + piece[1:])
    if not parts:
        return [text]
    if len(parts) > MAX_PARTS:
        parts = [*parts[: MAX_PARTS - 1], " ".join(parts[MAX_PARTS - 1 :])]
    # Two clauses asking the same thing (`What is X? What is X?`) are one part.
    distinct: list[str] = []
    for part in parts:
        if normalise(part) not in {normalise(p) for p in distinct}:
            distinct.append(part)
    return distinct


def _sentences(text: str) -> list[str]:
    """`text` cut at the ends of its sentences (`_SENTENCE`), never after an abbreviation."""
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE.finditer(text):
        if text[match.start() - 1] == "." and _ABBREVIATION.search(text[start : match.start()]):
            continue
        sentences.append(text[start : match.start()])
        start = match.end()
    sentences.append(text[start:])
    return [s for s in sentences if s.strip()]


def _enumeration_items(sentence: str) -> list[str]:
    """The items of an enumeration in `sentence` (`… (1) X, (2) Y`), the lead-in kept with the
    first item only when no item follows it directly; the sentence itself when it has none."""
    marks = list(_ENUMERATION.finditer(sentence))
    if len(marks) < 2:
        return [sentence]
    lead = sentence[: marks[0].start()].strip(" ,:;")
    items = []
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following is not None else len(sentence)
        item = sentence[mark.end() : end].strip(" ,;")
        item = _LEADING_CONJUNCTION.sub("", item)
        if item:
            items.append(f"{lead} {item}" if lead and not _WH.match(item) else item)
    return items or [sentence]


_ASKING_WORDS = frozenset(
    [
        "many",
        "much",
        "often",
        "kind",
        "kinds",
        "type",
        "types",
        "sort",
        "way",
        "ways",
        "exactly",
        "please",
        "tell",
        "describe",
        "explain",
        "list",
        "summarise",
        "summarize",
        "give",
        "show",
        "name",
        "briefly",
    ]
)
"""Words of the asking, not of what is asked (`how many`, `tell me`, `describe`): no answer
needs to repeat them."""


def _stems(text: str) -> set[str]:
    return {stem(word) for word in content_words(text) if word not in _ASKING_WORDS}


def part_aids(parts: Sequence[str], sub_questions: Sequence[str]) -> list[list[int]]:
    """For each part, the 0-based indices of the sub-questions that research it: a sub-question
    belongs to the part it shares the most distinctive content words with (words not in every
    part, so a topic shared by all parts decides nothing), when it holds at least half of them.
    A sub-question that fits no part of a question of several is the planner's own addition
    and belongs to none, and so does one that fits several equally well (it restates the question); a question of one part owns every sub-question (the part is covered
    when any of them is)."""
    stems = [_stems(part) for part in parts]
    distinctive = _distinctive(parts)
    aids: list[list[int]] = [[] for _ in parts]
    for index, question in enumerate(sub_questions):
        asked = _stems(question)
        best, best_shared, tied = None, 0, False
        for position, wanted in enumerate(distinctive):
            shared = len(asked & wanted)
            needed = max(1, math.ceil(COVERAGE_SHARE * len(wanted)))
            if wanted and shared >= needed:
                tied = shared == best_shared
                if shared > best_shared:
                    best, best_shared = position, shared
        if tied:
            # It restates several parts equally (the question itself, when the planner wrote none): no
            # one part's research aid, and answering it answers none of them.
            continue
        if best is not None:
            aids[best].append(index)
        elif stemless := [i for i, wanted in enumerate(stems) if not wanted]:
            # A part with no content word to match (`q?`) is researched by what fits no other.
            aids[stemless[0]].append(index)
        elif len(parts) == 1:
            # A question of one part: every sub-question is the planner's way into it.
            aids[0].append(index)
    return aids


def uncovered_parts(
    parts: Sequence[str],
    sub_questions: Sequence[str],
    sub_coverage: Sequence[SubQuestionCoverage],
    evidence: Sequence[EvidenceItem],
) -> list[int]:
    """0-based indices of the parts no evidence passage answers: neither the part itself
    (`plan.coverage`) nor any sub-question that researches it."""
    aids = part_aids(parts, sub_questions)
    waiting = [
        i
        for i, found in enumerate(aids)
        if not any(j < len(sub_coverage) and sub_coverage[j].covered for j in found)
    ]
    if not waiting:
        return []
    own = coverage([parts[i] for i in waiting], evidence)
    return [
        i
        for i, entry in zip(waiting, own, strict=True)
        if not entry.covered and (_stems(parts[i]) or not evidence)
    ]


def asks_synthesis(part: str) -> bool:
    """Whether `part` asks for a comparison or a reason: an answer must combine or explain what
    passages say, which no single quoted sentence does."""
    return bool(_COMPARISON.search(part) or _REASON.search(part))


_RELATION = re.compile(
    r"\b(?:like|unlike|alike|than|whereas|while|both|same|similar\w*|differ\w*|instead|rather|"
    r"compar\w*|versus|vs|equivalent|except|but|however|because|since|so that|therefore|thus|"
    r"hence|due to|as a result|leads? to|caus\w*|reasons?|why|in order to|allows?|prevents?|"
    r"ensures?)\b",
    re.IGNORECASE,
)
"""Words by which a sentence compares or explains (`X is like Y`, `… because …`)."""


_ABSENCE = re.compile(
    r"\b(?:(?:do|does|did)\s+not|don't|doesn't|never)\s+(?:\w+\s+){0,2}?(?:say|state|mention|"
    r"specify|provide|give|contain|include|cover|discuss|describe|list|answer)\b|"
    r"\bnot\s+(?:mentioned|stated|specified|covered|described|listed)\b",
    re.IGNORECASE,
)
_SOURCES = re.compile(
    r"\b(?:passages?|sources?|documents?|documentation|docs|texts?|evidence|context|excerpts?|"
    r"results?|pages?|references?|reports?)\b",
    re.IGNORECASE,
)
_NO_INFORMATION = re.compile(
    r"\bno\s+(?:information|mention|details?|data|answer)\s+(?:on|about|of|regarding)\b",
    re.IGNORECASE,
)
"""Sentences by which a writer says what the sources do not say (`The passages do not mention a
port`, `There is no information on …`): an absence phrase naming the sources, or `no
information on`. A fact with a negation (`if the timeout is not given, it blocks`) names no
source and is not one."""


def states_absence(claim: str) -> bool:
    """Whether `claim` says the sources do not state something: such a sentence shares a part's
    words without answering it."""
    return bool(_NO_INFORMATION.search(claim)) or bool(
        _ABSENCE.search(claim) and _SOURCES.search(claim)
    )


def states_relation(claim: str) -> bool:
    """Whether `claim` itself compares or explains: a sentence that only shares a comparison's
    topic words (`try/finally runs cleanup code`) answers no "how does X compare with Y?"."""
    return bool(_RELATION.search(claim))


def _distinctive(parts: Sequence[str]) -> list[set[str]]:
    """Each part's content-word stems without those every part shares (the question's topic)."""
    stems = [_stems(part) for part in parts]
    common = set.intersection(*stems) if len(stems) > 1 else set()
    return [s - common or s for s in stems]


def _own_stems(questions: Sequence[str]) -> list[set[str]]:
    """Each question's stems without those another of `questions` holds (all of its stems when
    nothing is left): what sets it apart from its siblings."""
    stems = [_stems(q) for q in questions]
    own = []
    for i, mine in enumerate(stems):
        others = set().union(*(s for j, s in enumerate(stems) if j != i))
        own.append(mine - others or mine)
    return own


def _states(claim: str, wanted: set[str]) -> bool:
    """Whether `claim` holds half of the `wanted` stems (rounded up), and two of them when there
    are two or more: one shared word (`exception`) is a topic, not an answer."""
    needed = max(min(2, len(wanted)), math.ceil(COVERAGE_SHARE * len(wanted)))
    return bool(wanted) and len(wanted & _stems(claim)) >= needed


def judge_parts(
    parts: Sequence[str],
    sub_questions: Sequence[str],
    sub_coverage: Sequence[SubQuestionCoverage],
    claims: Sequence[ClaimRecord],
) -> list[QuestionPart]:
    """Each part's state after a grounding eval, with the 1-based indices of the claims behind
    it. `answered`: a grounded claim holds half of the part's distinctive words (`_states`; for a
    comparison or a reason, a claim that itself compares or explains, `states_relation`), or
    a grounded claim states each sub-question that researches it (the words that set that
    sub-question apart from the others: `__exit__` and `exception` do not make "how does
    __exit__ suppress an exception?" answered). `partial`: only some of those
    sub-questions are stated, or a comparison or a reason has only claims that state neither.
    Else `not_stated`, with the sentence the answer prints. A claim that says the sources do not
    state something (`states_absence`) answers nothing."""
    aids = part_aids(parts, sub_questions)
    wanted_by_part = _distinctive(parts)
    aid_stems = _own_stems(sub_questions)
    grounded = [
        (n, c) for n, c in enumerate(claims, start=1) if c.grounded and not states_absence(c.claim)
    ]
    judged = []
    for part, found, wanted in zip(parts, aids, wanted_by_part, strict=True):
        synthesis = asks_synthesis(part)

        def fits(claim: ClaimRecord, synthesis: bool = synthesis) -> bool:
            return not synthesis or states_relation(claim.claim)

        # A part with no content word to match is answered by any grounded claim.
        direct = [n for n, c in grounded if _states(c.claim, wanted) or not wanted]
        own_words = [n for n in direct if fits(claims[n - 1])]
        aid_questions = [j for j in found if j < len(sub_questions)]
        by_aid = {
            j: [n for n, c in grounded if _states(c.claim, aid_stems[j]) and fits(c)]
            for j in aid_questions
        }
        answered_aids = [j for j, ns in by_aid.items() if ns]
        supporting = sorted({*own_words, *(n for ns in by_aid.values() for n in ns)})
        all_aids = bool(aid_questions) and len(answered_aids) == len(aid_questions)
        if own_words or all_aids:
            judged.append(QuestionPart(text=part, state="answered", claims=supporting))
        elif answered_aids or direct:
            judged.append(
                QuestionPart(
                    text=part,
                    state="partial",
                    claims=sorted({*direct, *supporting}),
                    statement=partial_statement(part, synthesis),
                )
            )
        else:
            judged.append(
                QuestionPart(text=part, state="not_stated", statement=not_stated_statement(part))
            )
    return judged


def _as_clause(part: str) -> str:
    body = part.strip().rstrip("?.!").strip()
    return body[0].lower() + body[1:] if body else body


def not_stated_statement(part: str) -> str:
    """What the answer says of a part the sources do not answer, in words."""
    clause = _as_clause(part)
    if _WH.match(clause):
        return f"The indexed documents do not say {clause}."
    if _YES_NO.match(clause):
        return f"The indexed documents do not say whether {clause}."
    return f'The indexed documents do not cover "{clause}".'


def partial_statement(part: str, synthesis: bool) -> str:
    """What the answer says of a part it answers only in part."""
    clause = _as_clause(part)
    if synthesis:
        return (
            f'The indexed documents state related facts, but do not themselves answer "{clause}".'
        )
    return f'The indexed documents answer "{clause}" only in part.'


def answered_count(parts: Sequence[QuestionPart]) -> float:
    """How much of the question the parts answer: 1 per part answered, ½ per part partly."""
    return sum(
        1.0 if p.state == "answered" else 0.5 if p.state == "partial" else 0.0 for p in parts
    )


def part_texts(state: ResearchState) -> list[str]:
    """The question's own parts of a run: those its state holds, else split from its prompt (a
    run stored before parts existed)."""
    return [p.text for p in state.parts] or question_parts(state.prompt)


def state_uncovered(state: ResearchState) -> list[int]:
    """0-based indices of the run's question parts no evidence answers yet."""
    return uncovered_parts(part_texts(state), state.sub_questions, state.coverage, state.evidence)


def state_unanswered(state: ResearchState, uncovered: Sequence[int]) -> list[int]:
    """0-based indices of the parts the evidence answers and the last judged draft does not
    (none before the first grounding eval)."""
    if not state.drafts or len(state.parts) != len(part_texts(state)):
        return []
    return [
        i for i, part in enumerate(state.parts) if i not in uncovered and part.state != "answered"
    ]


def with_answered_parts(
    entries: Sequence[SubQuestionCoverage], claims: Sequence[ClaimRecord]
) -> list[SubQuestionCoverage]:
    """`entries` with `answered` set: whether a grounded claim states the sub-question, by the
    words that set it apart from the other sub-questions (as `judge_parts` reads them)."""
    own = _own_stems([entry.question for entry in entries])
    grounded = [c.claim for c in claims if c.grounded]
    return [
        entry.model_copy(update={"answered": any(_states(claim, wanted) for claim in grounded)})
        for entry, wanted in zip(entries, own, strict=True)
    ]
