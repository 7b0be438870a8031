"""Deterministic checks of a claim against the passages selected for it.

They catch what a small judge model misses in minimal edits of a true sentence, each a named
feature (the classes of unfaithful statements in public taxonomies such as FRANK):

- `numbers` (circumstance errors): a number, version or date in the claim that the passages do
  not contain (`3.10` is not `3.1`; "two" is 2).
- `names` (entity errors): a proper name, code identifier or month in the claim that the
  passages do not contain (`__enter__()` where they say `__exit__()`, `TypeError`, `March`).
- `negation`: a negation ("not", "no", "never", "cannot", "non-" ...) in the claim and not in
  the sentences it matches best, or the other way round.
- `swapped_roles` (relation errors): two terms of the claim stand in the opposite order of the
  sentence that states them, and swapping them back makes the claim match it (the new exception
  set as the context of the saved one, instead of the reverse); a change of voice ("by") is not
  a swap. Also a name of the claim next to a word where the sentence has another name next to
  it ("stating that the Licensor changed" where it says "stating that You changed").
- `inserted_negation`: the claim is its best-matching sentences with a negation added (all its
  content words there, more negation cues than they hold): `negation`'s precise part.
- `unsupported_content` (additions): the share of the claim's content words that appear nowhere
  in the passages, and the longest run of them (an added clause is a run).

`run_checks` runs them all; the judge combines their findings with the model's score by the
weights in `sleuth.grounding.calibration`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import combinations

from sleuth.grounding.claims import CITATION, STOPWORDS, without_citation_marks
from sleuth.grounding.passages import Passage, text_key
from sleuth.grounding.sentences import sentence_spans

CHECKS = (
    "numbers",
    "names",
    "negation",
    "swapped_roles",
    "unsupported_content",
    "inserted_negation",
)

_NUMBER = re.compile(r"(?<![\w.])\d[\w.+~:\-]*")
_NUMBER_WORDS = {
    "zero": "0",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "hundred": "100",
    "thousand": "1000",
    "twice": "2",
    "half": "50",
}
_MONTHS = {
    m[:3]: m
    for m in [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
}
_TOKEN = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*(?:\(\))?|\d[\w.+~:\-]*")
_WORD = re.compile(r"[a-z0-9_]+")
_NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "without",
        "non",
        "nobody",
        "nowhere",
    ]
)
_CONJUNCTIONS = frozenset(["and", "but", "while", "whereas", "yet"])
_CAPITAL_CUE = re.compile(r"\b(?:" + "|".join(w.capitalize() for w in sorted(_NEGATIONS)) + r")\b")
_CLAUSE_OPENING = re.compile(r"(?:^|[.!?:;]|\n\s*[-*•]?|(?:^|\s)[-*•])[\s(\[]*$")


def _without_named_cues(text: str) -> str:
    """`text` with every capitalised negation cue that is quoted or does not open a clause blanked
    out: it names something (Python's `None`, a licence's "Not a Contribution")."""

    def kept(match: re.Match[str]) -> str:
        quoted = match.start() > 0 and text[match.start() - 1] in "\"'`“‘"
        opening = _CLAUSE_OPENING.search(text, 0, match.start()) is not None
        return match[0] if opening and not quoted else " " * len(match[0])

    return _CAPITAL_CUE.sub(kept, text)


_CLAUSE_START = re.compile(r"(?:^|[.!?:;]\s+|\n\s*[-*•]?\s*|(?:^|\s)[-*•]\s+)$")
_SUFFIXES = (
    "ational",
    "ations",
    "ation",
    "ments",
    "ment",
    "ness",
    "ities",
    "ity",
    "ings",
    "ing",
    "ions",
    "ion",
    "ances",
    "ance",
    "ences",
    "ence",
    "ables",
    "able",
    "ibles",
    "ible",
    "ively",
    "ive",
    "ers",
    "er",
    "edly",
    "ed",
    "ies",
    "es",
    "ly",
    "s",
)


def stem(word: str) -> str:
    """A crude stem, enough to match `inheritance`/`inheriting`, `raised`/`raises`/`raise`."""
    word = word.lower().removesuffix("'s").removesuffix("’s")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    return word


def content_stems(text: str) -> list[str]:
    """The stems of the words of `text` that are not stopwords, in order."""
    return [stem(word) for word in _content_words(text)]


def _content_words(text: str) -> list[str]:
    return [
        w
        for w in _WORD.findall(CITATION.sub(" ", text).lower())
        if w not in STOPWORDS and len(w) > 1
    ]


@dataclass(frozen=True)
class CheckFinding:
    """The outcome of one check: whether it found a problem, and what."""

    name: str
    fired: bool = False
    detail: str = ""
    decisive: bool = False
    """The problem holds against the whole evidence, not only the passages selected for the
    claim, so the claim is unsupported whatever the judge model says."""


@dataclass
class CheckReport:
    """Every check's finding for one claim, and the measures the judge combines."""

    findings: list[CheckFinding] = field(default_factory=list)
    window: str = ""
    """The one to three consecutive sentences of the passages that match the claim best."""
    coverage: float = 0.0
    """Share of the claim's content words found in `window`."""

    @property
    def fired(self) -> list[str]:
        """Names of the checks that found a problem."""
        return [f.name for f in self.findings if f.fired]

    def features(self) -> dict[str, float]:
        """What the judge's calibration weighs: 1.0 for each check that fired, `coverage`, and
        `vetoed` (1.0 when a finding is decisive)."""
        values = {finding.name: float(finding.fired) for finding in self.findings}
        values["coverage"] = self.coverage
        values["vetoed"] = float(any(f.decisive for f in self.findings))
        return values


