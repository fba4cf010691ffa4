"""Verdict parsing on real-shaped model outputs (>= 100 cases)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from privacy_ci.ci import Verdict
from privacy_ci.judging import parse_verdict, parse_yes_no

P, B, C, N = Verdict.PROHIBIT, Verdict.PERMIT, Verdict.NOT_APPLICABLE, None

HANDWRITTEN: list[tuple[str, Verdict | None]] = [
    ("Choice: A", P),
    ("Choice: B", B),
    ("Choice: C", C),
    ("Choice: A. Prohibited", P),
    ("Choice: B. Permitted", B),
    ("Choice: C. Not related", C),
    ("Choice: [B. Permitted]", B),
    ("Choice: [A. Prohibited ]", P),
    ("**Choice:** C. Not related", C),
    ("**Choice: B. Permitted**", B),
    ("Choice:  (A)", P),
    ("choice: b", B),
    ("CHOICE: C", C),
    ("Choice: A - the disclosure lacked authorization.", P),
    (
        "Execution:\n1. - The hospital disclosed PHI.\n2. - No authorization.\nChoice: A. Prohibited",
        P,
    ),
    (
        "Plans:\nplan 1 - identify entities\nExecution:\nplan 1 - covered entity\nChoice: B. Permitted",
        B,
    ),
    (
        "Choice: B. Permitted\n\nWait, on reflection the employer is not a covered entity.\nChoice: C. Not related",
        C,
    ),
    ("Initially I thought Choice: A, but the subpoena satisfied 164.512(e).\nFinal Choice: B", B),
    ("Choice: C\n\nActually, reconsidering: Choice: A. Prohibited", P),
    ("(B) Permitted", B),
    ("(A) Prohibited", P),
    ("(C) Not related", C),
    ("B. Permitted", B),
    ("A) Prohibited", P),
    ("The answer is (B) Permitted.", B),
    ("My conclusion: (C) The event is not related to HIPAA.", C),
    ("Answer: A", P),
    ("Final answer: (B)", B),
    ("Decision: C. Not related", C),
    ("Conclusion: A", P),
    ("Verdict: B", B),
    ("This disclosure is not permitted under HIPAA.", P),
    ("The disclosure was not permitted because no authorization was obtained.", P),
    ("The event is not prohibited by HIPAA.", B),
    ("Such a disclosure is not prohibited; HIPAA allows it for treatment.", B),
    ("The event is not related to HIPAA because the employer is not a covered entity.", C),
    ("HIPAA does not apply to this event.", C),
    ("This is unrelated to HIPAA.", C),
    ("The hospital violated HIPAA by disclosing records.", P),
    ("This is a violation of the Privacy Rule.", P),
    ("The disclosure is permitted under 164.512(f).", B),
    ("The disclosure was compliant with HIPAA.", B),
    ("HIPAA permits treatment disclosures. However, this disclosure violates 164.502(a).", P),
    ("HIPAA prohibits many things, but here the disclosure is allowed.", B),
    ("I cannot determine the answer.", N),
    ("", N),
    ("   ", N),
    ("Choice: [A. Prohibited | B. Permitted | C. Not related ]", N),
    ("Output Format:\nChoice: [A. Prohibited | B. Permitted | C. Not related]", N),
    ("Choice: D", N),
    ("Choice: maybe", N),
    ("I'd need more information about the parties involved.", N),
    (
        "(A) The event is prohibited by HIPAA.\n(B) The event is permitted by HIPAA.\n(C) The event is not related to HIPAA.",
        N,
    ),
    (
        "(A) The event is prohibited by HIPAA.\n(B) The event is permitted by HIPAA.\n(C) The event is not related to HIPAA.\n\nB. Permitted",
        B,
    ),
    ("Step 1: the sender is a covered entity.\nStep 2: PHI was disclosed.\n\n**Choice**: A", P),
    ("Choice：B", B),
    ("choice - B", B),
]

DECORATIONS: list[Callable[[str], str]] = [
    lambda s: s,
    lambda s: f"Execution:\n1. - Reviewed the event.\n2. - Compared with the rules.\n\n{s}",
    lambda s: f"{s}\n",
    lambda s: s.replace("Choice", "**Choice**") if "Choice:" in s else s,
]


def _cases() -> list[tuple[str, Verdict | None]]:
    out: list[tuple[str, Verdict | None]] = []
    seen: set[str] = set()
    for text, want in HANDWRITTEN:
        for decorate in DECORATIONS:
            t = decorate(text)
            if t.strip() == "" and decorate is not DECORATIONS[0]:
                continue
            if t not in seen:
                seen.add(t)
                out.append((t, want))
    return out


CASES = _cases()


def test_the_set_is_large_enough() -> None:
    assert len(CASES) >= 100
    assert {w for _, w in CASES} == {P, B, C, N}


@pytest.mark.parametrize(("text", "want"), CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_parse(text: str, want: Verdict | None) -> None:
    got = parse_verdict(text)
    assert got.verdict == want, (text, got)
    assert got.ok == (want is not None)
    if want is None:
        assert got.method == "unparsed"


def test_parse_failure_is_never_guessed() -> None:
    for text in ("", "Choice: [A. Prohibited | B. Permitted | C. Not related ]", "no idea"):
        assert parse_verdict(text).verdict is None
    for text in ECHOES.values():
        assert parse_verdict(text).verdict is None, text


# The answer format echoed back, in every layout a model uses: none of them chooses.
ECHOES: dict[str, str] = {
    "pipes": "Choice: [A. Prohibited | B. Permitted | C. Not related ]",
    "brackets-slashes": "Choice: [A. Prohibited / B. Permitted / C. Not related]",
    "slashes": "Choice: A. Prohibited / B. Permitted / C. Not related",
    "commas": "Choice: A. Prohibited, B. Permitted, C. Not related",
    "commas-or": "Choice: A. Prohibited, B. Permitted, or C. Not related",
    "or": "Choice: A. Prohibited or B. Permitted or C. Not related",
    "and-slash-or": "Answer: A. Prohibited and/or B. Permitted",
    "semicolons-braces": "Choice: {A. Prohibited; B. Permitted; C. Not related}",
    "dashes": "Decision: Prohibited - Permitted - Not related",
    "parentheses": "Choice: (A) Prohibited (B) Permitted (C) Not related",
    "parenthesised-alternative": "Choice: A. Prohibited (or B. Permitted)",
    "letters-slashes": "Choice: A/B/C",
    "letters-pipes": "Choice: [A|B|C]",
    "letters-commas-or": "Choice: A, B or C",
    "letters-parentheses": "Final answer: (A), (B) or (C)",
    "two-letters-or": "Choice: A or B",
    "words-or": "Choice: Prohibited or Permitted",
    "words-slashes": "Choice: Prohibited / Permitted / Not related",
    "long-words": "Choice: [The event is prohibited by HIPAA / The event is permitted by HIPAA]",
    "unlabelled-inline": "(A) Prohibited, (B) Permitted, (C) Not related",
    "question-inline": (
        "(A) The event is prohibited by HIPAA. (B) The event is permitted by HIPAA."
        " (C) The event is not related to HIPAA."
    ),
    "format-line-slashes": "Output Format:\nChoice: [A. Prohibited / B. Permitted / C. Not related]",
    "format-line-inline": "Output format: Choice: A. Prohibited, B. Permitted or C. Not related",
    "newlines-after-label": "Choice:\nA. Prohibited\nB. Permitted\nC. Not related",
    "newlines-first-on-label": "Choice: A. Prohibited\nB. Permitted\nC. Not related",
    "newlines-bullets": "Choice:\n- Prohibited\n- Permitted\n- Not related",
    "newlines-numbered": "1. (A) Prohibited\n2. (B) Permitted\n3. (C) Not related",
    "newlines-brackets-blank-lines": "Choice: [\n(A) Prohibited\n\n(B) Permitted\n\n(C) Not related\n]",
    "newlines-letters": "Choice:\nA\nB\nC",
}
ECHO_CASES = [
    pytest.param(decorate(text), id=f"{name}-{i}")
    for name, text in ECHOES.items()
    for i, decorate in enumerate(DECORATIONS)
]


@pytest.mark.parametrize("text", ECHO_CASES)
def test_an_echoed_option_list_is_unparsed(text: str) -> None:
    got = parse_verdict(text)
    assert (got.verdict, got.method) == (None, "unparsed"), (text, got)


@pytest.mark.parametrize("name", list(ECHOES))
@pytest.mark.parametrize(
    ("answer", "want"),
    [
        ("Choice: B", B),
        ("B. Permitted", B),
        ("(A) Prohibited", P),
        ("The event is not related to HIPAA.", C),
        ("The disclosure is not permitted.", P),
    ],
)
def test_an_answer_after_an_echo_still_counts(name: str, answer: str, want: Verdict) -> None:
    text = f"{ECHOES[name]}\n\n{answer}"
    assert parse_verdict(text).verdict is want, text


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # one option, however bracketed, is a choice, not a list
        ("Choice: [C. Not related]", C),
        ("Choice: (B) Permitted.", B),
        ("Choice: [A]", P),
        ("Choice: B. Permitted (not prohibited)", B),
        ("Choice: B - permitted, not prohibited", B),
        # a revision on its own labelled line, and a repeated option, are not lists
        ("Choice: B. Permitted\nChoice: C. Not related", C),
        ("Choice: B\nB. Permitted", B),
        ("Permitted, not prohibited.", B),
        ("It is not prohibited or restricted; it is permitted.", B),
    ],
)
def test_single_options_are_not_mistaken_for_echoes(text: str, want: Verdict) -> None:
    assert parse_verdict(text).verdict is want, text


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Yes. The regulation governs disclosures to law enforcement.", True),
        ("yes", True),
        ("**Yes**, it is relevant.", True),
        ("Answer: Yes", True),
        ("No. The regulation concerns health plans.", False),
        ("NONE", False),
        ("None of the provided regulations apply.", False),
        ("The regulation is relevant, yes.", True),
        ("", None),
        ("I am unsure.", None),
    ],
)
def test_parse_yes_no(text: str, want: bool | None) -> None:
    assert parse_yes_no(text) == want


def test_an_echoed_prompt_is_not_a_choice() -> None:
    from privacy_ci.judging import load_prompt

    for name in ("dp", "cot_auto", "cot_manual", "content_decide", "agent_id_decide"):
        prompt = load_prompt(name)
        text = prompt.render(**{v: "x" for v in prompt.variables})
        assert parse_verdict(text, prompt=text).verdict is None, name
        assert parse_verdict(text + "\nChoice: B", prompt=text).verdict is Verdict.PERMIT
