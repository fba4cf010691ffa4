"""The offline fact reader: the facts of a disclosure from its CI fields and narrative,
each with the words it was read from, no model call.

Two sources, in this order (a fact given by a field is not read again):

1. **CI fields.** The case's sender, recipient, information type, purpose and consent
   form give holder, recipient, information, purpose and authorization: the field's
   text is matched against each value's cues (exact phrases), the role graph (for the
   holder: a role under ``covered entity`` is a covered entity), and by meaning (the
   sentence embedding of the field against each value's examples and description).
2. **The narrative**, clause by clause (spaCy sentences, cut at ``but``, ``although``,
   ``however``, semicolons). For each fact, a clause states a value when one of the
   value's cues occurs in it (matched on lemmas), or when its embedding is closer to
   one of the value's examples than `ReadingGuide.threshold`, clear of every other
   value by `ReadingGuide.margin`, and closer than to the fact's neutral examples
   (mentions that state nothing). Whether the clause is negated is read from its
   dependency parse, not from nearby words: a ``neg`` dependent (not, never) of its
   verb or an auxiliary, a negative subject or object (no one, nobody, nothing, none
   of, no judge), ``without`` governing the statement, or a verb that negates its
   complement (lacked, refused, declined, failed to). A negated statement gives the
   value's negation (`negation` in ``reading/<regulation>.yaml``: valid ->
   absent) or only rules the value out. The embedding is taken with the negation
   words removed, so "she never put her name to any release" is compared as the
   statement it denies. Of several statements of one fact, the strongest counts;
   near ties go to the later one (narratives run in time order).

Every fact read carries its quote and character offsets (`FactValue`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from privacy_ci.ci import Flow
from privacy_ci.reasoning._facts import (
    FactError,
    Facts,
    FactSchema,
    FactValue,
    Source,
    load_fact_schema,
)

if TYPE_CHECKING:
    from spacy.tokens import Doc, Span, Token

    from privacy_ci.embeddings import EmbeddingModel
    from privacy_ci.knowledge import TaxonomyGraph

__all__ = [
    "Clause",
    "FactReader",
    "ReadingGuide",
    "Statement",
    "clause_negated",
    "load_reading_guide",
]

# CI field -> the Flow attribute it is read from
_FIELDS = {
    "sender": lambda f: f.sender.role,
    "recipient": lambda f: f.recipient.role,
    "subject": lambda f: f.subject.role,
    "information_type": lambda f: f.information_type,
    "purpose": lambda f: f.principle.purpose,
    "consent_form": lambda f: f.principle.consent,
}

_BREAK_WORDS = frozenset({"but", "although", "though", "however", "whereas", "yet", "so"})
# subordinators that start a clause of their own (a negation does not cross them)
_SUBORDINATORS = frozenset(
    {"after", "before", "when", "until", "because", "since", "once", "while", "unless", "if"}
)
# verbs of passing information on: the frame holder -> information -> recipient
_DISCLOSE = frozenset(
    {
        "send", "fax", "email", "e-mail", "mail", "share", "disclose", "give", "release",
        "tell", "report", "post", "provide", "forward", "transmit", "sell", "hand", "show",
        "reveal", "publish", "leak", "pass", "inform", "notify", "upload", "submit",
        "produce", "deliver", "transfer", "communicate", "mention", "discuss", "furnish",
        "supply", "turn", "broadcast", "circulate", "alert", "warn", "relay", "divulge",
        "expose", "return", "text", "read",
    }
)  # fmt: skip
# verbs whose object is the recipient and whose "about"/"of" phrase is the information
_TELL = frozenset({"tell", "inform", "notify", "alert", "warn", "text"})
_NEG_DEPENDENTS = frozenset({"not", "n't", "never", "no"})
_NEG_PRONOUNS = frozenset({"nobody", "nothing", "none", "neither", "noone", "nowhere"})
_NEG_DETERMINERS = frozenset({"no", "neither"})
_NEG_VERBS = frozenset(
    {"lack", "refuse", "decline", "fail", "deny", "neglect", "omit", "withhold", "reject", "forgo"}
)
_NEG_ADJECTIVES = frozenset({"unsigned", "absent", "missing", "unwilling", "undated"})
_STRIP = frozenset({"not", "n't", "never", "no", "nobody", "none", "without", "neither", "nor"})
_CACHE = 8192
_FRAME_FACTS = frozenset({"holder", "information", "recipient", "purpose"})
# heads that say little on their own: the words modifying them decide
_WEAK_HEADS = frozenset(
    {
        "company", "department", "office", "group", "team", "member", "staff", "agency",
        "organization", "organisation", "firm", "service", "services", "unit", "program",
        "programme", "system", "insurer", "carrier", "plan", "person", "people", "center", "centre",
        "association", "business", "corporation", "provider", "one",
    }
)  # fmt: skip
FIELD_FLOOR = 0.3
"""A CI field is read as its closest value unless even that is further than this."""
FRAME_SCORE = 0.9
"""A frame's statement: below a cue (1.0), above any match by meaning."""
STRICT_SCORE = 0.7
"""How close a field must come to a strict value's example (see `FactGuide.strict`)."""


@dataclass(frozen=True)
class FactGuide:
    """How one fact is read (see ``reading/<regulation>.yaml``).

    Args:
        strict: values read only from a cue or a close match (`STRICT_SCORE`), never
            as merely the closest value of a field: they are exceptions the regulation
            draws narrowly (employment records, de-identified data ...).
    """

    name: str
    field: str | None
    examples: dict[str, tuple[str, ...]]
    neutral: tuple[str, ...]
    negation: dict[str, str | None]
    strict: frozenset[str] = frozenset()
    prefer: tuple[str, ...] = ()
    factual: bool = False
    meaning: bool = True  # read from clauses by meaning too (not only cues and frames)


@dataclass(frozen=True)
class FrameSpec:
    """A value stated by its words' roles (see ``frames`` in the reading guide)."""

    verbs: frozenset[str]
    nouns: frozenset[str]
    with_: tuple[frozenset[str], ...]
    unless: frozenset[str]
    own_negation: bool = False
    subject: frozenset[str] = frozenset()
    unless_sentence: bool = False
    with_sentence: bool = False
    unless_not: frozenset[str] = frozenset()  # words that keep `unless` from ruling it out
    phrase_only: bool = False  # a noun's `with` words must modify the noun itself
    # where the frame's negation must sit: "self" (on its verb: "nobody asked her"),
    # "below" (in what the verb governs, not on it: "asked that nothing be shared")
    negated: str | None = None

    def describe(self) -> str:
        head = sorted(self.verbs or self.nouns)[:3]
        return "/".join(head) + (
            "" if not self.with_ else " + " + "/".join(sorted(self.with_[0])[:3])
        )


@dataclass(frozen=True)
class ReadingGuide:
    """The reader's knowledge of one regulation's facts."""

    regulation: str
    threshold: float
    margin: float
    facts: dict[str, FactGuide]
    neutral: tuple[str, ...] = ()
    frames: dict[str, dict[str, tuple[FrameSpec, ...]]] = field(default_factory=dict)
    heads: dict[str, dict[str, str]] = field(default_factory=dict)  # fact -> head lemma -> value
    # short forms in CI fields and role phrases ("pt", "PCP", "atty"), lower case -> long
    abbreviations: dict[str, str] = field(default_factory=dict)
    vague_heads: frozenset[str] = frozenset()  # heads a narrative may overrule ("investigator")

    def expand(self, text: str) -> str:
        """`text` with its short forms written out (whole words, any case)."""
        if not self.abbreviations:
            return text
        return _ABBREVIATION.sub(
            lambda m: self.abbreviations.get(m.group(0).lower(), m.group(0)), text
        )


