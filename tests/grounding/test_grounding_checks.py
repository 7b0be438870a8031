"""Each deterministic check of the claim-level judge, on minimal edits and on paraphrases."""

from __future__ import annotations

from sleuth.agent.state import EvidenceItem
from sleuth.grounding.checks import (
    CHECKS,
    aligned_window,
    check_names,
    check_negation,
    check_numbers,
    check_swapped_roles,
    check_unsupported_content,
    run_checks,
    stem,
    verbatim_in,
)
from sleuth.grounding.passages import split_passages

FINALLY = (
    "If an exception occurs in any of the clauses and is not handled, the exception is "
    "temporarily saved. The finally clause is executed. If the finally clause raises another "
    "exception, the saved exception is set as the context of the new exception."
)
CHANGELOG = (
    "curl (7.88.1-10+deb12u11) bookworm; urgency=medium\n\n"
    "  * Team upload.\n  * Import patch for CVE-2025-0167.\n\n"
    " -- Dr. Tobias Quathamer <toddy@debian.org>  Mon, 10 Feb 2025 11:45:37 +0100"
)
WITH = (
    "If an exception caused the suite to be exited, its type, value, and traceback are passed "
    "as arguments to __exit__(). Otherwise, three None arguments are supplied. The context "
    "manager's __enter__() method is invoked first."
)


def test_numbers_flags_a_changed_number_version_or_date() -> None:
    assert not check_numbers(
        "curl 7.88.1-10+deb12u11 imports a patch for CVE-2025-0167.", CHANGELOG
    ).fired
    changed = check_numbers("curl imports a patch for CVE-2025-0168.", CHANGELOG)
    assert changed.fired and "2025-0168" in changed.detail
    assert check_numbers("Uploaded on 10 March 2025.", CHANGELOG).detail == "2025-03-10"
    assert not check_numbers("Uploaded on 10 February 2025.", CHANGELOG).fired
    assert not check_numbers("Uploaded in February 2025.", CHANGELOG).fired
    assert check_numbers("Added in Python 3.1.", "Changed in 3.10.").fired


def test_numbers_is_decisive_only_for_a_number_the_whole_evidence_lacks() -> None:
    elsewhere = check_numbers("Otherwise, 3 None arguments are supplied.", "Otherwise.", WITH)
    assert elsewhere.fired and not elsewhere.decisive
    nowhere = check_numbers("Otherwise, 4 None arguments are supplied.", "Otherwise.", WITH)
    assert nowhere.fired and nowhere.decisive


def test_numbers_reads_number_words() -> None:
    assert not check_numbers("Three None arguments are supplied.", WITH).fired
    assert check_numbers("Two None arguments are supplied.", WITH).detail == "2"


def test_names_flags_an_identifier_or_name_the_passages_lack() -> None:
    assert check_names("Its type is passed to __init__().", WITH).detail == "__init__()"
    swapped_person = check_names("Dr. Tobias Quathamer thanked Daniel Stenberg.", CHANGELOG)
    assert swapped_person.fired and swapped_person.detail == "Daniel, Stenberg"
    # A paraphrase that keeps the names, and a capital that only starts the sentence, pass.
    assert not check_names("Otherwise __exit__() gets three None arguments.", WITH).fired
    assert check_names("Uploaded by Quathamer in March.", CHANGELOG).detail == "March"


def test_a_capitalised_cue_that_names_something_negates_nothing() -> None:
    """Python's `None` in a list, a licence's "Not a Contribution": names, not negations. A
    capitalised cue opening a sentence still negates."""
    window = 'Values defined to be false: "None" and "False"; zero of any numeric type.'
    assert not check_negation("Zero of any numeric type counts as false.", window).fired
    marked = 'Anything its owner marks as "Not a Contribution" is excluded from Contributions.'
    assert not check_negation(marked, "Communication marked as excluded from Contributions.").fired
    opening = check_negation("None of the handlers runs.", "The handlers run.")
    assert opening.fired and opening.detail == "negated on one side only: handlers, runs"
    assert check_negation("It returns None. Not every handler runs.", "Every handler runs.").fired


def test_a_cue_opening_a_bullet_negates_and_names_nothing() -> None:
    """A changelog's bullet reaches the checks with its line breaks folded into spaces: a cue
    after the bullet ("* Non-maintainer upload") opens a clause, so it negates as the claim's
    "non-maintainer" does, and the capital after it is no name."""
    window = "jq (1.6-2.1) unstable; urgency=medium [ Paul Gevers ] * Non-maintainer upload"
    assert not check_negation("jq 1.6-2.1 was a non-maintainer upload.", window).fired
    assert check_negation("jq 1.6-2.1 was a maintainer upload.", window).fired
    assert not check_names("The upload was by Paul Gevers.", "[ Paul Gevers ] * Upload").fired


