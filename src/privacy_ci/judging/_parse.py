"""Reading a verdict out of a model's free-text answer.

The paper's prompts end with ``Choice: [A. Prohibited | B. Permitted | C. Not
related ]``; real models answer ``Choice: A``, ``(B) Permitted``,
``**Choice:** C. Not related``, revise themselves ("Choice: B ... on reflection,
Choice: A"), or write prose ("this disclosure is not permitted"). A text with no
recognisable choice is an explicit parse failure (`verdict is None`): counted
wrong, as in the paper, never resampled silently and never guessed from a label.

A model that echoes the option list chooses nothing, whatever its layout:
``Choice: [A. Prohibited | B. Permitted | C. Not related]``, with slashes, commas,
semicolons, "or"/"and", parentheses or braces between the options, bare letters
(``Choice: A/B/C``), bare words (``Prohibited or Permitted``), or one option per
line (with or without a ``Choice:`` label on the first). Such echoes are set
aside before anything is read; an answer that follows them still counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from privacy_ci.ci import Verdict

LETTERS = {"A": Verdict.PROHIBIT, "B": Verdict.PERMIT, "C": Verdict.NOT_APPLICABLE}

_WORDS: list[tuple[re.Pattern[str], Verdict]] = [
    # negations first: "not permitted" is a prohibition, "not prohibited" a permission
    (re.compile(r"\b(?:not|n[o']t|never)\s+(?:be\s+)?permitted\b", re.I), Verdict.PROHIBIT),
    (re.compile(r"\bimpermissible\b|\bunpermitted\b", re.I), Verdict.PROHIBIT),
    (re.compile(r"\b(?:not|n[o']t|never)\s+(?:be\s+)?prohibited\b", re.I), Verdict.PERMIT),
    (
        re.compile(
            r"\bnot\s+(?:related|applicable|relevant|governed|covered)\b|\bunrelated\b"
            r"|\bnot\s+subject\s+to\s+hipaa\b|\bdoes\s+not\s+apply\b",
            re.I,
        ),
        Verdict.NOT_APPLICABLE,
    ),
    (
        re.compile(r"\bprohibit(?:ed|s)?\b|\bviolat(?:es|ed|ion|ing)\b|\bforbid(?:den)?\b", re.I),
        Verdict.PROHIBIT,
    ),
    (re.compile(r"\bpermit(?:ted|s)?\b|\ballowed\b|\bcomplian(?:t|ce)\b", re.I), Verdict.PERMIT),
]

# "Choice: A", "**Choice:** C. Not related", "Choice: [B. Permitted]", "Final answer: (A)"
_CHOICE = re.compile(
    r"(?:choice|answer|conclusion|decision|verdict)[ \t]*\**[ \t]*[:：\-–—][ \t]*\**[ \t]*"
    r"[\[(]?[ \t]*\**[ \t]*"
    r"(?P<body>[^\n]{0,80})",
    re.I,
)
_LEAD_LETTER = re.compile(r"^\(?\s*([ABC])\s*(?:[.):\]|,]|\s|$)")
# a lower-case letter only when it stands alone ("choice: b"), not "a permitted use"
_LEAD_LOWER = re.compile(r"^\(?\s*([abc])\s*(?:[.)\]]|$)")
# "(B) Permitted", "B. Permitted", "A) Prohibited" anywhere on a line
_LETTER_OPTION = re.compile(
    r"(?<![A-Za-z])\(?([ABC])[.)]\s*(?:the event is\s+)?(prohibited|permitted|not related)", re.I
)
_QUESTION_LINE = re.compile(
    r"^\(?[ABC][.)]\s*the event is (?:prohibited by|permitted by|not related to) hipaa\.?$", re.I
)
_OPTION_VERDICT = {
    "prohibited": Verdict.PROHIBIT,
    "permitted": Verdict.PERMIT,
    "not related": Verdict.NOT_APPLICABLE,
}


# -- echoed option lists ------------------------------------------------------------
# One option, in any of the spellings an option list uses: a letter ("A", "(B)"), a
# word ("Prohibited", "The event is not related to HIPAA."), or both ("C. Not related").
_OPTION_WORD = (
    r"(?:the\s+event\s+is\s+)?"
    r"(?P<word>prohibited|prohibit|forbidden|forbid|permitted|permit|not[\s_]+related"
    r"|not[\s_]+applicable|unrelated)\b"
    r"(?:\s+(?:by|to|under)\s+(?:the\s+)?hipaa(?:\s+privacy\s+rule)?\b)?"
)
_OPTION_ITEM = re.compile(
    rf"(?:[abc](?:\s*[.:)\-–—]\s*|\s+){_OPTION_WORD}"
    rf"|(?P<letter>[abc])(?![a-z0-9])"
    rf"|{_OPTION_WORD.replace('?P<word>', '?P<bare>')})"
    r"\.?"
)
# What separates options in a list: | / , ; dashes, "or", "and", or plain space.
_OPTION_SEP = re.compile(r"(?:\s*[|/,;&+\-–—]\s*|\s+)(?:(?:or|and|and/or)\s+)?")
_DECORATION = re.compile(r"[\[\](){}<>*_\"'`“”‘’]")
_BULLET = re.compile(r"^\s*(?:[-*•>·]+\s*|\d{1,2}[.)]\s+)*")
_LABEL = re.compile(
    r"^[^\n:：]{0,40}?\b(?:choice|choices|answer|conclusion|decision|verdict|options?|format)"
    r"\s*[:：\-–—]\s*",
    re.I,
)
_IDENTITY = {
    "a": "A",
    "b": "B",
    "c": "C",
    "prohibited": "A",
    "prohibit": "A",
    "forbidden": "A",
    "forbid": "A",
    "permitted": "B",
    "permit": "B",
    "not related": "C",
    "not applicable": "C",
    "unrelated": "C",
}


def _option_items(segment: str) -> list[str] | None:
    """The options a segment lists (A, B or C each), or None when it is not only options."""
    text = " ".join(_DECORATION.sub(" ", segment).split()).lower().rstrip(" .")
    if not text:
        return None
    items: list[str] = []
    pos = 0
    while True:
        m = _OPTION_ITEM.match(text, pos)
        if m is None:
            return None
        word = m.group("word") or m.group("bare")
        key = " ".join(word.replace("_", " ").split()) if word else m.group("letter")
        items.append(_IDENTITY[key])
        pos = m.end()
        if pos >= len(text):
            return items
        sep = _OPTION_SEP.match(text, pos)
        if sep is None or sep.end() == pos:
            return None
        pos = sep.end()


def _is_option_list(segment: str) -> bool:
    """Whether `segment` is nothing but two or more different options (an echoed list)."""
    items = _option_items(segment)
    return items is not None and len(set(items)) >= 2


def _is_option_list_line(line: str) -> bool:
    """A line that echoes the option list, after any bullet or label ("Choice: [A / B]")."""
    text = _BULLET.sub("", line)
    if _is_option_list(text):
        return True
    return any(_is_option_list(text[m.end() :]) for m in re.finditer(r"[:：]", text))


def _single_option(line: str) -> tuple[str, bool] | None:
    """(option, labelled) when a line holds exactly one option, else None.

    ``labelled`` says whether it came after a label (``Choice: A. Prohibited``).
    """
    text = _BULLET.sub("", line)
    items = _option_items(text)
    if items is not None and len(items) == 1:
        return items[0], False
    label = _LABEL.match(text)
    if label:
        items = _option_items(text[label.end() :])
        if items is not None and len(items) == 1:
            return items[0], True
    return None


def _echoed_blocks(lines: list[str]) -> set[int]:
    """Indices of lines that list the options one per line (an echo, not a choice).

    A block is a run of lines that each hold one option, blank lines aside, whose
    options all differ; only its first line may carry a label. A run of two or more
    is an echoed list. An option repeated after the list starts a new run, so
    "A. ...\nB. ...\nC. ...\n\nB. Permitted" still answers B.
    """
    echoed: set[int] = set()
    run: list[tuple[int, str]] = []

    def close() -> None:
        if len({option for _, option in run}) >= 2:
            echoed.update(i for i, _ in run)
        run.clear()

    for i, line in enumerate(lines):
        if not line.strip():
            continue
        found = _single_option(line)
        if found is None:
            close()
            continue
        option, labelled = found
        if labelled or any(option == o for _, o in run):
            close()
        run.append((i, option))
    close()
    return echoed


@dataclass(frozen=True, slots=True)
class ParsedVerdict:
    """What `parse_verdict` found.

    Args:
        verdict: the verdict, or None when the text holds no recognisable choice.
        method: ``choice`` (an explicit choice line), ``option`` (a lettered
            option), ``words`` (prose), or ``unparsed``.
        evidence: the text that decided.
    """

    verdict: Verdict | None
    method: str
    evidence: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict is not None


def _is_template_echo(body: str) -> bool:
    """The model repeating the format line lists every option: not a choice."""
    lowered = body.lower()
    return (
        sum(w in lowered for w in ("prohibited", "permitted", "not related")) >= 2
        or "|" in body
        or _is_option_list(body)
    )


def _verdict_from_body(body: str) -> Verdict | None:
    text = body.strip().strip("*").strip()
    m = _LEAD_LETTER.match(text) or _LEAD_LOWER.match(text)
    if m:
        return LETTERS[m.group(1).upper()]
    for pattern, verdict in _WORDS:
        if pattern.search(text):
            return verdict
    return None


def parse_verdict(text: str | None, prompt: str | None = None) -> ParsedVerdict:
    """The verdict a model chose, or an explicit failure.

    Precedence: the LAST explicit choice line (``Choice: ...``), else the last
    lettered option (``(B) Permitted``), else the last verdict word in the final
    paragraphs, negation-aware; otherwise ``unparsed``.

    Args:
        text: the raw model output.
        prompt: the prompt that produced it; lines the model merely echoed from it
            are ignored (an echoed prompt mentions every verdict and chooses none).

    Returns:
        The `ParsedVerdict`.
    """
    if not text or not text.strip():
        return ParsedVerdict(None, "unparsed", "")
    if prompt:
        echoed = {ln.strip() for ln in prompt.splitlines() if len(ln.strip()) > 12}
        text = "\n".join(ln for ln in text.splitlines() if ln.strip() not in echoed)
        if not text.strip():
            return ParsedVerdict(None, "unparsed", "")
    cleaned = text.replace("**", "").replace("__", "")
    # Options listed one per line are an echo wherever they stand: drop them first.
    lines = cleaned.splitlines()
    echoed_lines = _echoed_blocks(lines)
    if echoed_lines:
        cleaned = "\n".join(ln for i, ln in enumerate(lines) if i not in echoed_lines)
    choices = []
    for m in _CHOICE.finditer(cleaned):
        body = m.group("body")
        if _is_template_echo(body):
            continue
        verdict = _verdict_from_body(body)
        if verdict is not None:
            choices.append((m.start(), verdict, m.group(0).strip()))
    if choices:
        _, verdict, evidence = choices[-1]
        return ParsedVerdict(verdict, "choice", evidence)
    # Lines that repeat the answer format list every option: they choose nothing.
    body = "\n".join(
        line
        for line in cleaned.splitlines()
        if not ((_is_template_echo(line) and "|" in line) or _is_option_list_line(line))
    )
    options = [
        (m.start(), _OPTION_VERDICT[m.group(2).lower()], m.group(0))
        for m in _LETTER_OPTION.finditer(body)
        if LETTERS[m.group(1).upper()] == _OPTION_VERDICT[m.group(2).lower()]
    ]
    # A lone option is a choice; several different ones are the question being repeated,
    # unless the last line is an option on its own.
    if options and len({v for _, v, _ in options}) == 1:
        return ParsedVerdict(options[-1][1], "option", options[-1][2])
    if options:
        lines = [ln.strip() for ln in body.strip().splitlines() if ln.strip()]
        last = _LETTER_OPTION.search(lines[-1]) if lines else None
        if last and len(lines[-1]) <= len(last.group(0)) + 3:
            return ParsedVerdict(_OPTION_VERDICT[last.group(2).lower()], "option", lines[-1])
    # The prompt's own option lines, repeated as a block, are not an answer either.
    question = [ln for ln in body.splitlines() if _QUESTION_LINE.match(ln.strip())]
    if len(question) >= 2:
        body = "\n".join(ln for ln in body.splitlines() if ln not in question)
    # Prose: the last verdict word, negations taking precedence over the word they contain.
    spans: list[tuple[int, int, Verdict, str]] = []
    for pattern, verdict in _WORDS:
        for m in pattern.finditer(body):
            if not any(a <= m.start() < b or m.start() <= a < m.end() for a, b, _, _ in spans):
                spans.append((m.start(), m.end(), verdict, m.group(0)))
    if spans:
        _, _, verdict, evidence = max(spans)
        return ParsedVerdict(verdict, "words", evidence)
    return ParsedVerdict(None, "unparsed", "")


def parse_yes_no(text: str | None) -> bool | None:
    """The law filter's answer: "First answer yes or no". NONE counts as no."""
    if not text:
        return None
    head = text.strip().replace("*", "").lstrip("#-: ").lower()
    if re.match(r"^(answer\s*:\s*)?yes\b", head):
        return True
    if re.match(r"^(answer\s*:\s*)?(no|none)\b", head):
        return False
    m = re.search(r"\b(yes|no|none)\b", head[:200])
    if m:
        return m.group(1) == "yes"
    return None