@functools.cache
def load_reading_guide(regulation: str = "hipaa") -> ReadingGuide:
    """The packaged reading guide of a regulation, checked against its fact schema.

    Raises:
        FactError: no guide, or one naming an unknown fact, value or field.
    """
    from privacy_ci._structured import load_yaml

    schema = load_fact_schema(regulation)
    path = Path(str(resources.files("privacy_ci.reasoning") / "reading" / f"{regulation}.yaml"))
    if not path.is_file():
        raise FactError(f"no fact reader for regulation {regulation!r}")
    data = load_yaml(path.read_text(encoding="utf-8"))
    where = f"reading/{regulation}.yaml"
    facts: dict[str, FactGuide] = {}
    for name, raw in (data.get("facts") or {}).items():
        schema.spec(name)
        field_name = raw.get("field")
        if field_name is not None and field_name not in _FIELDS:
            raise FactError(f"{where}: fact {name!r}: unknown CI field {field_name!r}")
        examples: dict[str, tuple[str, ...]] = {}
        for value, texts in (raw.get("examples") or {}).items():
            value = "yes" if value is True else "no" if value is False else str(value)
            schema.check(name, value, f"{where}: ")
            examples[value] = tuple(str(t) for t in texts)
        negation: dict[str, str | None] = {}
        for value, becomes in (raw.get("negation") or {}).items():
            value = "yes" if value is True else "no" if value is False else str(value)
            becomes = "yes" if becomes is True else "no" if becomes is False else becomes
            schema.check(name, value, f"{where}: ")
            if becomes is not None:
                schema.check(name, str(becomes), f"{where}: ")
            negation[value] = None if becomes is None else str(becomes)
        strict = frozenset(str(v) for v in raw.get("strict") or ())
        for value in strict:
            schema.check(name, value, f"{where}: ")
        prefer = tuple(
            "yes" if v is True else "no" if v is False else str(v) for v in raw.get("prefer") or ()
        )
        for value in prefer:
            schema.check(name, value, f"{where}: prefer: ")
        facts[name] = FactGuide(
            name,
            field_name,
            examples,
            tuple(raw.get("neutral") or ()),
            negation,
            strict,
            prefer,
            bool(raw.get("factual", False)),
            bool(raw.get("meaning", True)),
        )
    frames: dict[str, dict[str, tuple[FrameSpec, ...]]] = {}
    for name, by_value in (data.get("frames") or {}).items():
        schema.spec(name)
        for value, specs in by_value.items():
            value = "yes" if value is True else "no" if value is False else str(value)
            schema.check(name, value, f"{where}: frames: ")
            parsed = []
            for raw in specs:

                def words(key: str, raw: Mapping[str, Any] = raw) -> frozenset[str]:
                    return frozenset(
                        ("no" if w is False else "yes" if w is True else str(w)).lower()
                        for w in raw.get(key) or ()
                    )

                groups = tuple(
                    frozenset(("no" if w is False else str(w)).lower() for w in group)
                    for group in raw.get("with") or ()
                )
                if not (raw.get("verbs") or raw.get("nouns")):
                    raise FactError(
                        f"{where}: frames: {name}.{value}: a frame needs verbs or nouns"
                    )
                parsed.append(
                    FrameSpec(
                        words("verbs"),
                        words("nouns"),
                        groups,
                        words("unless"),
                        bool(raw.get("own_negation", False)),
                        words("subject"),
                        bool(raw.get("unless_sentence", False)),
                        bool(raw.get("with_sentence", False)),
                        words("unless_not"),
                        bool(raw.get("phrase_only", False)),
                        _negated_at(raw.get("negated"), f"{where}: frames: {name}.{value}"),
                    )
                )
            frames.setdefault(name, {})[value] = tuple(parsed)
    heads: dict[str, dict[str, str]] = {}
    for name, by_value in (data.get("heads") or {}).items():
        schema.spec(name)
        for value, listed in by_value.items():
            schema.check(name, str(value), f"{where}: heads: ")
            for word in listed:
                key = str(word).lower()
                if key in heads.get(name, {}):
                    raise FactError(f"{where}: heads: {name}: {key!r} is listed twice")
                heads.setdefault(name, {})[key] = str(value)
    abbreviations = {str(k).lower(): str(v) for k, v in (data.get("abbreviations") or {}).items()}
    vague = frozenset(str(w).lower() for w in data.get("vague_heads") or ())
    return ReadingGuide(
        regulation,
        float(data.get("threshold", 0.52)),
        float(data.get("margin", 0.04)),
        facts,
        tuple(str(t) for t in data.get("neutral") or ()),
        frames,
        heads,
        abbreviations,
        vague,
    )


_ABBREVIATION = re.compile(r"(?<![\w.'’-])[A-Za-z][A-Za-z.]*(?:['’]s)?(?![\w-])")
_TITLES = frozenset({"mr", "mrs", "ms", "miss", "mx", "mr.", "mrs.", "ms.", "mx."})


def _plain_name(text: str | None) -> str:
    """`text` lower case without articles and punctuation, to compare two fields."""
    if not text:
        return ""
    words = re.findall(r"[\w']+", text.lower())
    return " ".join(w for w in words if w not in ("the", "a", "an"))


def _only_names(doc: Doc) -> bool:
    """Whether a phrase only names someone: proper nouns, titles and joining words."""
    words = [t for t in doc if not t.is_punct and t.lower_ not in _TITLES]
    return (
        bool(words)
        and any(t.pos_ == "PROPN" for t in words)
        and all(
            t.pos_ in ("PROPN", "CCONJ", "DET", "SYM", "NUM", "PART") or t.lower_ == "&"
            for t in words
        )
    )


def _role_phrase(noun: Token, skip: Token | None = None) -> Span:
    """A common noun with the words before it that modify it ("the pt's shift supervisor")."""
    start = noun.left_edge.i
    if skip is not None and start <= skip.i < noun.i:
        start = skip.right_edge.i + 1
    while start < noun.i and noun.doc[start].is_punct:
        start += 1
    return noun.doc[start : noun.i + 1]


def _described(doc: Doc, name: Doc) -> Span | None:
    """Who the narrative says a named party is: "Mr. Ortiz is the pt's shift supervisor",
    "Mr. Ortiz, the supervisor", "her supervisor, Carla Nunez", "Ortiz, who runs HR"."""
    keys = [t.lower_ for t in name if t.pos_ == "PROPN" and t.lower_ not in _TITLES]
    if not keys:
        return None
    key = keys[-1]
    for token in doc:
        if token.lower_ != key:
            continue
        head = token
        while head.dep_ in ("compound", "flat") and head.head.i != head.i:
            head = head.head
        for child in head.children:
            if child.dep_ == "appos" and child.pos_ == "NOUN":
                return _role_phrase(child)
            if child.dep_ == "relcl" and child.lemma_ == "be":
                attr = next((c for c in child.children if c.dep_ == "attr"), None)
                if attr is not None and attr.pos_ == "NOUN":
                    return _role_phrase(attr)
        if head.dep_ == "appos" and head.head.pos_ == "NOUN":
            return _role_phrase(head.head, skip=head)
        if head.dep_ == "nsubj" and head.head.lemma_ == "be":
            attr = next((c for c in head.head.children if c.dep_ == "attr"), None)
            if attr is not None and attr.pos_ == "NOUN":
                return _role_phrase(attr)
    return None


class _Blocked:
    """A frame whose words are in the clause but whose `unless` rules it out."""


BLOCKED = _Blocked()


