"""`verify_ids`: normalise the regulation ids an LLM writes and keep the real ones.

Agent-based retrieval (section 4.2 of the Privacy Checklist paper) asks a model
for applicable rule ids and then checks them against the checklist "to filter
out misinformation". Models write ids many ways; this module reads them all:

* HIPAA: ``164.512(e)``, ``45 CFR 164.512(e)(1)(ii)``, ``45 C.F.R. § 164.512``,
  ``Section 164.508``, ``§164.502 (a)``, ``§§ 164.502(b) and 164.514(d)``,
  ``Part 164``, ``Part 164 Subpart E``, and bare ``164.512(e)(1)(ii)`` inside
  free text (bare section numbers only for the parts the tree has, so a price
  such as ``100.00`` is not read as a section);
* GDPR: ``Art. 6(1)(a)``, ``Article 9``, ``Articles 6 and 7``, ``Art 5 (1) e)``,
  ``Article 6 - Lawfulness of processing``, ``Recital 39``, ``Chapter III``;
* AI Act: ``Article 5``, ``Article 5(1)(a)``, ``Art. 50``, ``Chapter II``.

Each id is resolved against the tree (`RegulationTree.resolve`, then the KB's
tolerant `alias_resolver`). Rules:

* an id the tree has is **valid** (canonical id);
* an id whose labels go *below* the tree's granularity (GDPR ``Article 6(1)(a)``
  when the tree stops at ``Article 6(1)``, a leaf) is valid as that leaf and
  listed in ``coarsened``;
* an id naming a paragraph the tree does not have although it has that level
  (``164.512(e)(1)(ix)``: 164.512(e)(1) has (i)-(vi)) is **rejected**, as is a
  section that does not exist, a citation of another regulation, or text that
  is not an id at all. Each rejection says why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privacy_ci.regulations import RegulationTree

__all__ = ["RejectedId", "VerifiedIds", "extract_citations", "verify_ids"]

_HIPAA_PARTS = ("160", "162", "164")
_ROMAN_CHAPTER = re.compile(r"^[ivxlc]+$", re.IGNORECASE)
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}

# one paragraph label: "(a)", "( 1 )", or the "e)" of "Art 5 (1) e)"
_LABEL = r"(?:\s?\(\s*[A-Za-z0-9]{1,5}\s*\)|\s[a-z0-9]{1,3}\)(?!\w))"
_LABEL_RE = re.compile(r"\(?\s*([A-Za-z0-9]{1,5})\s*\)")

# "(1), (2)" / "(e) and (f)" after a citation: siblings of its last label
_SIBLINGS = r"(?P<siblings>(?:\s*(?:,|and|&|or)\s*\(\s*[A-Za-z0-9]{1,5}\s*\))*)"
_CFR_PREFIX = r"(?:45\s*C\.?\s*F\.?\s*R\.?\s*(?:Part\s*)?)"
_SECTION_CORE = rf"(\d{{3}}\.\d{{1,4}})((?:{_LABEL})*)"
# "§§ 164.502(b) and 164.514(d)": the prefix is optional for each number
_HIPAA_SECTION = re.compile(
    rf"(?P<prefix>{_CFR_PREFIX}?(?:§§?\s*|\bSections?\s+|\bSecs?\.\s*)?)"
    rf"\b{_SECTION_CORE}{_SIBLINGS}",
    re.IGNORECASE,
)
_HIPAA_PART = re.compile(
    rf"(?:{_CFR_PREFIX}?)\bPart\s+(\d{{3}})(?:\s*,?\s*Subparts?\s+([A-Z])(?:\s*[-–]\s*([A-Z]))?)?\b",
    re.IGNORECASE,
)
_ARTICLE = re.compile(
    rf"\bArt(?:icles?|s?\.|s?\b)\s*(?P<num>\d{{1,3}})(?P<labels>(?:{_LABEL})*){_SIBLINGS}"
    rf"(?P<more>(?:\s*(?:,|and|&|or)\s*(?:Art(?:icles?|s?\.)?\s*)?\d{{1,3}}(?:{_LABEL})*)*)",
    re.IGNORECASE,
)
_MORE_ARTICLE = re.compile(rf"(\d{{1,3}})((?:{_LABEL})*)")
_RECITAL = re.compile(r"\bRecitals?\s+(\d{1,3})\b", re.IGNORECASE)
_CHAPTER = re.compile(r"\bChapter\s+([IVXLC]+|\d{1,2})\b", re.IGNORECASE)
_ANNEX = re.compile(r"\bAnnex\s+([IVXLC]+|\d{1,2})\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RejectedId:
    """An id that was read but is not in the tree.

    Args:
        raw: the id as written.
        normalised: our reading of it (e.g. ``164.512(e)(1)(ix)``), or ``""``.
        reason: why it was rejected.
    """

    raw: str
    normalised: str
    reason: str


@dataclass(frozen=True)
class VerifiedIds:
    """The result of `verify_ids`.

    Args:
        valid: canonical tree ids, in order of first appearance, without repeats.
        rejected: the ids that are not in the tree, with reasons.
        coarsened: ``(as written, tree id)`` for ids cut back to the finest node
            the tree has (labels below the tree's granularity).
        written: canonical id -> the first spelling it was read from.
    """

    valid: tuple[str, ...] = ()
    rejected: tuple[RejectedId, ...] = ()
    coarsened: tuple[tuple[str, str], ...] = ()
    written: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.valid)


@dataclass(frozen=True, slots=True)
class _Citation:
    raw: str
    kind: str  # hipaa-section, hipaa-part, article, recital, chapter, annex
    number: str
    labels: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()


def _labels(text: str) -> tuple[str, ...]:
    return tuple(m.group(1) for m in _LABEL_RE.finditer(text or ""))


def _roman(text: str) -> int | None:
    text = text.lower()
    if not _ROMAN_CHAPTER.match(text):
        return None
    total = 0
    for i, ch in enumerate(text):
        value = _ROMAN[ch]
        total += -value if i + 1 < len(text) and _ROMAN[text[i + 1]] > value else value
    return total


def extract_citations(text: str) -> list[tuple[str, str]]:
    """Find the regulation citations in free text.

    Args:
        text: an LLM answer, a list of ids, a sentence.

    Returns:
        ``(kind, normalised citation)`` pairs in order of appearance, e.g.
        ``("hipaa", "164.512(e)(1)(ii)")``, ``("article", "Article 6(1)(a)")``.
    """
    return [(c.kind, _render(c)) for c in _find(text, parts=None)]


def _render(c: _Citation) -> str:
    labels = "".join(f"({x})" for x in c.labels)
    if c.kind == "hipaa-section":
        return f"{c.number}{labels}"
    if c.kind == "hipaa-part":
        return f"Part {c.number}" + (f" Subpart {c.extra[0]}" if c.extra else "")
    return f"{c.kind.capitalize()} {c.number}{labels}"


def _find(text: str, parts: set[str] | None) -> list[_Citation]:
    found: list[tuple[int, _Citation]] = []
    for m in _HIPAA_SECTION.finditer(text):
        section = m.group(2)
        prefixed = bool(m.group("prefix").strip())
        if not prefixed and parts is not None and section.split(".")[0] not in parts:
            continue
        labels = _labels(m.group(3))
        found.append((m.start(), _Citation(m.group(0).strip(), "hipaa-section", section, labels)))
        for sibling in _labels(m.group("siblings")) if labels else ():
            found.append(
                (
                    m.start(),
                    _Citation(
                        m.group(0).strip(), "hipaa-section", section, (*labels[:-1], sibling)
                    ),
                )
            )
    for m in _HIPAA_PART.finditer(text):
        extra = tuple(x.upper() for x in (m.group(2), m.group(3)) if x)
        found.append(
            (m.start(), _Citation(m.group(0).strip(), "hipaa-part", m.group(1), (), extra))
        )
    for m in _ARTICLE.finditer(text):
        labels = _labels(m.group("labels"))
        found.append((m.start(), _Citation(m.group(0).strip(), "article", m.group("num"), labels)))
        for sibling in _labels(m.group("siblings")) if labels else ():
            found.append(
                (
                    m.start(),
                    _Citation(
                        m.group(0).strip(), "article", m.group("num"), (*labels[:-1], sibling)
                    ),
                )
            )
        more = m.group("more") or ""
        for other in _MORE_ARTICLE.finditer(more):
            found.append(
                (
                    m.start() + 1,
                    _Citation(
                        other.group(0).strip(), "article", other.group(1), _labels(other.group(2))
                    ),
                )
            )
    for m in _RECITAL.finditer(text):
        found.append((m.start(), _Citation(m.group(0), "recital", m.group(1))))
    for m in _CHAPTER.finditer(text):
        num = m.group(1)
        roman = _roman(num)
        found.append((m.start(), _Citation(m.group(0), "chapter", str(roman) if roman else num)))
    for m in _ANNEX.finditer(text):
        found.append((m.start(), _Citation(m.group(0), "annex", m.group(1).upper())))
    found.sort(key=lambda x: x[0])
    return [c for _, c in found]


class _Verifier:
    def __init__(self, tree: RegulationTree) -> None:
        from privacy_ci.knowledge import alias_resolver

        self.tree = tree
        self.regulation = tree.regulation
        self._alias = alias_resolver(tree)
        self.parts = {
            n.id.split(".")[0] for n in tree.tree_nodes() if re.fullmatch(r"\d{3}\.\d{1,4}", n.id)
        } or set(_HIPAA_PARTS)  # other trees: still recognise (and reject) bare HIPAA sections

    def resolve(self, raw: str) -> str | None:
        node = self.tree.resolve(raw)
        if node is None:
            node = self._alias(raw)
        return node if node is not None and node in self.tree.nodes else None

    # the node for a citation's base (section, article, ...) and how labels attach
    def base(self, c: _Citation) -> tuple[str | None, str]:
        reg = self.regulation
        if c.kind == "hipaa-section":
            if reg != "hipaa":
                return None, f"{c.number} is a CFR section; this is the {reg} tree"
            node = self.resolve(c.number)
            return node, "" if node else f"no section {c.number} in the hipaa tree"
        if c.kind == "hipaa-part":
            if reg != "hipaa":
                return None, f"a CFR part; this is the {reg} tree"
            node = self.resolve(_render(c))
            return node, "" if node else f"no {_render(c)} in the hipaa tree"
        if reg == "hipaa":
            return None, f"{c.kind} citations are not HIPAA ids (HIPAA cites sections, 164.xxx)"
        if c.kind == "annex":
            return None, f"annexes are not in the {reg} tree"
        if c.kind == "recital" and reg != "gdpr":
            return None, f"recitals are not in the {reg} tree"
        name = f"{c.kind.capitalize()} {c.number}"
        node = self.resolve(name) or self.resolve(f"{c.kind}{c.number}")
        return node, "" if node else f"no {name} in the {reg} tree"

    def child(self, node: str, label: str) -> str | None:
        candidates = [f"{node}.{label}" if self.regulation == "ai_act" else f"{node}({label})"]
        for cand in candidates:
            if cand in self.tree.nodes:
                return cand
        # tolerate spellings the tree normalises (e.g. aliases)
        for cand in candidates:
            hit = self.resolve(cand)
            if hit is not None and self.tree.nodes[hit].parent == node:
                return hit
        return None

    def verify(self, c: _Citation) -> tuple[str | None, str, bool]:
        """(node, reason if rejected, coarsened?) for one citation."""
        node, reason = self.base(c)
        if node is None:
            return None, reason, False
        coarse = False
        for i, label in enumerate(c.labels):
            nxt = self.child(node, label)
            if nxt is None:
                if not self.tree.nodes[node].children:
                    coarse = True  # below the tree's granularity: keep the leaf
                    break
                where = _render(_Citation("", c.kind, c.number, c.labels[:i]))
                return None, f"no paragraph ({label}) under {where}", False
            node = nxt
        return node, "", coarse


def verify_ids(raw_ids: str | Iterable[str], tree: RegulationTree) -> VerifiedIds:
    """Normalise regulation ids and keep those the tree has.

    Args:
        raw_ids: free text (an LLM answer) or an iterable of ids; each item may
            hold several citations (``§§ 164.502(b) and 164.514(d)``) and may also
            be a node id in any spelling the tree resolves
            (``160.103(Business%20associate)(1)``, ``EU_AI_ACT.chapter2.article5``).
        tree: the regulation tree to check against.

    Returns:
        The valid canonical ids, the rejected ones with reasons, and the ids cut
        back to the tree's granularity.
    """
    items = [raw_ids] if isinstance(raw_ids, str) else [str(x) for x in raw_ids]
    verifier = _Verifier(tree)
    valid: list[str] = []
    written: dict[str, str] = {}
    rejected: list[RejectedId] = []
    coarsened: list[tuple[str, str]] = []

    def accept(node: str, raw: str) -> None:
        if node not in written:
            written[node] = raw
            valid.append(node)

    for item in items:
        text = item.strip()
        if not text:
            continue
        direct = verifier.resolve(text) if len(text) < 200 else None
        if direct is not None:
            accept(direct, text)
            continue
        citations = _find(text, verifier.parts)
        if not citations:
            if not isinstance(raw_ids, str):
                rejected.append(RejectedId(text, "", f"not a {tree.regulation} id"))
            continue
        for c in citations:
            node, reason, coarse = verifier.verify(c)
            if node is None:
                rejected.append(RejectedId(c.raw, _render(c), reason))
                continue
            if coarse and (c.raw, node) not in coarsened:
                coarsened.append((c.raw, node))
            accept(node, c.raw)
    return VerifiedIds(tuple(valid), tuple(rejected), tuple(coarsened), written)