def _numbers(text: str) -> set[str]:
    found = {match.group(0).rstrip(".:-+~") for match in _NUMBER.finditer(text)}
    found |= {_NUMBER_WORDS[w] for w in _WORD.findall(text.lower()) if w in _NUMBER_WORDS}
    return {n for n in found if n}


def _dates(text: str) -> set[tuple[int, int, int | None]]:
    """(year, month, day) of the dates in `text`: `10 February 2025`, `Mon, 10 Feb 2025`,
    `February 10, 2025`, `2025-02-10`; `January 2004` has no day."""
    found: set[tuple[int, int, int | None]] = set()
    months = "|".join(_MONTHS)
    for match in re.finditer(
        rf"\b(?:(\d{{1,2}})\s+)?({months})[a-z]*\.?,?\s+(?:(\d{{1,2}}),?\s+)?(\d{{4}})\b",
        text,
        re.IGNORECASE,
    ):
        day = match.group(1) or match.group(3)
        month = list(_MONTHS).index(match.group(2).lower()) + 1
        found.add((int(match.group(4)), month, int(day) if day else None))
    for match in re.finditer(r"\b(\d{4})-(\d{2})-(\d{2})\b", text):
        found.add((int(match.group(1)), int(match.group(2)), int(match.group(3))))
    return found


def _number_parts(text: str) -> set[str]:
    """The numbers of `text`, and the parts of each joined by `-` or `/` (a table's
    `2023-06-10` holds the year 2023 and the day 10; `1.5.1-1` the version 1.5.1)."""
    found = _numbers(text)
    return found | {part for n in found for part in re.split(r"[-/]", n) if part}


def _missing_numbers(claim: str, text: str) -> list[str]:
    missing = sorted(_numbers(claim) - _number_parts(text))
    known = _dates(text)
    for year, month, day in sorted(_dates(claim), key=str):
        if not any(
            (y, m) == (year, month) and (day is None or d is None or d == day) for y, m, d in known
        ):
            missing.append(f"{year:04d}-{month:02d}" + (f"-{day:02d}" if day else ""))
    return missing


def check_numbers(claim: str, passages_text: str, evidence_text: str | None = None) -> CheckFinding:
    """Numbers, versions and dates of the claim that the passages do not contain; decisive when
    `evidence_text` (all of the evidence) does not contain them either."""
    claim = CITATION.sub(" ", claim)
    missing = _missing_numbers(claim, passages_text)
    decisive = bool(missing and evidence_text and _missing_numbers(claim, evidence_text))
    return CheckFinding("numbers", bool(missing), ", ".join(missing), decisive)


def _names(claim: str) -> list[str]:
    """Proper names, code identifiers and months in the claim (a capitalised word counts when it
    does not start a clause, or has inner capitals, digits or underscores)."""
    text = CITATION.sub(" ", claim)
    names = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token[0].isdigit():
            continue
        core = token.removesuffix("()")
        coded = token.endswith("()") or "_" in core or "." in core
        inner = any(c.isupper() for c in core[1:]) or any(c.isdigit() for c in core)
        capital = core[:1].isupper() and not _CLAUSE_START.search(text[: match.start()])
        month = core.lower() in _MONTHS.values()
        if coded or inner or capital or month:
            names.append(token)
    return names