def test_a_double_negative_affirms() -> None:
    """ "not a non-maintainer upload" says it was a maintainer's upload: the two cues cancel,
    so it contradicts a window that says "Non-maintainer upload"."""
    window = "jq (1.6-2.1) unstable; urgency=medium [ Paul Gevers ] * Non-maintainer upload"
    flipped = check_negation("jq 1.6-2.1 was not a non-maintainer upload.", window)
    assert flipped.fired and flipped.detail == "negated on one side only: maintainer, upload"
    assert not check_negation("The change is not without cost.", "The change has a cost.").fired
    # "neither ... nor" are two cues, not a double negative.
    assert check_negation("Neither the key nor the value is copied.", "The value is copied.").fired


def test_a_cue_is_not_itself_what_is_negated() -> None:
    """ "not allowed in a non-zero number" negates "allowed" (and "non" negates "zero"): the cue
    "non" is not a negated word the other side lacks."""
    window = "Leading zeros in a non-zero decimal number are not allowed."
    claim = "Leading zeros are not allowed in a non-zero decimal number."
    assert not check_negation(claim, window).fired
    assert check_negation("Leading zeros are allowed in a non-zero decimal number.", window).fired


def test_negation_flags_an_inserted_or_removed_not() -> None:
    window = "If the return value was true, the exception is suppressed."
    inserted = check_negation(
        "If the return value was true, the exception is not suppressed.", window
    )
    assert inserted.fired and inserted.detail == "negated on one side only: suppressed"
    removed = check_negation(
        "If an exception occurs and is handled, it is saved.",
        "If an exception occurs and is not handled, it is saved.",
    )
    assert removed.fired
    assert not check_negation(
        "The exception is suppressed when the return value is true.", window
    ).fired
    assert not check_negation(
        "The finally clause runs whether or not an exception occurred.",
        "The finally clause is executed whether an exception occurred or not.",
    ).fired
    assert not check_negation(
        "Names in a nonlocal statement must not collide with local bindings.",
        "Names listed in a nonlocal statement must not collide with pre-existing bindings.",
    ).fired


def test_a_contrast_within_one_side_is_not_a_flipped_negation() -> None:
    """A true claim that states both cases ("suppresses ... does not suppress ...") negates
    "suppress" and affirms it too: a contrast, not a negation the evidence lacks. A claim that
    only negates the word the evidence affirms is still flagged, and a contrast in the evidence
    reads the same way. The contrast is between clauses or conjuncts: a word the negating clause
    repeats ("the code generator emits no code") is still negated."""
    window = (
        "If the return value was true, the exception is suppressed. If false, the exception is "
        "reraised."
    )
    contrast = (
        "`__exit__` suppresses the exception by returning a true value, and does not suppress it "
        "if it returns False."
    )
    assert not check_negation(contrast, window).fired
    inserted = check_negation("`__exit__` does not suppress the exception it receives.", window)
    assert inserted.fired and inserted.detail == "negated on one side only: exception, suppress"
    evidence_contrast = (
        "The exception is suppressed if the method returns a true value and is not suppressed "
        "otherwise."
    )
    claim = "The exception is suppressed if the method returns a true value."
    assert not check_negation(claim, evidence_contrast).fired
    # A word repeated within the clause that negates it is no contrast: "no code" is negated.
    removed = check_negation("The code generator emits code.", "The code generator emits no code.")
    assert removed.fired and removed.detail == "negated on one side only: code"


def test_swapped_roles_flags_two_terms_in_reversed_order() -> None:
    window = "If the finally clause raises another exception, the saved exception is set as the context of the new exception."
    swapped = check_swapped_roles(
        "If the finally clause raises another exception, the new exception is set as the context of the saved exception.",
        window,
    )
    assert swapped.fired and set(swapped.detail.split(" / ")) == {"new", "sav"}
    assert not check_swapped_roles(
        "When the finally clause raises another exception, the saved exception becomes the context of the new one.",
        window,
    ).fired


def test_swapped_roles_accepts_a_change_of_voice() -> None:
    window = "The bridge was designed by Ruth Calloway."
    assert not check_swapped_roles("Ruth Calloway designed the bridge.", window).fired
    assert check_swapped_roles("Ruth Calloway was designed by the bridge.", window).fired


