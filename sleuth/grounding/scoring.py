"""The judge model's part: one yes/no question per claim, scored from the answer's token
probabilities where the provider gives them, else from the generated answer.

The prompt puts the fixed instructions first, then the passages, then the claim, so claims judged
against the same passages share the prompt up to the claim (the local model re-evaluates only the
claim and question). One request per claim: no claim's verdict depends on another claim.

Which providers give which score:

- token probabilities (`method="logprobs"`): the local llama.cpp model (the logits of the answer
  token) and OpenAI-compatible chat completions that return `logprobs` (OpenAI does). The score
  is P(Yes) / (P(Yes) + P(No)) over the answer token's candidates (`Yes`, ` yes`, `YES`, ...).
- the generated verdict (`method="verdict"`): providers without token probabilities (Anthropic),
  and any answer whose candidates hold neither Yes nor No. The score is 1.0 for Yes, 0.0 for No.

A judge with token probabilities is asked a second, shorter question when its calibration weighs
it (`Calibration.weights["quote"]`): does the quoted sentence closest to the claim say what the
claim says (`score_quote`)?
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from sleuth.grounding.claims import content_words, without_citation_marks
from sleuth.grounding.passages import Passage
from sleuth.models.base import Message, Model, ModelResponse

JUDGE_SYSTEM = (
    "You check one claim against numbered passages of evidence. Answer Yes only if the passages "
    "state everything the claim says; other words for the same facts are fine. Answer No if the "
    "claim changes a name, a number, a date or who did what to whom, says the opposite of the "
    "passages, or adds anything they do not state. Answer with Yes or No, then the numbers of "
    "the passages that state the claim, like: Yes [2]"
)
TOP_LOGPROBS = 20
"""How many candidates of the answer token to ask for (OpenAI's maximum is 20)."""
ANSWER_TOKENS = 6
"""Room for `Yes [1, 2]`: the verdict, then the passages the judge relies on (quoted in the
citations of a judge without token probabilities). A judge with them needs one token after the
first answer (its citations quote the sentences closest to the claim), which keeps it fast."""
_YES = frozenset({"yes", "true", "supported"})
_NO = frozenset({"no", "false", "unsupported", "not"})
_CITED = re.compile(r"\[([\d,\s]+)\]|\b(\d+)\b")


@dataclass
class ModelScore:
    """What the judge said about one claim."""

    probability: float
    """P(supported): from token probabilities, or 1.0/0.0 for a generated Yes/No."""
    method: str
    """`logprobs` or `verdict`."""
    cited: list[int] = field(default_factory=list)
    """Passage numbers (1-based, in the prompt) the judge named; numbers it invented are dropped."""


def judge_messages(claim: str, passages: list[Passage]) -> list[Message]:
    """The yes/no question: instructions, then the passages, then the claim (without the `[n]`
    citation marks a report writer adds: those number the writer's passages, not the judge's)."""
    blocks = [
        f"[{number}] ({passage.source}) {' '.join(passage.text.split())}"
        + _facts_note(claim, passage)
        for number, passage in enumerate(passages, start=1)
    ]
    question = (
        "Passages:\n" + "\n\n".join(blocks) + f"\n\nClaim: {without_citation_marks(claim)}\n\n"
        "Do the passages state this claim? Answer Yes or No."
    )
    return [Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=question)]


FACTS_SHOWN = 3
"""At most this many of a passage's facts (its code and tables read as sentences) are shown
with it: those sharing most words with the claim."""


def _facts_note(claim: str, passage: Passage) -> str:
    """The passage's facts that share words with the claim, as a note after its text: a small
    judge reads `fill(text, width=70)` as a default width of 70 only when told in words."""
    wanted = content_words(without_citation_marks(claim))
    ranked = sorted(
        (
            (len(wanted & content_words(fact.text)), n, fact.text)
            for n, fact in enumerate(passage.facts)
        ),
        key=lambda item: (-item[0], item[1]),
    )
    shown = [text for shared, _, text in ranked[:FACTS_SHOWN] if shared]
    return f" (In words: {' '.join(shown)})" if shown else ""


QUOTE_SYSTEM = (
    "You compare a claim with a quoted sentence. Answer Yes if the sentence says what the claim "
    "says (other words for the same facts are fine), No if the claim changes or adds anything. "
    "Answer Yes or No."
)


def quote_messages(claim: str, quoted: str) -> list[Message]:
    """The second question: the claim against only the sentence(s) of the evidence closest to it
    (its citation's quote). Short, so it costs less than the first; the two disagree on
    different claims, and the calibration weighs both."""
    question = (
        f"Sentence: {' '.join(quoted.split())}\n\nClaim: {without_citation_marks(claim)}\n\n"
        "Does the sentence say what the claim says? Answer Yes or No."
    )
    return [Message(role="system", content=QUOTE_SYSTEM), Message(role="user", content=question)]


async def score_quote(judge: Model, claim: str, quoted: str) -> float | None:
    """P(Yes) that `quoted` says what `claim` says, from the answer token's probabilities; None
    when the judge gives none (the second question is asked only of judges that do)."""
    response = await judge.request(
        quote_messages(claim, quoted), max_output_tokens=1, top_logprobs=TOP_LOGPROBS
    )
    return yes_probability(response)


async def score_claim(
    judge: Model, claim: str, passages: list[Passage], *, answer_tokens: int = ANSWER_TOKENS
) -> ModelScore:
    """Ask `judge` whether `passages` support `claim`, allowing `answer_tokens` of answer (1 once
    the judge is known to return token probabilities)."""
    response = await judge.request(
        judge_messages(claim, passages),
        max_output_tokens=answer_tokens,
        top_logprobs=TOP_LOGPROBS,
    )
    cited = cited_passages(response.text, len(passages))
    probability = yes_probability(response)
    if probability is not None:
        return ModelScore(probability, "logprobs", cited)
    verdict = generated_verdict(response.text)
    return ModelScore(1.0 if verdict else 0.0, "verdict", cited if verdict else [])


def yes_probability(response: ModelResponse) -> float | None:
    """P(Yes) / (P(Yes) + P(No)) from the first answer token's candidates, or None when the
    response has no token probabilities or its candidates hold neither answer."""
    if not response.logprobs:
        return None
    first = response.logprobs[0]
    candidates = first.top or []
    yes = sum(math.exp(c.logprob) for c in candidates if _answer(c.token) in _YES)
    no = sum(math.exp(c.logprob) for c in candidates if _answer(c.token) in _NO)
    if not candidates:
        word = _answer(first.token)
        if word in _YES or word in _NO:
            yes = math.exp(first.logprob) if word in _YES else 1.0 - math.exp(first.logprob)
            return min(1.0, max(0.0, yes))
        return None
    if yes + no == 0.0:
        return None
    return yes / (yes + no)


def generated_verdict(text: str) -> bool:
    """Whether a generated answer says Yes (its first word); anything else counts as No."""
    words = re.findall(r"[A-Za-z]+", text)
    return bool(words) and words[0].lower() in _YES


def cited_passages(text: str, count: int) -> list[int]:
    """The passage numbers in the judge's answer that exist (1..count), in order, once each."""
    numbers: list[int] = []
    for match in _CITED.finditer(text):
        for piece in re.findall(r"\d+", match.group(0)):
            number = int(piece)
            if 1 <= number <= count and number not in numbers:
                numbers.append(number)
    return numbers


def _answer(token: str) -> str:
    return token.strip().strip(".,:;!\"'`*").lower()