def _name_key(token: str) -> str:
    key = token.lower().removesuffix("()").removesuffix("'s").removesuffix("’s").strip("-.")
    return key[:3] if key in _MONTHS.values() else key


def _passage_keys(passages_text: str) -> set[str]:
    # An ISO date names its month: "2023-06-10" holds June.
    keys = {list(_MONTHS)[month - 1] for _, month, _ in _dates(passages_text) if 1 <= month <= 12}
    for match in _TOKEN.finditer(passages_text):
        key = _name_key(match.group(0))
        keys.add(key)
        keys.update(part for part in re.split(r"[\-.]", key) if part)
        if key[:3] in _MONTHS:
            keys.add(key[:3])
    return keys


def _missing_names(claim: str, text: str) -> list[str]:
    keys = _passage_keys(text)
    missing = []
    for name in _names(claim):
        key = _name_key(name)
        parts = [p for p in re.split(r"[\-.]", key) if p]
        if key not in keys and not (len(parts) > 1 and all(p in keys for p in parts)):
            missing.append(name)
    return list(dict.fromkeys(missing))


def check_names(claim: str, passages_text: str) -> CheckFinding:
    """Names, identifiers and months of the claim that the passages do not contain."""
    missing = _missing_names(claim, passages_text)
    return CheckFinding("names", bool(missing), ", ".join(missing))


def _negated(text: str) -> tuple[dict[str, str], set[str]]:
    """The content words a negation applies to (the first two after each cue, within its
    clause), by stem; and the stems among them that another clause or conjunct states
    un-negated: a contrast ("suppresses it if true, and does not suppress it if false"), not a
    negation. A word repeated where it is negated ("the code generator emits no code") is none."""
    negated: dict[str, str] = {}
    stated: set[str] = set()
    # A capitalised cue inside a clause names something: Python's `None`, a licence's
    # "Not a Contribution". It negates nothing.
    text = _without_named_cues(text)
    # "whether or not" and "or not" leave the statement open; they negate nothing.
    lowered = re.sub(r"\b(?:whether )?or not\b", " ", text.lower().replace("n't", " not"))
    # "no more than 70 columns", "not even", "no later than": a bound or an emphasis, not a
    # denial of the words that follow.
    lowered = _BOUNDS.sub(" ", lowered)
    for clause in re.split(r"[,;:.()]", lowered):
        tokens = _WORD.findall(clause)
        cancelled: set[int] = set()
        negated_at: set[int] = set()
        for position, token in enumerate(tokens):
            if token not in _NEGATIONS or position in cancelled:
                continue
            after = [(p, t) for p, t in enumerate(tokens) if p > position and t not in STOPWORDS]
            # A double negative ("not a non-maintainer upload", "not without reason") affirms:
            # the next cue cancels this one, and neither negates what follows.
            if after and after[0][1] in _NEGATIONS:
                cancelled.add(after[0][0])
                continue
            # A cue is not what is negated ("not allowed in a non-zero number": "zero" is).
            following = [(p, t) for p, t in after if t not in _NEGATIONS][:2]
            negated.update((stem(t), t) for _, t in following)
            negated_at.update(p for p, _ in following)
        # Each content word's stem, with its conjunct and whether a cue negates it there.
        marks: list[tuple[int, str, bool]] = []
        conjunct = 0
        for position, token in enumerate(tokens):
            conjunct += token in _CONJUNCTIONS
            if token not in STOPWORDS and token not in _NEGATIONS:
                marks.append((conjunct, stem(token), position in negated_at))
        negated_where = {(at, word) for at, word, negative in marks if negative}
        stated.update(
            word for at, word, negative in marks if not negative and (at, word) not in negated_where
        )
    return negated, negated.keys() & stated


_BOUNDS = re.compile(
    r"\b(?:no|not)\s+(?:more|less|fewer|greater|later|earlier|longer|shorter|larger|smaller)"
    r"\s+than\b|\bnot\s+even\b|\bnot\s+only\b"
)