def _frame_holds(spec: FrameSpec, doc: Doc, clause: Clause) -> Token | _Blocked | None:
    """The token that states `spec` in the clause; `BLOCKED` when its head word is there
    but something rules it out (then no reading by meaning may state it either); or
    None."""
    tokens = doc[clause.first : clause.last]
    blocked = False
    # what rules a frame out sits near its words, or (`unless_sentence`) anywhere in the
    # sentence ("a protective order, but that was the restraining order she had
    # obtained against him")
    if spec.unless and spec.unless_sentence:
        sentence = doc[clause.first].sent
        if any(t.lemma_.lower() in spec.unless or t.lower_ in spec.unless for t in sentence):
            return BLOCKED
    for t in tokens:
        lemma = t.lemma_.lower()
        nominal = t.pos_ in ("NOUN", "PROPN") and (lemma in spec.nouns or t.lower_ in spec.nouns)
        # the small parser sometimes tags a verb as a noun ("State law obliges ..."): a
        # verb's lemma counts whatever its tag, unless the word is one of the frame's nouns
        is_verb = lemma in spec.verbs and not nominal and t.pos_ not in ("ADP", "DET", "PRON")
        is_noun = (lemma in spec.nouns or t.lower_ in spec.nouns) and not is_verb
        if not (is_verb or is_noun):
            continue
        if spec.subject and is_verb:
            # who does it matters ("the officer asked", not "asked the officer")
            agents = [c for c in t.children if c.dep_ in ("nsubj", "agent")]
            agents += [g for c in t.children if c.dep_ == "agent" for g in c.children]
            if t.dep_ in ("conj", "xcomp") and not agents:
                agents = [c for c in t.head.children if c.dep_ == "nsubj"]
            if not any(
                a.lemma_.lower() in spec.subject
                or a.lower_ in spec.subject
                or any(w.lemma_.lower() in spec.subject for w in a.subtree)
                for a in agents
            ):
                continue
        if spec.negated is not None and not _negation_where(t, spec.negated):
            continue
        scope = {w.i for w in t.subtree}
        if is_noun and not spec.phrase_only:  # a noun's phrase and the clause it is in
            scope |= {w.i for w in t.head.subtree} if t.head.i != t.i else set()
        else:  # a verb's own words and what it depends on ("a plan to hurt", "said he would")
            scope |= {a.i for a in t.ancestors}
            if t.dep_ == "conj":  # "had a pistol ... and would use it"
                scope |= {w.i for w in t.head.subtree}
        if spec.with_sentence:  # the words may sit in another clause of the sentence
            tokens = doc[clause.first].sent
            scope |= {w.i for w in tokens}
        words = {
            form
            for w in tokens
            if w.i in scope or w.i == t.i
            for form in (w.lemma_.lower(), w.lower_)
        }
        if (
            spec.unless
            and not spec.unless_sentence
            and spec.unless & words
            and not spec.unless_not & words
        ):
            blocked = True
            continue
        if all(group & words for group in spec.with_):
            return t
    return BLOCKED if blocked else None


def _negated_at(raw: object, where: str) -> str | None:
    if raw is None or (isinstance(raw, str) and raw in ("self", "below")):
        return raw
    raise FactError(f"{where}: negated: expected 'self' or 'below', found {raw!r}")


def _negation_where(token: Token, where: str) -> bool:
    """Whether `token` is negated as the frame needs: on itself ("self": "was not asked",
    "nobody asked her", "without asking") or only in what it governs ("below": "asked
    that nothing be shared", "told the nurse not to call", while "was not asked" is not)."""
    own = _negated_head(token, lexical=False) or token.head.lower_ == "without"
    if where == "self":
        return own
    # a request one could make is not made ("I could ask not to be listed")
    if own or any(c.tag_ == "MD" and c.lower_ in _POSSIBLE for c in token.children):
        return False
    # what it asks for, not who asks ("Fenn, who ... signed nothing, says")
    below = [c for c in token.children if c.dep_ not in ("nsubj", "nsubjpass", "relcl", "appos")]
    for w in (w for c in below for w in c.subtree):
        low = w.lower_
        negative = w.dep_ == "neg" or low in _NEG_PRONOUNS or (low == "no" and w.dep_ == "det")
        if negative and not _possible_between(w, token):
            return True
    return False


def _possible_between(word: Token, top: Token) -> bool:
    """Whether a verb between `word` and `top` is only possible ("the form said she could
    ask not to be listed": a request she could make, not one she made)."""
    node = word.head
    while node.i != top.i and node.head.i != node.i:
        if node.pos_ in ("VERB", "AUX") and any(
            c.tag_ == "MD" and c.lower_ in _POSSIBLE for c in node.children
        ):
            return True
        node = node.head
    return False


# ------------------------------------------------------------------------- clauses
@dataclass(frozen=True)
class Clause:
    """A clause of the narrative: its text, offsets and polarity.

    Args:
        first / last: its tokens' indices in the parsed narrative (``doc[first:last]``).
    """

    text: str
    start: int
    end: int
    negated: bool
    lemmas: tuple[str, ...]
    first: int = 0
    last: int = 0
    hypothetical: bool = False

    @property
    def plain(self) -> str:
        """The clause with its negation words removed (what it affirms or denies)."""
        words = [w for w in re.findall(r"[\w'’-]+|[^\w\s]", self.text) if w.lower() not in _STRIP]
        return " ".join(words)


def clause_negated(span: Span) -> bool:
    """Whether the clause's statement is negated, read from its dependency parse."""
    tokens = list(span)
    inside = {t.i for t in tokens}
    roots = [t for t in tokens if t.head.i == t.i or t.head.i not in inside]
    for root in roots:
        if _negated_head(root):
            return True
        # "she had not been asked": the clause's verb chain (xcomp, ccomp kept inside)
        for child in root.children:
            if child.dep_ in ("xcomp",) and _negated_head(child):
                return True
    for t in tokens:
        low = t.lower_
        if low == "without" and t.head.i in inside:
            return True
        if low in _NEG_ADJECTIVES and t.pos_ in ("ADJ", "VERB"):
            return True
    return False


_MODALS = frozenset({"would", "might", "may", "could", "should"})
_POSSIBLE = _MODALS | {"can"}  # what a person could ask for is not asked
_IRREALIS_VERBS = frozenset(
    {
        "promise", "expect", "hope", "rumor", "rumour", "plan", "hear", "ask",
        "request", "urge", "want", "need", "encourage", "invite",
    }
)  # fmt: skip


def token_hypothetical(token: Token) -> bool:
    """Whether a word's statement is only possible or expected, read from the verbs that
    govern it: a modal on its verb ("a warrant would be coming"), a condition ("if a
    judge signs an order"), or a verb of expectation over it ("said a subpoena was
    promised", "hoped the board would approve")."""
    node, joined = token, False
    for _ in range(12):
        if node.pos_ in ("VERB", "AUX"):
            for c in node.children:
                if c.lower_ in _MODALS and c.tag_ == "MD":
                    return True
                if c.dep_ == "mark" and c.lower_ == "if":
                    return True
            # a verb it is only joined to does not govern it ("was not asked and signed
            # nothing": the signing is no request)
            if node is not token and not joined and node.lemma_.lower() in _IRREALIS_VERBS:
                return True
        if node.head.i == node.i:
            break
        joined = node.dep_ == "conj"
        node = node.head
    return False


def clause_hypothetical(span: Span) -> bool:
    """Whether the clause says something might be, not that it is ("a warrant would be
    coming", "a subpoena might arrive", "if a judge signs an order")."""
    for t in span:
        low = t.lower_
        if low in _MODALS and t.tag_ == "MD":
            return True
        if low == "if" and t.dep_ == "mark":
            return True
        if t.lemma_.lower() in _IRREALIS_VERBS and t.pos_ == "VERB":
            return True
    return False