def test_swapped_roles_flags_a_name_in_the_place_of_another() -> None:
    # Made-up text: a defined term ("You", capitalised mid-sentence) whose place the claim gives
    # to another party of the same text.
    window = "Each Tenant must keep a record stating that You inspected the boiler."
    wrong = check_swapped_roles(
        "Each Tenant must keep a record stating that the Landlord inspected the boiler.", window
    )
    assert wrong.fired and wrong.detail == "landlord / you"
    assert not check_swapped_roles(
        "Each Tenant must keep a record stating that You inspected the boiler.", window
    ).fired
    # Names next to each other in another order, and a name that holds the other's words, are
    # the same roles.
    thanks = "The fix was reviewed by Mara Okafor and Tim Beck."
    assert not check_swapped_roles("Tim Beck and Mara Okafor reviewed the fix.", thanks).fired
    assert not check_swapped_roles(
        "The upload fixes CVE-2031-0001.", "The upload will Fix CVE-2031-0001 today."
    ).fired


def test_a_name_next_to_a_word_only_across_punctuation_holds_no_place() -> None:
    window = "Reports were sent to the Board, but reviewed by nobody."
    # "Board" is next to "reviewed" in the claim, not in the sentence (a comma stands between).
    assert not check_swapped_roles("The Auditor reviewed the reports.", window).fired
    assert check_swapped_roles(
        "Reports were sent to the Auditor.", "Reports were sent to the Board."
    ).fired


def test_list_order_numbers_and_a_loose_sentence_are_no_swap() -> None:
    # The same list in another order.
    assert not check_swapped_roles(
        "The keys pear, plum and fig open the gate.", "The keys fig, plum or pear open the gate."
    ).fired
    # A number or a date holds no role, and "Feb" is "February".
    assert not check_swapped_roles(
        "Ada Moss signed release 4.2 on 10 February 2031.",
        "-- Ada Moss, Mon, 10 Feb 2031 release 4.2 signed",
    ).fired
    # A sentence that shares only a few words with the claim says nothing about its roles.
    # (Its missing words are the `unsupported_content` check's.)
    loose = "Mira told Owen about the storm before the long harvest festival in the valley town."
    assert not check_swapped_roles(loose, "Owen told Mira.").fired
    assert check_swapped_roles("Mira told Owen about the storm.", "Owen told Mira.").fired


def test_a_capital_at_a_sentence_start_makes_no_name() -> None:
    # "Keeps" opens the claim; it holds the place of "Board" but is no name.
    assert not check_swapped_roles(
        "Keeps the minutes of the meeting.", "The Board keeps the minutes of the meeting."
    ).fired


def test_unsupported_content_flags_an_added_clause() -> None:
    plain = check_unsupported_content(
        "If the finally clause raises another exception, the saved exception becomes its context.",
        FINALLY,
    )
    assert not plain.fired and plain.detail == ""
    added = check_unsupported_content(
        "The finally clause is executed, after a warning is printed to standard error.", FINALLY
    )
    assert added.fired and added.detail == "warning, printed, standard, error"


def test_stems_match_inflections() -> None:
    assert stem("inheritance") == stem("inheriting") == stem("inherit")
    assert stem("raised") == stem("raises") == stem("raise")
    assert stem("suppressed") == stem("suppresses")


def _passages(text: str) -> list:
    return split_passages([EvidenceItem(index=1, tool="docs", output=text)], max_chars=120)


def test_a_claim_copied_word_for_word_is_fully_covered_however_many_sentences_it_spans() -> None:
    text = (
        "The following code is equivalent. manager = (EXPRESSION). enter = type(manager).__enter__. "
        "exit = type(manager).__exit__. value = enter(manager). hit_except = False. "
        "The rest of the section is about something else."
    )
    claim = (
        "The following code is equivalent. manager = (EXPRESSION). enter = "
        "type(manager).__enter__. exit   = type(manager).__exit__. VALUE = enter(manager) [2]."
    )
    passages = split_passages([EvidenceItem(index=1, tool="docs", output=text)], max_chars=400)
    assert aligned_window(claim, passages).count(".") <= 4, "the window holds three sentences"
    assert verbatim_in(claim, passages)
    assert run_checks(claim, passages).coverage == 1.0
    # A claim that is not found word for word keeps the window's share.
    changed = claim.replace("enter(manager)", "exit(manager)")
    assert not verbatim_in(changed, passages)
    assert run_checks(changed, passages).coverage < 1.0


def test_run_checks_reports_every_named_check_and_its_features() -> None:
    report = run_checks(
        "If the finally clause raises another exception, the new exception is set as the context of the saved exception.",
        _passages(FINALLY),
    )
    assert [f.name for f in report.findings] == list(CHECKS)
    assert report.fired == ["swapped_roles"]
    assert "saved exception is set as the context" in report.window
    assert report.features() == {
        "numbers": 0.0,
        "names": 0.0,
        "negation": 0.0,
        "swapped_roles": 1.0,
        "unsupported_content": 0.0,
        "inserted_negation": 0.0,
        "coverage": 1.0,
        "vetoed": 0.0,
    }