def check_negation(claim: str, window: str) -> CheckFinding:
    """A word the claim shares with its best-matching sentences, negated on one side only. A
    word one side both negates and states in another clause or conjunct is a contrast there
    (`_negated`), not a flipped fact."""
    shared = set(content_stems(claim)) & set(content_stems(window))
    (in_claim, claim_contrasts), (in_window, window_contrasts) = _negated(claim), _negated(window)
    contrasts = claim_contrasts | window_contrasts
    flipped = sorted(((in_claim.keys() ^ in_window.keys()) & shared) - contrasts)
    if not flipped:
        return CheckFinding("negation")
    words = ", ".join(in_claim.get(s) or in_window[s] for s in flipped)
    return CheckFinding("negation", True, f"negated on one side only: {words}")


@dataclass(frozen=True)
class _Unit:
    text: str
    name: bool
    """A capitalised word or run of them, not merely capitalised by its place."""
    after_break: bool
    """Punctuation (",", ";", a bracket, a sentence's end) stands between it and the unit before."""
    listed: bool = False
    """An item of a list ("break, continue and return"): joined to a neighbour by a comma, "and"
    or "or" alone."""


_INITIAL = re.compile(r"(?:^|[.!?:;]\s+|\n\s*|\s[-*+•]\s*|[(\[]\s*|\(\w\)\s*)$")
_BREAK = re.compile(r"[,;:.!?()\[\]]")
_LIST_JOIN = re.compile(r"[\s\"'`]*(?:,[\s\"'`]*(?:(?:and|or|nor)\s+)?|(?:and|or|nor)\s+)[\s\"'`]*")


def _named_units(text: str) -> list[_Unit]:
    """Content stems with runs of capitalised words (a person's name) kept as one unit, each
    marked whether it is a name: capitalised words (a run of them is one unit). A capitalised
    stopword inside a sentence is a defined term and kept ("... that You
    changed", "... for The Work"); at a sentence's start it is dropped like any stopword, and a
    word capitalised only by its place is no name."""
    units: list[_Unit] = []
    previous_capital = False
    cleaned = CITATION.sub(" ", text)
    last_end = 0
    for match in re.finditer(r"[A-Za-z_][\w\-]*(?:\(\))?|\d[\w.\-]*", cleaned):
        token = match.group(0)
        lowered = token.lower()
        capital = token[0].isupper()
        between = cleaned[last_end : match.start()]
        initial = _INITIAL.search(cleaned[: match.start()]) is not None
        defined_term = capital and lowered in STOPWORDS and len(token) > 1 and not initial
        if (lowered in STOPWORDS and not defined_term) or len(token) < 2:
            previous_capital = False
            continue
        broken = bool(_BREAK.search(between)) or not units
        if units and _LIST_JOIN.fullmatch(between) and not (capital and previous_capital):
            units[-1] = replace(units[-1], listed=True)
            joined = True
        else:
            joined = False
        if capital and previous_capital and not defined_term and not broken:
            units[-1] = _Unit(units[-1].text + " " + lowered, True, units[-1].after_break)
        else:
            units.append(
                _Unit(
                    lowered if capital else stem(lowered), capital and not initial, broken, joined
                )
            )
        previous_capital = capital and not defined_term
        last_end = match.end()
    return units