def _negated_head(head: Token, *, lexical: bool = True) -> bool:
    """Whether a verb is negated: a negating dependent, subject or object, or (with
    `lexical`) a verb that negates by its meaning ("lacks", "refused")."""
    if lexical and head.lemma_.lower() in _NEG_VERBS:
        return True
    for child in head.children:
        low = child.lower_
        if child.dep_ == "neg" or (low in _NEG_DEPENDENTS and child.dep_ in ("advmod", "neg")):
            return True
        if child.dep_ in ("aux", "auxpass") and any(g.dep_ == "neg" for g in child.children):
            return True
        if child.dep_ in ("nsubj", "nsubjpass", "dobj", "attr", "pobj", "dative"):
            if low in _NEG_PRONOUNS or low == "no" or (low == "one" and _has_no(child)):
                return True
            if any(
                d.dep_ in ("det", "preconj") and d.lower_ in _NEG_DETERMINERS
                for d in child.children
            ):
                return True
            if low == "none" or child.lemma_.lower() == "none":
                return True
        if child.dep_ == "prep" and child.lower_ == "without":
            return True
    return False


def _has_no(token: Token) -> bool:
    # "no one", "not one of them"
    return any(c.lower_ in ("no", "not") for c in token.children)


def clauses_of(doc: Doc) -> list[Clause]:
    """The narrative's clauses: sentences, cut before ``but``, ``although``, ``however``,
    ``whereas``, ``yet`` and at semicolons."""
    out: list[Clause] = []
    for sent in doc.sents:
        cuts = [sent.start]
        for t in sent:
            if t.i == sent.start:
                continue
            low = t.lower_
            if low in _BREAK_WORDS or t.text == ";":
                cuts.append(t.i if t.text != ";" else t.i + 1)
            elif (
                low in _SUBORDINATORS
                and t.dep_ in ("mark", "prep", "advmod")
                and (t.head.pos_ in ("VERB", "AUX") and t.head.i > t.i)
            ):
                cuts.append(t.i)
        cuts.append(sent.end)
        for a, b in itertools.pairwise(cuts):
            span = doc[a:b]
            text = span.text.strip(" ;,")
            if len(text) < 3 or not any(t.is_alpha for t in span):
                continue
            lemmas = tuple(t.lemma_.lower() for t in span if not t.is_punct)
            out.append(
                Clause(
                    text,
                    span.start_char,
                    span.end_char,
                    clause_negated(span),
                    lemmas,
                    span.start,
                    span.end,
                    clause_hypothetical(span),
                )
            )
    return out