def _lcs(left: list[str], right: list[str]) -> int:
    previous = [0] * (len(right) + 1)
    for a in left:
        current = [0]
        for j, b in enumerate(right, start=1):
            current.append(previous[j - 1] + 1 if a == b else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


_SLOT_REACH = 3
"""How near a word of the sentence a name must stand to hold the same place as in the claim."""
_SWAP_MATCH = 0.6
"""The share of the claim's units the sentence must hold in order once two terms are swapped."""


def check_swapped_roles(claim: str, window: str) -> CheckFinding:
    """Two terms whose exchange makes the claim follow its best-matching sentences in order."""
    claim_named, window_named = _named_units(claim), _named_units(window)
    claim_units = [unit.text for unit in claim_named]
    window_units = [unit.text for unit in window_named]
    # Numbers, versions and dates are circumstances (the `numbers` check), and list items in
    # another order are the same list: neither is a role.
    listed = {u.text for u in [*claim_named, *window_named] if u.listed}
    shared = [
        u
        for u in dict.fromkeys(claim_units)
        if u in window_units and not u[0].isdigit() and u not in listed
    ]
    base = _lcs(claim_units, window_units)
    for a, b in combinations(shared, 2):
        if (claim_units.index(a) < claim_units.index(b)) == (
            window_units.index(a) < window_units.index(b)
        ):
            continue
        if _passive_between(claim, a, b) != _passive_between(window, a, b):
            continue
        swapped = [b if u == a else a if u == b else u for u in claim_units]
        # The swap must make the claim follow the sentence nearly word for word: a sentence that
        # only shares a few words with the claim says nothing about its roles.
        matched = _lcs(swapped, window_units)
        if matched >= base + 2 and matched >= _SWAP_MATCH * len(claim_units):
            return CheckFinding("swapped_roles", True, f"{a} / {b}")
    substitution = _name_in_anothers_place(claim_named, window_named)
    if substitution:
        return CheckFinding("swapped_roles", True, substitution)
    return CheckFinding("swapped_roles")


def _name_in_anothers_place(claim: list[_Unit], window: list[_Unit]) -> str:
    """A name of the claim standing right next to a word where the sentence has another name
    next to that word, and the claim's name nowhere near it ("stating that the Licensor changed"
    against "stating that You changed"): the claim gives the role to the wrong one. Neighbours
    count only without punctuation between them. Returns "name / other name", or ""."""
    texts = [unit.text for unit in window]
    for i, unit in enumerate(claim):
        if not unit.name:
            continue
        for side in (-1, 1):
            j = i + side
            if not 0 <= j < len(claim) or claim[j].name or claim[max(i, j)].after_break:
                continue
            if claim[j].text[0].isdigit():
                continue  # "on 10 February": a number holds no role (the `numbers` check's)
            places = [k for k, text in enumerate(texts) if text == claim[j].text]
            neighbours = [
                window[k - side]
                for k in places
                if 0 <= k - side < len(window)
                and window[k - side].name
                and not window[max(k, k - side)].after_break
            ]
            if not places or len(neighbours) < len(places):
                continue
            near = any(
                _same_name(unit.text, text)
                for k in places
                for text in texts[max(0, k - _SLOT_REACH) : k + _SLOT_REACH + 1]
            )
            rivals = [n.text for n in neighbours if not _same_name(n.text, unit.text)]
            if rivals and not near:
                return f"{unit.text} / {rivals[0]}"
    return ""


def _same_name(a: str, b: str) -> bool:
    """One name holds the other's words ("CVE-2025-1" and "Fix CVE-2025-1"), or shortens it
    ("Feb" and "February")."""
    left, right = set(a.split(" ")), set(b.split(" "))
    shorter, longer = sorted((a, b), key=len)
    return left <= right or right <= left or (len(shorter) >= 3 and longer.startswith(shorter))


def _passive_between(text: str, a: str, b: str) -> bool:
    """Whether "by" stands between the first mentions of units `a` and `b` in `text`."""
    lowered = text.lower()
    positions = [_find_unit(lowered, unit) for unit in (a, b)]
    if any(p < 0 for p in positions):
        return False
    low, high = sorted(positions)
    return re.search(r"\bby\b", lowered[low:high]) is not None


def _find_unit(lowered: str, unit: str) -> int:
    match = re.search(r"\b" + re.escape(unit.split(" ")[0]), lowered)
    return match.start() if match else -1


def check_unsupported_content(claim: str, passages_text: str) -> CheckFinding:
    """Content words of the claim found nowhere in the passages, when they make up a third of
    the claim or a run of three (an added clause)."""
    words = _content_words(claim)
    known = set(content_stems(passages_text))
    novel = [stem(w) not in known and not w.isdigit() for w in words]
    run = longest = 0
    for flag in novel:
        run = run + 1 if flag else 0
        longest = max(longest, run)
    fired = bool(words) and (longest >= 3 or sum(novel) / len(words) >= 0.34)
    unknown = [w for w, flag in zip(words, novel, strict=True) if flag]
    return CheckFinding("unsupported_content", fired, ", ".join(unknown) if fired else "")


def negation_cues(text: str) -> int:
    """How many negation cues `text` holds (named ones such as Python's `None`, and "or not",
    left out)."""
    lowered = re.sub(
        r"\b(?:whether )?or not\b", " ", _without_named_cues(text).lower().replace("n't", " not")
    )
    return sum(word in _NEGATIONS for word in _WORD.findall(_BOUNDS.sub(" ", lowered)))


def check_inserted_negation(
    claim: str, window: str, coverage: float, negation: CheckFinding
) -> CheckFinding:
    """The claim is its best-matching sentences with a negation added: every content word of
    the claim is in them, the `negation` check fired, and the claim holds more negation cues.
    A paraphrase that moves a "not" elsewhere keeps the count; this is the precise part of the
    negation finding, a veto (`sleuth.grounding.calibration.VETO_FINDINGS`)."""
    inserted = negation.fired and coverage >= 0.999 and negation_cues(claim) > negation_cues(window)
    return CheckFinding("inserted_negation", inserted, negation.detail if inserted else "")


def aligned_window(claim: str, passages: list[Passage]) -> str:
    """The one to three consecutive sentences of the passages sharing most content with the claim
    (fewer words wins a tie), a fact read from their code or tables counting as a sentence; and
    when that leaves part of the claim out, the sentence of another place that states most of
    the rest (a claim combining two facts is checked against both)."""
    wanted = set(content_stems(claim))
    units = _units(passages)
    best: tuple[int, int] = (-1, 0)
    best_text = ""
    for group in units:
        for i in range(len(group)):
            for width in (1, 2, 3):
                if i + width > len(group):
                    break
                text = " ".join(group[i : i + width])
                stems = content_stems(text)
                key = (len(wanted & set(stems)), -len(stems))
                if key > best:
                    best, best_text = key, text
    missing = wanted - set(content_stems(best_text))
    if not missing or best[0] <= 0:
        return best_text
    complement: tuple[int, int] = (0, 0)
    complement_text = ""
    for group in units:
        for sentence in group:
            stems = content_stems(sentence)
            key = (len(missing & set(stems)), -len(stems))
            if key > complement and sentence not in best_text:
                complement, complement_text = key, sentence
    if complement[0] >= 2 or (complement[0] and complement[0] * 2 >= len(missing)):
        return f"{best_text} {complement_text}"
    return best_text


def _units(passages: list[Passage]) -> list[list[str]]:
    """The sentences of each block of consecutive passages, then each fact as a group of one."""
    groups = [[block[a:b] for a, b in sentence_spans(block)] for block in _blocks(passages)]
    groups += [[fact.text] for passage in passages for fact in passage.facts]
    return groups


def verbatim_in(claim: str, passages: list[Passage]) -> bool:
    """Whether the claim, without its `[n]` citations and its closing full stop, is found word for
    word in the passages (ignoring case and spacing; passages that follow each other in one
    document count as one text)."""
    key = text_key(without_citation_marks(claim)).rstrip(" .")
    return bool(key) and any(key in text_key(block) for block in _blocks(passages))


def _blocks(passages: list[Passage]) -> list[str]:
    """The passages' texts, with passages that follow each other in one document joined."""
    blocks: list[str] = []
    previous: Passage | None = None
    for passage in passages:
        joined = (
            previous is not None
            and previous.document_key == passage.document_key
            and passage.start - previous.end <= 2
        )
        if joined:
            blocks[-1] = blocks[-1] + " " + passage.text
        else:
            blocks.append(passage.text)
        previous = passage
    return blocks


def run_checks(
    claim: str, passages: list[Passage], evidence_text: str | None = None
) -> CheckReport:
    """Every check of `claim` against `passages` (the ones selected for it); `evidence_text`,
    all of the evidence, lets a check be decisive (see `CheckFinding.decisive`)."""
    passages_text = "\n".join(f"{p.source}\n{p.readable}" for p in passages)
    window = aligned_window(claim, passages)
    wanted = set(content_stems(claim))
    coverage = len(wanted & set(content_stems(window))) / len(wanted) if wanted else 0.0
    copied = verbatim_in(claim, passages)
    if wanted and coverage < 1.0 and copied:
        # The window holds at most three sentences; a longer claim copied from the passages
        # (a code block's lines, a list) is held by them all the same.
        coverage = 1.0
    negation = check_negation(claim, window)
    # A claim copied word for word from the passages keeps their roles, whatever order the
    # window's few sentences show its terms in.
    roles = CheckFinding("swapped_roles") if copied else check_swapped_roles(claim, window)
    return CheckReport(
        findings=[
            check_numbers(claim, passages_text, evidence_text),
            check_names(claim, passages_text),
            negation,
            roles,
            check_unsupported_content(claim, passages_text),
            check_inserted_negation(claim, window, coverage, negation),
        ],
        window=window,
        coverage=coverage,
    )