@dataclass(frozen=True)
class Phrase:
    """A phrase of the narrative and where it is."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Frame:
    """One act of passing information on: who, what, to whom, what for."""

    verb: Phrase
    holder: Phrase | None
    information: Phrase | None
    recipient: Phrase | None
    purpose: Phrase | None

    @property
    def filled(self) -> int:
        return sum(
            p is not None for p in (self.holder, self.information, self.recipient, self.purpose)
        )


def _phrase(token: Token, limit: int = 14, until: int | None = None) -> Phrase:
    """A noun's phrase: its subtree, cut before a relative clause (and before token
    `until`), at most `limit` words."""
    words = [
        t
        for t in token.subtree
        if (t.dep_ not in ("relcl", "acl") or t.i < token.i) and (until is None or t.i < until)
    ]
    keep = []
    for t in words:
        if t.i > token.i and t.dep_ in ("relcl", "acl", "punct") and t.head.i == token.i:
            break
        keep.append(t)
    keep = keep[:limit] if keep else [token]
    doc = token.doc
    span = doc[keep[0].i : keep[-1].i + 1]
    return Phrase(span.text, span.start_char, span.end_char)


def _child(token: Token, *deps: str) -> Token | None:
    return next((c for c in token.children if c.dep_ in deps), None)


def _prep_object(token: Token, *preps: str) -> Token | None:
    for c in token.children:
        if c.dep_ in ("prep", "agent", "dative") and c.lower_ in preps:
            found = _child(c, "pobj")
            if found is not None:
                return found
    return None


_GIVE = frozenset({"send", "give", "fax", "email", "mail", "hand", "show", "forward", "text"})


def _misplaced_to(verb: Token, agent: Token | None) -> tuple[Token, int] | None:
    """A recipient the small parser hung on the information ("faxed a summary of the
    circumstances of his death to the medical examiner", "reported the bruises ... and
    his address to the hotline"): the last ``to`` phrase under the verb's object, and
    where that phrase starts."""
    skip = {w.i for w in agent.subtree} if agent is not None else set()
    found: tuple[Token, int] | None = None
    for w in verb.subtree:
        if w.i in skip or w.i <= verb.i or w.dep_ != "prep" or w.lower_ != "to":
            continue
        if w.head.i == verb.i or w.head.pos_ not in ("NOUN", "PROPN"):
            continue
        # only inside the verb's own clause (not a relative or adverbial clause below)
        node, own = w.head, True
        while node.i != verb.i:
            if node.dep_ in ("relcl", "advcl", "ccomp", "xcomp", "acl") or node.head.i == node.i:
                own = False
                break
            node = node.head
        target = _child(w, "pobj")
        if own and target is not None:
            found = (target, w.i)
    return found


def _purpose(verb: Token, also: Sequence[Token]) -> Phrase | None:
    """What the act is for: a ``for`` phrase, an infinitive of purpose, ``as`` evidence,
    ``in response to`` a request, on the verb (or its object and recipient)."""
    for head in (verb, *also):
        found = _prep_object(head, "for", "as")
        if found is not None:
            return _phrase(found)
    for c in verb.children:
        if c.dep_ in ("advcl", "xcomp") and any(
            a.lower_ == "to" and a.dep_ == "aux" for a in c.children
        ):
            span = verb.doc[c.left_edge.i : c.right_edge.i + 1]
            return Phrase(span.text, span.start_char, span.end_char)
    return None


def frames_of(doc: Doc) -> list[Frame]:
    """Every act of passing information on in the narrative (see `_DISCLOSE`), in order."""
    out: list[Frame] = []
    for t in doc:
        lemma = t.lemma_.lower()
        if t.pos_ not in ("VERB", "AUX") or lemma not in _DISCLOSE:
            continue
        passive = _child(t, "nsubjpass") is not None
        agent = _prep_object(t, "by") if passive else _child(t, "nsubj")
        if agent is None and t.dep_ in ("xcomp", "ccomp", "conj"):
            head = t.head  # "asked the clinic to send": the clinic sends
            agent = _child(head, "dobj") if t.dep_ == "xcomp" else _child(head, "nsubj")
        obj = _child(t, "nsubjpass") if passive else _child(t, "dobj")
        recipient = _prep_object(t, "to", "with") or _child(t, "dative")
        info = obj
        cut: int | None = None  # where the information's phrase ends (before its "to")
        if lemma in _TELL and not passive and obj is not None:
            recipient, info = obj, _prep_object(t, "about", "of")
        elif recipient is None:
            misplaced = _misplaced_to(t, agent)
            if misplaced is not None:
                recipient, cut = misplaced
            elif obj is not None and not passive and lemma in _GIVE:
                # "sent the county health department, which ..., the child's name": the
                # small parser reads the second object as the first one's apposition
                second = _child(obj, "appos")
                if second is not None:
                    recipient, info = obj, second
        also = [x for x in (obj, recipient) if x is not None]
        out.append(
            Frame(
                Phrase(t.text, t.idx, t.idx + len(t.text)),
                None if agent is None or agent.pos_ == "PRON" else _phrase(agent),
                None if info is None or info.pos_ == "PRON" else _phrase(info, until=cut),
                None if recipient is None or recipient.pos_ == "PRON" else _phrase(recipient),
                _purpose(t, also),
            )
        )
    return out


@dataclass(frozen=True)
class Statement:
    """A clause that states a fact's value (or its negation).

    Args:
        fact / value: what it states (after negation).
        clause: the clause.
        score: how close it is (1.0 for a cue).
        how: ``cue 'X'`` or ``meaning (example 'Y')``, and ``negated`` when it was.
    """

    fact: str
    value: str | None
    clause: Clause
    score: float
    how: str
    ruled_out: str | None = None  # the value a negated statement denies
    at: int | None = None  # the token that states it (cues and frames)
    hypothetical: bool | None = None  # the token's own (None: the clause's)


def _lemma_seq(nlp: Any, text: str) -> tuple[str, ...]:
    return tuple(t.lemma_.lower() for t in nlp(text.lower()) if not t.is_punct and t.pos_ != "DET")


def _find(hay: Sequence[str], needle: Sequence[str], gap: int = 2) -> int | None:
    """Where `needle` ends in `hay` (in order, at most `gap` words between its words)."""
    if not needle:
        return None
    for i, word in enumerate(hay):
        if word != needle[0]:
            continue
        at, ok = i, True
        for nxt in needle[1:]:
            window = hay[at + 1 : at + 2 + gap]
            if nxt not in window:
                ok = False
                break
            at = at + 1 + window.index(nxt)
        if ok:
            return at
    return None


def _denies_being(token: Token) -> bool:
    """Whether the clause denies that something *is* what the word names ("is not a
    health care provider", "no doctor or insurer is involved"), not merely negates
    something done near it ("the hospital does not accept restrictions")."""
    node = token
    while node.dep_ == "conj" and node.head.i != node.i:
        node = node.head
    if any(c.dep_ in ("det", "preconj") and c.lower_ in _NEG_DETERMINERS for c in node.children):
        return True
    head = node.head
    return node.dep_ in ("attr", "acomp") and head.lemma_.lower() == "be" and _negated_head(head)


def token_negated(token: Token) -> bool:
    """Whether the statement a word belongs to is negated, read from the dependency parse
    around that word only, from the word up to the verb that governs it (and through
    the verbs and nouns that verb completes or modifies):

    * a negative word on the way: ``no`` / ``neither`` as a determiner, ``not`` or
      ``never`` on a verb, ``without`` governing it, a negative subject or object
      ("no judge had signed", "nobody asked her", "did nothing with the card"), a
      negating verb ("refused to sign", "lacks any statute that requires");
    * "neither X nor Y" (Y a conjunct of X);
    * an adjective that denies it ("the form ... unsigned").

    A negation elsewhere in the sentence does not reach it.
    """
    node = token
    for _ in range(10):
        if node.lower_ == "without":
            return True
        for c in node.children:
            low = c.lower_
            if c.dep_ in ("det", "preconj") and low in _NEG_DETERMINERS:
                return True
            if c.dep_ in ("amod", "acomp", "advcl", "oprd", "conj") and low in _NEG_ADJECTIVES:
                return True
        if node.dep_ == "conj" and any(
            c.dep_ == "preconj" and c.lower_ == "neither" for c in node.head.children
        ):
            return True
        # a verb that negates by meaning ("declined", "refused") negates what it governs,
        # not itself: "she declined" states a refusal
        if node.pos_ in ("VERB", "AUX") and _negated_head(node, lexical=node is not token):
            return True
        if node.head.i == node.i:
            break
        # a verb ends the climb unless it completes or modifies what is above it
        if node.pos_ in ("VERB", "AUX") and node.dep_ not in (
            "xcomp",
            "acl",
            "relcl",
            "pcomp",
            "amod",
            "compound",
        ):
            break
        node = node.head
    return False


# what a narrative may narrow a field's reading to (a cue or a frame, never meaning alone)
_NARROWER = {
    # "which is not a health care provider", "no doctor or insurer is involved"
    "holder": {"covered_entity": {"other"}},
    "information": {
        "phi": {
            "psychotherapy_notes",
            "genetic",
            "de_identified",
            "limited_data_set",
            "employment_record",
            "education_record",
            "decedent_over_50",
        }
    },
}


def _refines(fact: str, given: FactValue, read: FactValue) -> bool:
    """Whether a fact read from the narrative narrows the value its CI field gave."""
    if read.value == given.value or not read.note.startswith(("cue", "frame", "date")):
        return False
    return read.value in _NARROWER.get(fact, {}).get(given.value, set())


_NARROW_INFO = frozenset(_NARROWER["information"]["phi"])
_YEAR = re.compile(r"\b(1[89]\d\d|20\d\d)\b")
_DEATH_YEAR = re.compile(
    r"\b(?:died|death|passed away|deceased|killed)\b[^.;]{0,60}?\b(?P<year>1[89]\d\d|20\d\d)\b",
    re.IGNORECASE,
)

WEAK_FIELD = 0.5
"""A field read by meaning no closer than this names its value only vaguely."""
WEAK_HEAD = 0.45
"""How closely a head noun that names nobody in particular ("caller", "person") counts."""


def _firm(fact: FactValue) -> bool:
    """Whether a fact was read from words that name it (a cue, a head noun, a frame, a
    date), not only by meaning."""
    return any(mark in fact.note for mark in ("cue ", "head noun", "head word", "frame ", "date:"))


WEAK_NOT_HEALTH = 0.6
"""Below this closeness, information a covered entity holds is not read as 'no health
information' (see `_health_held_by_covered_entity`)."""


def _health_held_by_covered_entity(
    facts: dict[str, FactValue], closeness: Mapping[str, float]
) -> None:
    """Information a covered entity or business associate holds about its patients or
    members is health information (160.103: created or received by a provider or plan,
    relating to care or payment for it): read as 'no health information' only when the
    field is close to such information (a credit report, a performance review)."""
    holder, info = facts.get("holder"), facts.get("information")
    if (
        holder is None
        or info is None
        or holder.value not in ("covered_entity", "business_associate")
    ):
        return
    if info.value == "not_health" and closeness.get("information", 1.0) < WEAK_NOT_HEALTH:
        facts["information"] = FactValue(
            "phi",
            info.source,
            info.quote,
            info.start,
            info.end,
            f"{info.note}; held by a {holder.value.replace('_', ' ')}: its patients' information",
        )


class FactReader:
    """Reads `Facts` from a case's CI fields and narrative (see the module docstring).

    Args:
        regulation: whose facts.
        embedder: the sentence embedding model (default: the packaged MiniLM).
        role_graph: the knowledge base's role graph (the holder's roles are read
            through it when given).
    """

    def __init__(
        self,
        regulation: str = "hipaa",
        *,
        embedder: EmbeddingModel | None = None,
        role_graph: TaxonomyGraph | None = None,
    ) -> None:
        self.schema: FactSchema = load_fact_schema(regulation)
        self.guide = load_reading_guide(regulation)
        self._embedder = embedder
        self.role_graph = role_graph
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._parses: OrderedDict[str, Any] = OrderedDict()
        self._nlp: Any = None

    # -- resources -----------------------------------------------------------------------
    @property
    def nlp(self) -> Any:
        if self._nlp is None:
            from privacy_ci.reasoning._nlp import load_nlp

            self._nlp = load_nlp()
        return self._nlp

    @property
    def embedder(self) -> EmbeddingModel:
        if self._embedder is None:
            from privacy_ci.embeddings import load_embedding_model

            self._embedder = load_embedding_model()
        return self._embedder

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of `texts` (cached: examples and repeated clauses are embedded once)."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            raw = np.asarray(self.embedder.encode(missing), dtype=np.float32)
            norms = np.linalg.norm(raw, axis=1, keepdims=True)
            unit = raw / np.where(norms == 0, 1, norms)
            with self._lock:
                for text, vec in zip(missing, unit, strict=True):
                    self._vectors[text] = vec
                while len(self._vectors) > _CACHE + len(self._bank[0]):
                    self._vectors.popitem(last=False)
        with self._lock:
            return (
                np.stack([self._vectors[t] for t in texts])
                if texts
                else np.zeros((0, 1), np.float32)
            )

    @functools.cached_property
    def _bank(self) -> tuple[list[tuple[str, str | None, str]], npt.NDArray[np.float32]]:
        """Every example: (fact, value or None for neutral, text), and their vectors."""
        rows: list[tuple[str, str | None, str]] = []
        for guide in self.guide.facts.values():
            spec = self.schema.spec(guide.name)
            for value, texts in guide.examples.items():
                rows.extend((guide.name, value, t) for t in texts)
                rows.append((guide.name, value, spec.values[value].description))
            rows.extend((guide.name, None, t) for t in guide.neutral)
            if guide.field is None or guide.name not in _FRAME_FACTS:
                rows.extend((guide.name, None, t) for t in self.guide.neutral)
        distinct = list(dict.fromkeys(r[2] for r in rows))  # the shared neutral ones once
        unique = self._example_vectors(distinct)
        at = {t: i for i, t in enumerate(distinct)}
        unit: npt.NDArray[np.float32] = unique[[at[r[2]] for r in rows]]
        return rows, unit

    def _example_vectors(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of the guide's examples, kept in the cache directory (keyed by the
        embedding model and every text): embedding them takes seconds, every start."""
        from privacy_ci.data import cache_dir
        from privacy_ci.retrieval._base import load_array_entry, save_array_entry

        model = getattr(self.embedder, "model", None)  # (a test double may have none)
        key = hashlib.sha256(json.dumps([str(model), texts]).encode("utf-8")).hexdigest()
        family = f"{self.guide.regulation}-"
        path = cache_dir() / "reading" / f"{family}{key[:16]}" if model else None
        cached = load_array_entry(path, "examples.npy", len(texts))
        if cached is not None and cached[1].get("key") == key:
            return cached[0]
        raw = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = (raw / np.where(norms == 0, 1, norms)).astype(np.float32)
        if path is not None:
            # a read-only cache only costs the next start its seconds
            with contextlib.suppress(OSError):
                save_array_entry(path, "examples.npy", unit, {"key": key, "model": model}, family)
        return unit

    @functools.cached_property
    def _anchors(self) -> dict[str, frozenset[str]]:
        """Per fact read from clauses, its frames' head words and its cues' words: a clause
        matched by meaning must contain one (embeddings alone confuse clauses that merely
        share names: "a protective order against her ex-husband" is no restriction)."""
        out: dict[str, set[str]] = {}
        for fact, by_value in self.guide.frames.items():
            words = out.setdefault(fact, set())
            for specs in by_value.values():
                for spec in specs:
                    words |= spec.verbs | spec.nouns
        for fact, _, _, lemmas in self._cues:
            out.setdefault(fact, set()).update(w for w in lemmas if len(w) > 3)
        return {k: frozenset(v) for k, v in out.items()}

    @functools.cached_property
    def _cues(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """Every cue: (fact, value, cue, its lemmas)."""
        listed = [
            (spec.name, value.name, cue)
            for spec in self.schema
            for value in spec.values.values()
            for cue in value.cues
        ]
        # in one batch, without the parser (lemmas and tags are all a cue needs)
        keep = ("tok2vec", "tagger", "attribute_ruler", "lemmatizer")
        docs = self.nlp.pipe(
            [c.lower() for _, _, c in listed],
            disable=[name for name in self.nlp.pipe_names if name not in keep],
        )
        return [
            (
                fact,
                value,
                cue,
                tuple(t.lemma_.lower() for t in d if not t.is_punct and t.pos_ != "DET"),
            )
            for (fact, value, cue), d in zip(listed, docs, strict=True)
        ]

    # -- reading -----------------------------------------------------------------------------
    def read(self, text: str | None = None, flow: Flow | None = None) -> Facts:
        """The facts of one case: its CI fields first, then its narrative.

        The narrative fills what the fields leave unknown, and it refines a field in one
        case: when the field names the flow only in general (health information, a
        covered entity) and the narrative states something narrower with a cue or a
        frame (psychotherapy notes, de-identified data, a death more than 50 years ago;
        see `_refines`).
        """
        doc = self._parse(text) if text and text.strip() else None
        given, closeness = self._read_fields(flow, doc) if flow is not None else ({}, {})
        facts = Facts(self.schema, given)
        # the purpose and consent fields may state conditions too ("to comply with state
        # law", "to avert a serious threat"): read before the narrative, which wins on a tie
        fields = [
            str(raw)
            for raw in (
                flow.principle.purpose if flow is not None else None,
                flow.principle.consent if flow is not None else None,
            )
            if raw and str(raw).strip()
        ]
        if (text and text.strip()) or fields:
            read = self.read_narrative(text or "", prefix=fields)
            keep = {
                k: v
                for k, v in read.items()
                if k not in facts
                or _refines(k, facts[k], v)
                # a field that named its value only vaguely ("the party told", "a
                # caller") gives way to the narrative's own words for it
                or (closeness.get(k, 1.0) < WEAK_FIELD and _firm(v))
            }
            facts = facts.with_facts(keep)
        return facts

    def read_fields(self, flow: Flow) -> Facts:
        """The facts the case's CI fields give (source `Source.GIVEN`, the field quoted)."""
        return Facts(self.schema, self._read_fields(flow)[0])

    def _read_fields(
        self, flow: Flow, doc: Doc | None = None
    ) -> tuple[dict[str, FactValue], dict[str, float]]:
        """The fields' facts and how closely each field named its value (`doc`: the
        narrative, where a field that only names someone finds who they are)."""
        out: dict[str, FactValue] = {}
        closeness: dict[str, float] = {}
        subject = _plain_name(flow.subject.role)
        for guide in self.guide.facts.values():
            if guide.field is None:
                continue
            raw = _FIELDS[guide.field](flow)
            if not raw or not str(raw).strip():
                continue
            if guide.name == "recipient" and subject and _plain_name(str(raw)) == subject:
                # the same words as the subject field: the individual receives it
                out["recipient"] = FactValue(
                    "subject", Source.GIVEN, str(raw), note="recipient field: the subject field"
                )
                closeness["recipient"] = 1.0
                continue
            found = self._read_field(guide.name, str(raw), doc)
            if found is not None:
                value, how, score = found
                out[guide.name] = FactValue(
                    value, Source.GIVEN, str(raw), note=f"{guide.field} field: {how}"
                )
                closeness[guide.name] = score
        _health_held_by_covered_entity(out, closeness)
        return out, closeness

    def _read_field(
        self, fact: str, text: str, doc: Doc | None = None
    ) -> tuple[str, str, float] | None:
        """The value a field (or a phrase) names, how it was found, and how close (1.0 for a
        cue, a head noun or the role graph; else the similarity of the closest example).

        A phrase that only names someone ("Mr. Ortiz", "Hollis & Sons") says nothing by
        its meaning: who they are comes from `doc`, the narrative ("Mr. Ortiz is the
        patient's shift supervisor", "her supervisor, Carla Nunez"), else it is unknown.
        """
        low = f" {self.guide.expand(text).lower()} "
        spec = self.schema.spec(fact)
        # the earliest cue, then the longest: a modifier names the kind before its head
        # ("de-identified health information", "psychotherapy notes")
        best_cue: tuple[int, int, str, str] | None = None
        for name, value_spec in spec.values.items():
            for cue in value_spec.cues:
                where = re.search(rf"(?<![\w-]){re.escape(cue.lower())}(?![\w-])", low)
                if where is not None:
                    key = (where.start(), -len(cue), name, cue)
                    if best_cue is None or key < best_cue:
                        best_cue = key
        if best_cue is not None:
            return best_cue[2], f"cue {best_cue[3]!r}", 1.0
        by_head = self._head_value(fact, text)
        if by_head is not None:
            value, how, word = by_head
            vague = fact in ("holder", "recipient") and (
                value == "other" or word in self.guide.vague_heads
            )
            return value, how, WEAK_HEAD if vague else 1.0
        if fact == "holder" and self.role_graph is not None:
            by_role = self._role_value(spec.role_terms, text)
            if by_role is not None:
                return by_role[0], by_role[1], 1.0
        if fact in ("holder", "recipient") and _only_names(self._parse(text)):
            described = _described(doc, self._parse(text)) if doc is not None else None
            if described is None or described.text.strip().lower() == text.strip().lower():
                return None
            found = self._read_field(fact, described.text)
            if found is None:
                return None
            return found[0], f"{found[1]} (the narrative: {described.text!r})", found[2]
        scores = self._scores(fact, [text])[0]
        scores.pop("", None)
        ranked = sorted(scores.items(), key=lambda kv: -kv[1][0])
        if not ranked:
            return None
        strict = self.guide.facts[fact].strict
        # a field names the thing itself, in one of the fact's values: the closest value
        # counts unless nothing is close at all (a narrow exception only when close)
        for name, (score, example) in ranked:
            if name in strict and score < STRICT_SCORE:
                continue
            if score >= FIELD_FLOOR:
                return name, f"meaning ({example!r}, {score:.2f})", score
            return None
        return None

    def _head_value(self, fact: str, text: str) -> tuple[str, str, str] | None:
        """The value a phrase's head noun names (then a word modifying it)."""
        heads = self.guide.heads.get(fact)
        if not heads:
            return None
        doc = self._parse(self.guide.expand(text))
        roots = [t for t in doc if t.head.i == t.i]
        if not roots:
            return None
        root = roots[0]
        # of a clause ("updating family", "warning people who ..."): its verb, else its
        # object or subject
        if root.pos_ in ("VERB", "AUX"):
            for form in (root.lemma_.lower(), root.lower_):
                if form in heads:
                    return heads[form], f"head word {root.text!r}", form
            root = next(
                (c for c in root.children if c.dep_ in ("dobj", "nsubj", "attr", "nsubjpass")), root
            )
        # the modifier nearest the head first ("university research team" is research)
        modifiers = sorted(
            (c for c in root.children if c.dep_ in ("compound", "amod", "nmod")),
            key=lambda c: abs(root.i - c.i),
        )
        # "of the Y" / "at the Y" / "for the Y" after a generic head names the party
        for prep in (c for c in root.children if c.dep_ == "prep"):
            modifiers += [g for g in prep.children if g.dep_ == "pobj"]
        order = [root, *modifiers]
        if root.lemma_.lower() in _WEAK_HEADS:
            # "billing company", "police department", "research team": the modifier says it
            order = [*modifiers, root]
        for token in order:
            for form in (token.lemma_.lower(), token.lower_):
                if form in heads:
                    return heads[form], f"head noun {token.text!r}", form
            if token is not root:
                for grand in token.children:  # "state health department"
                    if grand.dep_ in ("compound", "amod") and grand.lemma_.lower() in heads:
                        lemma = grand.lemma_.lower()
                        return heads[lemma], f"head noun {grand.text!r}", lemma
        return None

    def _parse(self, text: str) -> Any:
        with self._lock:
            found = self._parses.get(text)
        if found is None:
            found = self.nlp(text)
            with self._lock:
                self._parses[text] = found
                while len(self._parses) > _CACHE:
                    self._parses.popitem(last=False)
        return found

    def _role_value(
        self, role_terms: Mapping[str, Sequence[str]], text: str
    ) -> tuple[str, str] | None:
        graph = self.role_graph
        assert graph is not None
        for part in re.split(r"[/;,]| and ", text):
            part = part.strip()
            if not any(ch.isalpha() for ch in part):  # ("." resolves to a role)
                continue
            term = graph.resolve(part)
            if term is None:
                continue
            above = {term, *graph.ancestors(term)}
            for value, wanted in role_terms.items():
                resolved = {graph.resolve(w) or w for w in wanted}
                if above & resolved:
                    return value, f"role graph ({part!r} is a {sorted(above & resolved)[0]})"
        return None

    def _scores(self, fact: str, texts: Sequence[str]) -> list[dict[str, tuple[float, str]]]:
        """Per text, per value: the best similarity to its examples (and which example);
        neutral examples under the key ``""``."""
        rows, bank = self._bank
        mine = [i for i, r in enumerate(rows) if r[0] == fact]
        if not mine or not texts:
            return [{} for _ in texts]
        sims = self._embed(list(texts)) @ bank[mine].T
        out = []
        for row in sims:
            best: dict[str, tuple[float, str]] = {}
            for j, i in enumerate(mine):
                _, value, example = rows[i]
                key = value if value is not None else ""
                if key not in best or row[j] > best[key][0]:
                    best[key] = (float(row[j]), example)
            out.append(best)
        return out

    def read_narrative(
        self, text: str, *, skip: set[str] | None = None, prefix: Sequence[str] = ()
    ) -> dict[str, FactValue]:
        """The facts the narrative states (source `Source.READ`), each quoting its words:
        the flow's own facts (holder, information, recipient, purpose) from its acts of
        passing information on, the others from its clauses. `prefix`: texts read before
        the narrative for conditions only (the case's purpose and consent fields); their
        quotes carry no offsets into the narrative."""
        skip = set(skip or ())
        doc = self._parse(text)  # (`read` has parsed it already)
        out = self._read_frames(doc, skip) if text.strip() else {}
        skip |= set(out)
        # the flow's own facts from clauses only to narrow what is known ("not a health
        # care provider", "psychotherapy notes") or, for the purpose, when nothing named it
        open_core = {"information", "holder"} | ({"purpose"} - set(out))
        statements = self.statements(doc, skip=(skip | _FRAME_FACTS) - open_core)
        early = [
            replace(st, clause=replace(st.clause, start=-1, end=-1))
            for field_text in prefix
            for st in self.statements(self._parse(field_text), skip=skip | _FRAME_FACTS)
        ]
        statements = early + statements
        statements = [
            st
            for st in statements
            if st.fact not in ("information", "holder")
            or (st.fact == "information" and st.value in _NARROW_INFO)
            or (
                st.fact == "holder"
                and st.value == "other"
                and st.at is not None
                and _denies_being(doc[st.at])
            )
        ]
        by_fact: dict[str, list[Statement]] = {}
        for s in statements:
            by_fact.setdefault(s.fact, []).append(s)
        for fact, found in by_fact.items():
            chosen = self._choose(fact, found)
            if chosen is not None and chosen.value is not None:
                c = chosen.clause
                if c.start < 0:  # from a CI field: given, quoted, no offsets
                    out[fact] = FactValue(
                        chosen.value, Source.GIVEN, c.text, note=f"field: {chosen.how}"
                    )
                else:
                    out[fact] = FactValue(
                        chosen.value, Source.READ, c.text, c.start, c.end, chosen.how
                    )
        return out

    def _choose(self, fact: str, found: Sequence[Statement]) -> Statement | None:
        """Of several statements of one fact, the one that counts.

        Statements from a hypothetical clause do not count for a fact the guide marks
        `factual` (a subpoena that "might be coming"). A value ruled out by a later
        negated statement is dropped. Then the guide's `prefer` order decides (the more
        specific value: an authorization that expired over one that was signed, a
        grand jury subpoena over a subpoena); without one, the strongest statement,
        near ties going to the later (narratives run in time order).
        """
        guide = self.guide.facts.get(fact)
        if guide is not None and guide.factual:
            found = [
                s
                for s in found
                if not (s.clause.hypothetical if s.hypothetical is None else s.hypothetical)
            ]
        # words (a cue, a frame) over meaning: a match by meaning counts only when no
        # word states the fact ("a protective order" is close in meaning to a qualified
        # one, and a frame has just ruled it out)
        worded = [s for s in found if s.at is not None]
        if worded:
            found = worded
        positive = [s for s in found if s.value is not None]
        if not positive:
            return None
        ruled_out: dict[str, int] = {}
        for s in found:
            if s.ruled_out is not None:
                ruled_out[s.ruled_out] = max(ruled_out.get(s.ruled_out, -1), s.clause.start)
        positive = [s for s in positive if ruled_out.get(s.value or "", -1) < s.clause.start]
        if not positive:
            return None
        if guide is not None and guide.prefer:
            rank = {v: i for i, v in enumerate(guide.prefer)}
            best = min(rank.get(s.value or "", len(rank)) for s in positive)
            positive = [s for s in positive if rank.get(s.value or "", len(rank)) == best]
        top = max(s.score for s in positive)
        return [s for s in positive if s.score >= top - 0.03][-1]

    def _read_frames(self, doc: Doc, skip: set[str]) -> dict[str, FactValue]:
        """Holder, information, recipient and purpose from the narrative's main act of
        passing information on (the one that names the most of them, the first on a tie),
        each phrase read as its CI field would be."""
        frames = frames_of(doc)
        if not frames:
            return {}
        best = max(frames, key=lambda f: (f.filled, -f.verb.start))
        out: dict[str, FactValue] = {}
        for fact, phrase in (
            ("holder", best.holder),
            ("information", best.information),
            ("recipient", best.recipient),
            ("purpose", best.purpose),
        ):
            if fact in skip or phrase is None:
                continue
            found = self._read_field(fact, phrase.text)
            if found is not None:
                value, how, _ = found
                note = f"{fact} of '{best.verb.text}': {how}"
                out[fact] = FactValue(
                    value, Source.READ, phrase.text, phrase.start, phrase.end, note
                )
        return out

    def statements(self, text: Doc | str, *, skip: set[str] | None = None) -> list[Statement]:
        """Every clause that states a fact (before choosing among them), in text order."""
        skip = skip or set()
        doc: Doc = self.nlp(text) if isinstance(text, str) else text
        clauses = clauses_of(doc)
        if not clauses:
            return []
        out: list[Statement] = []
        out.extend(self._decedent_dates(doc, clauses, skip))
        blocked: set[tuple[str, str, int]] = set()  # (fact, value, clause) a frame ruled out
        for clause in clauses:
            words = [t for t in doc[clause.first : clause.last] if not t.is_punct]
            hay = [t.lemma_.lower() for t in words]
            for fact, value, cue, lemmas in self._cues:
                if fact in skip:
                    continue
                at = _find(hay, lemmas)
                if at is not None:
                    negated = token_negated(words[at])
                    found = self._statement(fact, value, clause, 1.0, f"cue {cue!r}", negated)
                    out.append(
                        replace(found, at=words[at].i, hypothetical=token_hypothetical(words[at]))
                    )
        for clause in clauses:
            here = set(clause.lemmas) | {t.lower_ for t in doc[clause.first : clause.last]}
            for fact, by_value in self.guide.frames.items():
                if fact in skip:
                    continue
                for value, specs in by_value.items():
                    for spec in specs:
                        if not (spec.verbs or spec.nouns) & here:
                            continue  # its head word is not in the clause
                        token = _frame_holds(spec, doc, clause)
                        if isinstance(token, _Blocked):
                            blocked.add((fact, value, clause.start))
                            continue
                        if token is None:
                            continue
                        how = f"frame {spec.describe()} ('{token.text}')"
                        if spec.own_negation:
                            found = Statement(fact, value, clause, FRAME_SCORE, how)
                        else:
                            negated = token_negated(token)
                            found = self._statement(fact, value, clause, FRAME_SCORE, how, negated)
                        out.append(
                            replace(found, at=token.i, hypothetical=token_hypothetical(token))
                        )
                        break
        # a fact a word states for certain is never taken from meaning (see `_choose`):
        # its clauses need no embedding, the costly part of reading a long narrative
        worded = {
            st.fact
            for st in out
            if st.at is not None
            and not (
                (guide_of := self.guide.facts.get(st.fact)) is not None
                and guide_of.factual
                and (st.clause.hypothetical if st.hypothetical is None else st.hypothetical)
            )
        }
        for guide in self.guide.facts.values():
            if guide.name in skip or not guide.meaning or guide.name in worded:
                continue
            anchors = self._anchors.get(guide.name, frozenset())
            # only the clauses that could state it are embedded (the costly part)
            mine = [c for c in clauses if guide.field is not None or anchors.intersection(c.lemmas)]
            per_clause = self._scores(guide.name, [c.plain or c.text for c in mine])
            for clause, scores in zip(mine, per_clause, strict=True):
                neutral = scores.pop("", (0.0, ""))[0]
                ranked = sorted(scores.items(), key=lambda kv: -kv[1][0])
                if not ranked:
                    continue
                (value, (score, example)), *rest = ranked
                second = rest[0][1][0] if rest else 0.0
                if (
                    score >= self.guide.threshold
                    and score - second >= self.guide.margin
                    and score > neutral
                    and (guide.name, value, clause.start) not in blocked
                ):
                    out.append(
                        self._statement(
                            guide.name, value, clause, score, f"meaning ({example!r}, {score:.2f})"
                        )
                    )
        out.sort(key=lambda s: s.clause.start)
        return out

    def _decedent_dates(
        self, doc: Doc, clauses: Sequence[Clause], skip: set[str]
    ) -> list[Statement]:
        """A death more than 50 years before the disclosure (160.103, PHI (2)(iv)): a year
        of death, compared with the latest year the narrative mentions after it (the
        disclosure's), else this year."""
        if "information" in skip:
            return []
        years = [int(y) for y in _YEAR.findall(doc.text)]
        out = []
        for clause in clauses:
            found = _DEATH_YEAR.search(clause.text)
            if found is None:
                continue
            died = int(found.group("year"))
            later = [y for y in years if y > died]
            now = max(later) if later else date.today().year
            if now - died > 50:
                how = f"date: died in {died}, {now - died} years before {now}"
                out.append(Statement("information", "decedent_over_50", clause, 1.0, how))
        return out

    def _statement(
        self,
        fact: str,
        value: str,
        clause: Clause,
        score: float,
        how: str,
        negated: bool | None = None,
    ) -> Statement:
        """A statement of `value`, or of its negation (`negated`: the word's own scope;
        None: the clause's polarity, for a match by meaning)."""
        if not (clause.negated if negated is None else negated):
            return Statement(fact, value, clause, score, how)
        guide = self.guide.facts.get(fact)
        becomes = guide.negation.get(value) if guide is not None else None
        return Statement(fact, becomes, clause, score, f"{how}, negated", ruled_out=value)
