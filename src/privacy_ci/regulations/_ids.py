"""Regulation node ids: every spelling rule of every regulation, in one module.

Knowledge, cases, retrieval and the CLIs parse, normalise, alias and coarsen ids
through this module only. A regulation's `IdSyntax` (set in its registry entry,
`privacy_ci.regulations.RegulationSpec.ids`) selects the rules:

* ``cfr`` (HIPAA): ``164.502(a)(1)``, ``Part164SubpartE``, definitions; canonical
  spelling and published aliases below (`canonical_id`, `AliasIndex`, `resolve_id`);
* ``article`` (GDPR): ``Article 6(1)``, ``Recital 39``, ``Chapter 3``;
* ``dotted`` (AI Act): ``EU_AI_ACT.chapter2.article5.1.a``.

For every syntax: `loose_key` / `alias_resolver` (spelling-insensitive resolution),
`id_kind` and `dotted_parent` (structure read from ids), `is_malformed_id`,
`roman_to_int`; `parse_article_mention`, `article_index` and `article_node` (the
free-form article mentions of case files); `reduce_to_ancestor` (coarsening a CFR
id that names no node); `extract_citations` and `verify_ids` (ids in LLM answers).

CFR ids. Canonical ids (what `parse_ecfr_html` produces):

* ``HIPAA``, ``Part164``, ``Part164SubpartE``, ``Part162SubpartB-C``;
* sections ``164.502`` and paragraphs ``164.502(a)(1)(i)``;
* definition entries with the term in parentheses, spaces kept:
  ``160.103(Business associate)(1)(i)``, ``164.501(Payment)(2)(vi)(A)``,
  ``164.504(a)(Plan administration functions)``, ``164.304(Access)``;
* ``Appendix A to Subpart C of Part 164``.

Published spellings that map onto them:

* GoldCoin / Checklist: ``160.103(Business%20associate)(1)`` (160.103 only),
  ``164.501Payment(2)(vi)(A)``, ``164.504(a)Planadministrationfunctions``,
  ``164.304Access`` (whitespace and quotes stripped), the Checklist's curly-quoted
  parents ``164.501“Payment”(2)``, ``AppendixAtoSubpartCofPart164,Title45``;
* eCFR ``data-title`` attributes and reference stubs: ``164.501 “Payment” (1)(i)``,
  ``45 CFR 164.512``, ``§ 164.502(a)``.

`canonical_id` rewrites any spelling without a tree (it cannot put the spaces back
into a whitespace-stripped term); `AliasIndex` resolves every spelling against a
tree exactly, through `alias_key`, which is the same for all spellings of one node.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import weakref
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING
from urllib.parse import unquote

from privacy_ci.regulations._tree import NodeKind

if TYPE_CHECKING:
    from privacy_ci.regulations._tree import RegulationTree

__all__ = [
    "CFR_LABEL",
    "PRINTED_ID_ERRATA",
    "AliasIndex",
    "ArticleRef",
    "IdParts",
    "IdSyntax",
    "RejectedId",
    "Resolver",
    "VerifiedIds",
    "alias_index",
    "alias_key",
    "alias_resolver",
    "article_index",
    "article_node",
    "canonical_id",
    "cfr_kind",
    "dotted_parent",
    "exact_resolver",
    "extract_citations",
    "has_article_keyword",
    "id_kind",
    "id_spellings",
    "is_label",
    "is_malformed_id",
    "loose_key",
    "parse_article_mention",
    "reduce_to_ancestor",
    "resolve_id",
    "roman_to_int",
    "split_id",
    "syntax_of",
    "to_goldcoin_id",
    "verify_ids",
]

PRINTED_ID_ERRATA: Mapping[str, str] = {
    "160.103(ANSI)(1)": "160.103(Business associate)(1)",
}
"""Ids printed by the eCFR page (and copied by GoldCoin) that name the wrong node.

The page gives paragraph (1) of the "Business associate" definition the id
``p-160.103(ANSI)(1)``; the HTML nesting shows where it really belongs.
"""

CFR_LABEL = r"(?:[a-z]{1,2}|[ivxlc]{1,7}|\d{1,3}|[A-Z])"
"""A CFR paragraph label (``a``, ``2``, ``iv``, ``B``), as a regular-expression fragment."""
_LABEL_RE = re.compile(rf"{CFR_LABEL}")
_LABEL_TOKEN_RE = re.compile(rf"\(({CFR_LABEL})\)")
_SECTION_RE = re.compile(r"\d{1,4}[a-z]?\.\d{1,4}[a-z]?")
_PART_RE = re.compile(
    r"(?i)^(?:45\s*CFR\s*)?part\s*(\d+)(?:\s*subparts?\s*([A-Z])(?:\s*[-–]\s*([A-Z]))?)?$"
)
_APPENDIX_RE = re.compile(
    r"(?i)^appendix\s*([A-Z])\s*to\s*subpart\s*([A-Z])\s*of\s*part\s*(\d+)(?:\s*,\s*title\s*45)?$"
)
_PREFIX_RE = re.compile(r"^(?:45\s*CFR\s*|§§?\s*|sections?\s+)+", re.IGNORECASE)
_QUOTES = "“”\"'‘’"
_SQUASH_RE = re.compile(r"[\s“”\"'‘’]+")


def is_label(text: str) -> bool:
    """Whether ``text`` is a paragraph label such as ``a``, ``2``, ``iv`` or ``B``.

    Args:
        text: the text between the parentheses.

    Returns:
        True for CFR paragraph designations, False for defined terms like ``ANSI``.
    """
    return _LABEL_RE.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class IdParts:
    """A section-based id split into its pieces.

    Attributes:
        section: the section number, e.g. ``164.504``.
        before: paragraph labels before the defined term, e.g. ``("a",)``.
        term: the defined term (None for plain paragraphs).
        after: labels after the term (all labels when there is no term).
    """

    section: str
    before: tuple[str, ...] = ()
    term: str | None = None
    after: tuple[str, ...] = ()

    @property
    def labels(self) -> tuple[str, ...]:
        """Every paragraph label, in order (the term is left out)."""
        return self.before + self.after

    def render(self) -> str:
        """The canonical spelling.

        Returns:
            E.g. ``164.504(a)(Plan administration functions)``.
        """
        out = self.section + "".join(f"({x})" for x in self.before)
        if self.term is not None:
            out += f"({self.term})"
        return out + "".join(f"({x})" for x in self.after)


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis that closes the one at ``start`` (or len)."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _clean_term(term: str) -> str:
    term = unquote(term).strip().strip(_QUOTES).strip()
    return " ".join(term.split())


def split_id(raw: str) -> IdParts | None:
    """Split a section-based id (any supported spelling) into its pieces.

    Args:
        raw: e.g. ``164.502(a)(1)``, ``164.501 “Payment” (1)(i)``,
            ``160.103(Business%20associate)(1)``, ``164.504(a)Planadministrationfunctions``.

    Returns:
        The pieces, or None when ``raw`` does not start with a section number.
    """
    text = _PREFIX_RE.sub("", raw.strip())
    m = _SECTION_RE.match(text)
    if m is None:
        return None
    section = m.group(0)
    before: list[str] = []
    after: list[str] = []
    term: str | None = None
    i = m.end()
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in '“"':
            close = "”" if ch == "“" else '"'
            j = text.find(close, i + 1)
            j = n if j < 0 else j
            if term is not None:
                return None
            term = _clean_term(text[i + 1 : j])
            i = j + 1
            continue
        if ch == "(":
            j = _balanced(text, i)
            inner = text[i + 1 : j - 1] if text[j - 1 : j] == ")" else text[i + 1 : j]
            if is_label(inner):
                (after if term is not None else before).append(inner)
            else:
                if term is not None:
                    return None
                term = _clean_term(inner)
            i = j
            continue
        # a bare, whitespace-stripped term (GoldCoin style): up to the next label
        if term is not None:
            return None
        j = i
        while j < n:
            if text[j] == "(":
                lm = _LABEL_TOKEN_RE.match(text, j)
                if lm is not None:
                    break
                j = _balanced(text, j)
                continue
            j += 1
        term = _clean_term(text[i:j])
        i = j
    if term is None:
        return IdParts(section, (), None, tuple(before))
    return IdParts(section, tuple(before), term, tuple(after))


def canonical_id(raw: str) -> str:
    """Rewrite an id in any supported spelling into our canonical spelling.

    Without a tree, a whitespace-stripped term (``164.304Access``,
    ``164.501Payment``) cannot get its spaces back; use `AliasIndex` for exact
    resolution against a tree.

    Args:
        raw: e.g. ``160.103(Business%20associate)(1)(i)``, ``164.501 “Payment” (2)``,
            ``45 CFR 164.512``, ``Part 164 Subpart E``, ``AppendixAtoSubpartCofPart164,Title45``.

    Returns:
        The canonical id, e.g. ``160.103(Business associate)(1)(i)``; unrecognised
        input comes back whitespace-normalised.
    """
    text = " ".join(raw.split())
    if text in ("HIPAA", ""):
        return text
    bare = _PREFIX_RE.sub("", text)
    pm = _PART_RE.match(bare)
    if pm is not None:
        out = f"Part{int(pm.group(1))}"
        if pm.group(2):
            out += f"Subpart{pm.group(2).upper()}"
            if pm.group(3):
                out += f"-{pm.group(3).upper()}"
        return out
    am = _APPENDIX_RE.match(bare)
    if am is not None:
        return (
            f"Appendix {am.group(1).upper()} to Subpart {am.group(2).upper()} "
            f"of Part {int(am.group(3))}"
        )
    parts = split_id(text)
    if parts is None:
        return text
    return parts.render()


def _squash(term: str) -> str:
    return _SQUASH_RE.sub("", term).casefold()


def alias_key(raw: str) -> str:
    """A key that is equal for every spelling of one node.

    It is the canonical id with the defined term stripped of whitespace and quotes
    and case-folded, so ``164.504(a)Planadministrationfunctions`` and
    ``164.504(a)(Plan administration functions)`` share a key. Labels stay
    case-sensitive: ``(a)`` and ``(A)`` are different paragraphs.

    Args:
        raw: an id in any supported spelling.

    Returns:
        The key.
    """
    canon = canonical_id(raw)
    parts = split_id(canon)
    if parts is None or parts.term is None:
        return canon
    return IdParts(parts.section, parts.before, _squash(parts.term), parts.after).render()


def to_goldcoin_id(canonical: str) -> str:
    """The GoldCoin / Checklist spelling of a canonical id.

    Args:
        canonical: e.g. ``160.103(Business associate)(1)``, ``164.501(Payment)(2)``,
            ``Appendix A to Subpart C of Part 164``.

    Returns:
        E.g. ``160.103(Business%20associate)(1)``, ``164.501Payment(2)``,
        ``AppendixAtoSubpartCofPart164,Title45``.
    """
    am = _APPENDIX_RE.match(canonical)
    if am is not None:
        return f"Appendix{am.group(1)}toSubpart{am.group(2)}ofPart{am.group(3)},Title45"
    parts = split_id(canonical)
    if parts is None or parts.term is None:
        return canonical
    before = "".join(f"({x})" for x in parts.before)
    after = "".join(f"({x})" for x in parts.after)
    if parts.section == "160.103" and not parts.before:
        return f"{parts.section}{before}({parts.term.replace(' ', '%20')}){after}"
    squashed = _SQUASH_RE.sub("", parts.term)
    return f"{parts.section}{before}{squashed}{after}"


def id_spellings(canonical: str) -> list[str]:
    """Every published spelling of a canonical id (canonical first, no duplicates).

    Args:
        canonical: a canonical id.

    Returns:
        The canonical id, the GoldCoin id, the Checklist curly-quoted parent id,
        the eCFR ``data-title`` spelling and ``45 CFR <section>`` for sections.
    """
    out = [canonical, to_goldcoin_id(canonical)]
    parts = split_id(canonical)
    if parts is not None:
        before = "".join(f"({x})" for x in parts.before)
        after = "".join(f"({x})" for x in parts.after)
        if parts.term is not None:
            squashed = _SQUASH_RE.sub("", parts.term)
            out.append(f"{parts.section}{before}“{squashed}”{after}")
            title = f"{parts.section}{before} “{parts.term}”"
            out.append(f"{title} {after}" if after else title)
        elif not parts.labels:
            out.append(f"45 CFR {parts.section}")
    return list(dict.fromkeys(out))


class AliasIndex:
    """Resolves any spelling of a HIPAA node id to the tree's own id, exactly.

    Build it once per tree (`alias_index` caches it); a lookup is one
    normalisation plus a dict access.

    Args:
        ids: the tree's node ids.
        extra: more alias -> node id pairs (e.g. printed ids the parser corrected);
            `PRINTED_ID_ERRATA` is always added for targets that exist.
    """

    def __init__(self, ids: Iterable[str], extra: Mapping[str, str] | None = None) -> None:
        self._ids: set[str] = set()
        self._keys: dict[str, str] = {}
        self.collisions: dict[str, list[str]] = {}
        for node_id in ids:
            self._ids.add(node_id)
            key = alias_key(node_id)
            other = self._keys.get(key)
            if other is not None and other != node_id:
                self.collisions.setdefault(key, [other]).append(node_id)
                continue
            self._keys[key] = node_id
        self._extra: dict[str, str] = {}
        for alias, target in {**PRINTED_ID_ERRATA, **(extra or {})}.items():
            resolved = target if target in self._ids else self._keys.get(alias_key(target))
            if resolved is not None:
                self._extra[alias] = resolved
                self._extra.setdefault(alias_key(alias), resolved)

    @classmethod
    def from_tree(cls, tree: RegulationTree, extra: Mapping[str, str] | None = None) -> AliasIndex:
        """Index the nodes of a tree.

        Args:
            tree: the tree whose ids are the targets.
            extra: more alias -> node id pairs.

        Returns:
            The index.
        """
        return cls(tree.nodes, extra)

    def resolve(self, raw: str) -> str | None:
        """The tree's id for any spelling of a node.

        Args:
            raw: e.g. ``164.501Payment(2)(vi)(A)`` or ``160.103(Business%20associate)``.

        Returns:
            The node id, or None when no node has that id.
        """
        if raw in self._ids:
            return raw
        hit = self._extra.get(raw)
        if hit is not None:
            return hit
        key = alias_key(raw)
        return self._keys.get(key) or self._extra.get(key)

    def __contains__(self, raw: object) -> bool:
        return isinstance(raw, str) and self.resolve(raw) is not None

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def aliases(self) -> dict[str, str]:
        """Every published spelling -> node id (for export or a tree ``aliases`` field).

        Returns:
            A dict from each spelling that differs from the node id to the node id.
        """
        out: dict[str, str] = {}
        for node_id in self._ids:
            for spelling in id_spellings(node_id)[1:]:
                if spelling != node_id:
                    out.setdefault(spelling, node_id)
        for alias, target in self._extra.items():
            if alias not in self._ids:
                out.setdefault(alias, target)
        return out


_CACHE: dict[int, tuple[weakref.ref[RegulationTree], int, AliasIndex]] = {}


def _forget(key: int) -> Callable[[weakref.ref[RegulationTree]], None]:
    def callback(_ref: weakref.ref[RegulationTree]) -> None:
        _CACHE.pop(key, None)

    return callback


def alias_index(tree: RegulationTree) -> AliasIndex:
    """The (cached) `AliasIndex` of a tree.

    Args:
        tree: a regulation tree; the cache entry is dropped with the tree and
            rebuilt if the tree gains or loses nodes. Its regulation's registered
            aliases (`RegulationSpec.aliases`) are added.

    Returns:
        The index.
    """
    key = id(tree)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is tree and hit[1] == len(tree.nodes):
        return hit[2]
    index = AliasIndex.from_tree(tree, _registered_aliases(tree.regulation))
    _CACHE[key] = (weakref.ref(tree, _forget(key)), len(tree.nodes), index)
    return index


def resolve_id(tree: RegulationTree, raw: str) -> str | None:
    """Resolve any spelling of a node id against a tree.

    Args:
        tree: the tree.
        raw: e.g. ``164.501Payment(2)(vi)(A)``, ``45 CFR 164.512``, ``164.304Access``.

    Returns:
        The tree's node id, or None for an unknown id.
    """
    if raw in tree.nodes:
        return raw
    return alias_index(tree).resolve(raw)


# ---------------------------------------------------------------------------------
# id syntaxes
# ---------------------------------------------------------------------------------
class IdSyntax(StrEnum):
    """How a regulation spells its node ids (`RegulationSpec.ids`)."""

    CFR = "cfr"
    """Sections with paragraph labels: ``164.502(a)(1)``, ``Part164SubpartE`` (HIPAA)."""
    ARTICLE = "article"
    """Articles with parenthesised paragraphs: ``Article 6(1)``, ``Recital 39`` (GDPR)."""
    DOTTED = "dotted"
    """Dotted paths from the root: ``EU_AI_ACT.chapter2.article5.1.a`` (AI Act)."""

    def child_id(self, parent: str, label: str) -> str:
        """The id of paragraph ``label`` under ``parent``.

        Args:
            parent: e.g. ``Article 6`` or ``EU_AI_ACT.chapter2.article5``.
            label: e.g. ``1`` or ``a``.

        Returns:
            ``Article 6(1)`` (cfr, article) or ``EU_AI_ACT.chapter2.article5.1`` (dotted).
        """
        return f"{parent}.{label}" if self is IdSyntax.DOTTED else f"{parent}({label})"


def syntax_of(regulation: str) -> IdSyntax:
    """The id syntax of a regulation.

    Args:
        regulation: a regulation key (a tree's ``regulation``).

    Returns:
        Its registry entry's syntax; ``article`` for an unregistered regulation
        (parenthesised labels, no CFR sections).
    """
    from privacy_ci.regulations._registry import find_regulation

    spec = find_regulation(regulation)
    return spec.ids if spec is not None else IdSyntax.ARTICLE


def _registered_aliases(regulation: str) -> Mapping[str, str]:
    from privacy_ci.regulations._registry import find_regulation

    spec = find_regulation(regulation)
    return spec.aliases if spec is not None else {}


def _law_name(regulation: str) -> str:
    from privacy_ci.regulations._registry import find_regulation

    spec = find_regulation(regulation)
    return spec.name if spec is not None else regulation


# ---------------------------------------------------------------------------------
# any syntax: numbers, well-formedness, structure
# ---------------------------------------------------------------------------------
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}


def roman_to_int(text: str) -> int | None:
    """Read a Roman numeral (chapters and annexes: ``III``, ``iv``).

    Args:
        text: the numeral, in either case.

    Returns:
        Its value, or None when ``text`` is not made of i, v, x, l, c.
    """
    text = text.lower()
    if not text or any(ch not in _ROMAN for ch in text):
        return None
    total = 0
    for i, ch in enumerate(text):
        value = _ROMAN[ch]
        total += -value if i + 1 < len(text) and _ROMAN[text[i + 1]] > value else value
    return total


# Characters that never occur in a well-formed node id: they come from text
# fragments cut into ids (AI Act ``article102.[*``, ``article105.‘5``).
_MALFORMED_ID = re.compile(r"[\[\]*‘’“”\"{}<>\n\t]")


def is_malformed_id(raw: str) -> bool:
    """Whether an id holds a character no node id has (a text fragment cut into it).

    Args:
        raw: an id as written in a KB file, e.g. ``EU_AI_ACT.chapter13.article102.[*``.

    Returns:
        True for ids with brackets, asterisks, curly or straight double quotes,
        braces, angle brackets, newlines or tabs.
    """
    return _MALFORMED_ID.search(raw) is not None


def cfr_kind(node_id: str, root: str = "HIPAA") -> NodeKind:
    """The kind of a CFR node, read from its id.

    Args:
        node_id: e.g. ``Part164SubpartE``, ``164.502``, ``164.501Payment(2)``.
        root: the tree's root id.

    Returns:
        root, part, subpart, section, appendix, definition or paragraph.
    """
    if node_id == root:
        return NodeKind.ROOT
    if re.fullmatch(r"Part\d+", node_id):
        return NodeKind.PART
    if re.fullmatch(r"Part\d+Subpart[A-Z](-[A-Z])?", node_id):
        return NodeKind.SUBPART
    if re.fullmatch(r"\d+\.\d+", node_id):
        return NodeKind.SECTION
    if node_id.startswith("Appendix"):
        return NodeKind.APPENDIX
    if re.match(r"\d+\.\d+(\([a-z]\))?[A-Z“]", node_id) or re.match(r"160\.103\([A-Z]", node_id):
        return NodeKind.DEFINITION
    return NodeKind.PARAGRAPH


def id_kind(node_id: str, syntax: IdSyntax, root: str) -> NodeKind:
    """The kind of a node, read from its id.

    Args:
        node_id: e.g. ``Chapter 3``, ``Article 6(1)``, ``EU_AI_ACT.chapter2.article5``.
        syntax: the regulation's id syntax.
        root: the tree's root id.

    Returns:
        root, chapter, section, article, recital, appendix (annexes) or paragraph;
        `cfr_kind` for CFR ids.
    """
    if syntax is IdSyntax.CFR:
        return cfr_kind(node_id, root)
    if node_id == root:
        return NodeKind.ROOT
    last = node_id.split(".")[-1] if syntax is IdSyntax.DOTTED else node_id
    if last.lower().startswith("chapter"):
        return NodeKind.CHAPTER
    if last.lower().startswith("section"):
        return NodeKind.SECTION
    if re.fullmatch(r"(?i)article ?\d+", last):
        return NodeKind.ARTICLE
    if last.startswith("Recital"):
        return NodeKind.RECITAL
    if last.lower().startswith("annex"):
        return NodeKind.APPENDIX
    return NodeKind.PARAGRAPH


def dotted_parent(node_id: str, nodes: Container[str]) -> str | None:
    """The parent of a dotted id: its longest dotted prefix that is a node.

    Args:
        node_id: e.g. ``EU_AI_ACT.chapter3.section3-3.article16.a``.
        nodes: the ids that exist.

    Returns:
        E.g. ``EU_AI_ACT.chapter3.section3-3.article16``, or None when no prefix is a node.
    """
    parts = node_id.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:cut])
        if candidate in nodes:
            return candidate
    return None


# ---------------------------------------------------------------------------------
# any syntax: spelling-insensitive resolution
# ---------------------------------------------------------------------------------
Resolver = Callable[[str], str | None]
"""Maps an id as written (in a KB file, a case, an answer) to a tree node id (None: no node)."""

_PAREN = re.compile(r"\(([^()]*)\)")
_PARAGRAPH_LABEL = re.compile(r"[a-z]|[ivxlcdm]+|\d+")
_ROMAN_CHAPTER = re.compile(r"\b(chapter)[ _]+([ivxlc]+)\b")
_LOOSE_DROP = re.compile(r"[\s_\"'‘’“”]+")


def loose_key(node_id: str) -> str:
    """A spelling-insensitive key of a node id, for any syntax.

    Lowercase; ``%20``, whitespace, underscores and quotes removed; Roman chapter
    numbers read as numbers; parentheses around a *term* (not a paragraph label
    such as ``(a)``, ``(iv)``, ``(2)``) removed. So ``160.103(Business associate)(1)``
    and ``160.103(Business%20associate)(1)`` share a key, and so do
    ``164.504(a)(Plan administration functions)`` and
    ``164.504(a)Planadministrationfunctions``; ``Article 4(6)`` and ``Article 46``
    do not.

    Args:
        node_id: an id in any spelling.

    Returns:
        The key.
    """
    text = node_id.replace("%20", " ").lower()
    text = _ROMAN_CHAPTER.sub(lambda m: f"{m.group(1)}{roman_to_int(m.group(2))}", text)
    text = _LOOSE_DROP.sub("", text)

    def unwrap(m: re.Match[str]) -> str:
        inner = m.group(1)
        return m.group(0) if _PARAGRAPH_LABEL.fullmatch(inner) else inner

    return _PAREN.sub(unwrap, text)


def exact_resolver(tree: RegulationTree) -> Resolver:
    """An id resolves to itself if the tree has that node.

    Args:
        tree: the regulation tree.

    Returns:
        The resolver.
    """

    def resolve(kb_id: str) -> str | None:
        return kb_id if kb_id in tree else None

    return resolve


def alias_resolver(tree: RegulationTree) -> Resolver:
    """A resolver tolerant of spelling differences, for ids that are not exact node ids.

    Tried in order: the exact id; a spelling-insensitive key (`loose_key`: case,
    ``%20`` vs spaces, whitespace, quotes, brackets and underscores ignored; Roman
    chapter numbers read as numbers), so ``160.103(Business associate)(1)`` finds
    ``160.103(Business%20associate)(1)``, ``164.504(a)(Plan administration
    functions)`` finds ``164.504(a)Planadministrationfunctions`` and
    ``article_89``/``Chapter III`` find GDPR ``Article 89``/``Chapter 3``; a bare
    last segment of a dotted id (AI Act ``article5`` ->
    ``EU_AI_ACT.chapter2.article5``); finally the regulation's registered
    aliases (`RegulationSpec.aliases`). Keys shared by several nodes are ambiguous
    and never used.

    Args:
        tree: the regulation tree.

    Returns:
        The resolver.
    """
    by_key: dict[str, str | None] = {}
    by_tail: dict[str, str | None] = {}
    for node_id in tree.nodes:
        key = loose_key(node_id)
        by_key[key] = None if key in by_key and by_key[key] != node_id else node_id
        if "." in node_id and not node_id[0].isdigit():
            tail = node_id.rsplit(".", 1)[1]
            if tail[:1].isalpha() and any(ch.isdigit() for ch in tail):
                tkey = loose_key(tail)
                by_tail[tkey] = None if tkey in by_tail and by_tail[tkey] != node_id else node_id
    aliases = _registered_aliases(tree.regulation)

    def lookup(kb_id: str) -> str | None:
        if kb_id in tree:
            return kb_id
        key = loose_key(kb_id)
        return by_key.get(key) or by_tail.get(key)

    def resolve(kb_id: str) -> str | None:
        found = lookup(kb_id)
        if found is None and kb_id in aliases:
            found = lookup(aliases[kb_id])
        return found

    return resolve


# ---------------------------------------------------------------------------------
# coarsening (CFR)
# ---------------------------------------------------------------------------------
_TRAILING_LABEL = re.compile(r"(.*\S)\s*\([^()]*\)")


def reduce_to_ancestor(tree: RegulationTree, raw: str) -> str | None:
    """The nearest existing ancestor of an id that names no node.

    Trailing parenthesised labels are dropped one at a time until the rest
    resolves (``164.512(e)(1)(ix)`` -> ``164.512(e)(1)``).

    Args:
        tree: the tree.
        raw: the id, in any spelling `RegulationTree.resolve` reads.

    Returns:
        The ancestor's node id, or None when no shorter id resolves.
    """
    current = raw.strip()
    while True:
        m = _TRAILING_LABEL.fullmatch(current)
        if m is None:
            return None
        current = m.group(1)
        node = tree.resolve(current)
        if node is not None:
            return node


# ---------------------------------------------------------------------------------
# article mentions of case files (article and dotted syntaxes)
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ArticleRef:
    """One article reference read from a mention.

    Args:
        article: the article number.
        paragraph: the paragraph number, if given.
        point: the point letter (``f`` in ``5(1)(f)``), if given.
    """

    article: int
    paragraph: int | None = None
    point: str | None = None


_DASHES = re.compile(r"\s*:\s+|\s+[-–—]\s+|\s+[-–—]$")
_LABEL_PAREN = r"(?:\d{1,3}|[a-z]{1,2}|[ivx]{1,5})"
_TITLE_PAREN = re.compile(rf"\((?!{_LABEL_PAREN}\))[^()]*\)")
_FOREIGN = re.compile(
    r"\bof\s+(?:the\s+)?([A-Z][\w'-]*)(?:\s+[\w'-]+){0,5}?"
    r"\s+(?:Act|Law|Code|Constitution|Directive|Decree|Ordinance|Statute)\b"
)
# Words that may start the name of a registered law after "of (the)": not a foreign law.
_OWN_LAW_PREFIXES = frozenset({"UK", "EU", "Regulation"})


@functools.lru_cache(maxsize=16)
def _law_names(titles: tuple[str, ...]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """The first words of the registered laws' titles, and a pattern for their names."""
    own = _OWN_LAW_PREFIXES | {t.split()[0] for t in titles}
    names = "|".join(r"\s+".join(map(re.escape, t.split())) for t in titles)
    if not names:
        return own, None
    pattern = rf"\b(?:of\s+)?(?:the\s+)?(?:UK\s+|EU\s+)?(?:{names})\b"
    return own, re.compile(pattern, re.IGNORECASE)


def _registered_titles() -> tuple[str, ...]:
    from privacy_ci.regulations._registry import regulations

    return tuple(t for spec in regulations() for t in spec.titles if t.strip())


_KEYWORD = re.compile(r"\bArt(?:icle)?s?\b\.?", re.IGNORECASE)
_BARE = re.compile(r"\d{1,3}(?:\s*\(\d{1,3}\))?(?:\s*\(?[a-z]\))*")
_SPLIT = re.compile(r"\s*(?:,|;|&|\band\b|\bor\b)\s*")
_HEAD_REF = re.compile(
    r"(\d{1,3})(?![\d])"
    r"(?:\s*\((\d{1,3})\)|\.(\d{1,3})(?!\d)|\s+(?:nr|no|para(?:graph)?)\.?\s*(\d{1,3}))?"
    r"(?:\s*\(?([a-z])\)|\.([a-z])\b)?"
)
_PARA_REF = re.compile(r"\((\d{1,3})\)(?:\s*\(?([a-z])\))?")
_POINT_REF = re.compile(r"\(?([a-z])\)")


def _clean_mention(raw: str) -> str:
    text = unicodedata.normalize("NFKC", raw).replace("*", " ")
    return " ".join(text.split())


def has_article_keyword(raw: str) -> bool:
    """Whether a mention says ``Art``/``Article`` (else a bare number was read as one).

    Args:
        raw: the mention.

    Returns:
        True when the keyword is there.
    """
    return _KEYWORD.search(raw) is not None


def parse_article_mention(raw: str) -> tuple[list[ArticleRef], str]:
    """Read the article references of a free-form mention.

    Titles (``Article 6 - Lawfulness of processing``, ``Article 6 (Lawfulness of
    processing)``), the name of a registered law (`RegulationSpec.titles`: ``GDPR``,
    ``of the GDPR``, ``UK GDPR``, ``AI Act``) and trailing words (``subparagraph 2``)
    are ignored; lists (``Articles 5, 6, 7``,
    ``Articles 38 and 39``, ``Art. 13 (1), (2)``) give one reference each.

    Args:
        raw: the mention, e.g. ``Art. 5 (1) f) GDPR`` or ``Articles 38 and 39 of the GDPR``.

    Returns:
        ``(refs, problem)``: the references in order, and, when there are none, why
        (``"cites another law: …"``, ``"no article number"``). A mention with no
        ``Art``/``Article`` keyword that is just a number (``14(1)(c)``) is read as
        an article, with the problem ``""`` and the reference returned.
    """
    own_words, law_name = _law_names(_registered_titles())
    text = _clean_mention(raw)
    head = _DASHES.split(text, maxsplit=1)[0]
    head = _TITLE_PAREN.sub(" ", head)
    for m in _FOREIGN.finditer(head):
        if m.group(1) not in own_words:
            return [], f"cites another law: {head[m.start() :].strip()!r}"
    if law_name is not None:
        head = " ".join(law_name.sub(" ", head).split())
    starts = [m.end() for m in _KEYWORD.finditer(head)]
    if not starts:
        if _BARE.fullmatch(head):
            bodies = [head]
        else:
            return [], "no article number"
    else:
        ends = [*(m.start() for m in _KEYWORD.finditer(head)), len(head)][1:]
        bodies = [head[s:e] for s, e in zip(starts, ends, strict=True)]
    refs: list[ArticleRef] = []
    for body in bodies:
        last: int | None = None
        for chunk in _SPLIT.split(body.strip()):
            chunk = chunk.strip()
            if not chunk:
                continue
            head_ref = _HEAD_REF.match(chunk)
            if head_ref is not None:
                article = int(head_ref.group(1))
                para = head_ref.group(2) or head_ref.group(3) or head_ref.group(4)
                point = head_ref.group(5) or head_ref.group(6)
                refs.append(ArticleRef(article, int(para) if para else None, point))
                last = article
                continue
            p = _PARA_REF.match(chunk)
            if p is not None and last is not None:
                refs.append(ArticleRef(last, int(p.group(1)), p.group(2)))
                continue
            if _POINT_REF.match(chunk) is not None and last is not None:
                continue  # another point of the same paragraph: no finer node to add
            break  # trailing words ("subparagraph 2", a title without a dash)
    if not refs:
        return [], "no article number"
    return refs, ""


def article_index(tree: RegulationTree, syntax: IdSyntax) -> dict[int, str]:
    """Article number -> the article's node.

    Args:
        tree: the tree.
        syntax: ``article`` (nodes ``Article N``) or ``dotted`` (nodes
            ``<root>[.chapterX[.sectionX-Y]].articleN``).

    Returns:
        The index (the first node of a number wins).
    """
    if syntax is IdSyntax.DOTTED:
        pattern = re.compile(rf"{re.escape(tree.root)}(?:\.[\w-]+)*\.article(\d+)")
    else:
        pattern = re.compile(r"Article (\d+)")
    index: dict[int, str] = {}
    for node_id in tree.nodes:
        m = pattern.fullmatch(node_id)
        if m is not None:
            index.setdefault(int(m.group(1)), node_id)
    return index


def article_node(
    tree: RegulationTree, ref: ArticleRef, syntax: IdSyntax, articles: Mapping[int, str]
) -> tuple[str | None, bool]:
    """The deepest node for an article reference, and whether detail was dropped.

    Args:
        tree: the tree.
        ref: the reference.
        syntax: the regulation's id syntax (points are nodes only in dotted trees).
        articles: `article_index` of the tree.

    Returns:
        ``(node, coarsened)``: the paragraph (or point) node when it exists, else the
        article; None when the article is not in the tree.
    """
    article = articles.get(ref.article)
    if article is None:
        return None, False
    dotted = syntax is IdSyntax.DOTTED
    candidates: list[str] = []
    if ref.paragraph is not None:
        para = syntax.child_id(article, str(ref.paragraph))
        if dotted and ref.point is not None:
            candidates.append(syntax.child_id(para, ref.point))
        candidates.append(para)
    for i, cand in enumerate(candidates):
        if cand in tree.nodes:
            return cand, i > 0 or (not dotted and ref.point is not None)
    return article, ref.paragraph is not None or ref.point is not None


# ---------------------------------------------------------------------------------
# citations in free text (LLM answers): extract and verify
# ---------------------------------------------------------------------------------
_HIPAA_PARTS = ("160", "162", "164")

# one paragraph label: "(a)", "( 1 )", or the "e)" of "Art 5 (1) e)"
_CITE_LABEL = r"(?:\s?\(\s*[A-Za-z0-9]{1,5}\s*\)|\s[a-z0-9]{1,3}\)(?!\w))"
_CITE_LABEL_RE = re.compile(r"\(?\s*([A-Za-z0-9]{1,5})\s*\)")

# "(1), (2)" / "(e) and (f)" after a citation: siblings of its last label
_SIBLINGS = r"(?P<siblings>(?:\s*(?:,|and|&|or)\s*\(\s*[A-Za-z0-9]{1,5}\s*\))*)"
_CFR_PREFIX = r"(?:45\s*C\.?\s*F\.?\s*R\.?\s*(?:Part\s*)?)"
_SECTION_CORE = rf"(\d{{3}}\.\d{{1,4}})((?:{_CITE_LABEL})*)"
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
    rf"\bArt(?:icles?|s?\.|s?\b)\s*(?P<num>\d{{1,3}})(?P<labels>(?:{_CITE_LABEL})*){_SIBLINGS}"
    rf"(?P<more>(?:\s*(?:,|and|&|or)\s*(?:Art(?:icles?|s?\.)?\s*)?\d{{1,3}}(?:{_CITE_LABEL})*)*)",
    re.IGNORECASE,
)
_MORE_ARTICLE = re.compile(rf"(\d{{1,3}})((?:{_CITE_LABEL})*)")
_RECITAL = re.compile(r"\bRecitals?\s+(\d{1,3})\b", re.IGNORECASE)
_CHAPTER = re.compile(r"\bChapter\s+([IVXLC]+|\d{1,2})\b", re.IGNORECASE)
_ANNEX = re.compile(r"\bAnnex\s+([IVXLC]+|\d{1,2})\b", re.IGNORECASE)
_SECTION_ID = re.compile(r"\d{3}\.\d{1,4}")


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


def _cite_labels(text: str) -> tuple[str, ...]:
    return tuple(m.group(1) for m in _CITE_LABEL_RE.finditer(text or ""))


def extract_citations(text: str) -> list[tuple[str, str]]:
    """Find the regulation citations in free text.

    Args:
        text: an LLM answer, a list of ids, a sentence.

    Returns:
        ``(kind, normalised citation)`` pairs in order of appearance, e.g.
        ``("hipaa-section", "164.512(e)(1)(ii)")``, ``("article", "Article 6(1)(a)")``.
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
        labels = _cite_labels(m.group(3))
        found.append((m.start(), _Citation(m.group(0).strip(), "hipaa-section", section, labels)))
        for sibling in _cite_labels(m.group("siblings")) if labels else ():
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
        labels = _cite_labels(m.group("labels"))
        found.append((m.start(), _Citation(m.group(0).strip(), "article", m.group("num"), labels)))
        for sibling in _cite_labels(m.group("siblings")) if labels else ():
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
                        other.group(0).strip(),
                        "article",
                        other.group(1),
                        _cite_labels(other.group(2)),
                    ),
                )
            )
    for m in _RECITAL.finditer(text):
        found.append((m.start(), _Citation(m.group(0), "recital", m.group(1))))
    for m in _CHAPTER.finditer(text):
        num = m.group(1)
        roman = roman_to_int(num)
        found.append((m.start(), _Citation(m.group(0), "chapter", str(roman) if roman else num)))
    for m in _ANNEX.finditer(text):
        found.append((m.start(), _Citation(m.group(0), "annex", m.group(1).upper())))
    found.sort(key=lambda x: x[0])
    return [c for _, c in found]


class _Verifier:
    def __init__(self, tree: RegulationTree) -> None:
        self.tree = tree
        self.regulation = tree.regulation
        self.syntax = syntax_of(tree.regulation)
        self._alias = alias_resolver(tree)
        self.parts = {
            n.id.split(".")[0] for n in tree.tree_nodes() if _SECTION_ID.fullmatch(n.id)
        } or set(_HIPAA_PARTS)  # other trees: still recognise (and reject) bare HIPAA sections
        self.recitals = any(n.kind is NodeKind.RECITAL for n in tree.nodes.values())

    def resolve(self, raw: str) -> str | None:
        node = self.tree.resolve(raw)
        if node is None:
            node = self._alias(raw)
        return node if node is not None and node in self.tree.nodes else None

    # the node for a citation's base (section, article, ...) and how labels attach
    def base(self, c: _Citation) -> tuple[str | None, str]:
        reg = self.regulation
        cfr = self.syntax is IdSyntax.CFR
        if c.kind == "hipaa-section":
            if not cfr:
                return None, f"{c.number} is a CFR section; this is the {reg} tree"
            node = self.resolve(c.number)
            return node, "" if node else f"no section {c.number} in the {reg} tree"
        if c.kind == "hipaa-part":
            if not cfr:
                return None, f"a CFR part; this is the {reg} tree"
            node = self.resolve(_render(c))
            return node, "" if node else f"no {_render(c)} in the {reg} tree"
        if cfr:
            law = _law_name(reg)
            return None, f"{c.kind} citations are not {law} ids ({law} cites sections, 164.xxx)"
        if c.kind == "annex":
            return None, f"annexes are not in the {reg} tree"
        if c.kind == "recital" and not self.recitals:
            return None, f"recitals are not in the {reg} tree"
        name = f"{c.kind.capitalize()} {c.number}"
        node = self.resolve(name) or self.resolve(f"{c.kind}{c.number}")
        return node, "" if node else f"no {name} in the {reg} tree"

    def child(self, node: str, label: str) -> str | None:
        cand = self.syntax.child_id(node, label)
        if cand in self.tree.nodes:
            return cand
        # tolerate spellings the tree normalises (e.g. aliases)
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

    Models write ids many ways; all are read:

    * CFR (HIPAA): ``164.512(e)``, ``45 CFR 164.512(e)(1)(ii)``, ``45 C.F.R. § 164.512``,
      ``Section 164.508``, ``§164.502 (a)``, ``§§ 164.502(b) and 164.514(d)``,
      ``Part 164``, ``Part 164 Subpart E``, and bare ``164.512(e)(1)(ii)`` inside
      free text (bare section numbers only for the parts the tree has, so a price
      such as ``100.00`` is not read as a section);
    * articles (GDPR, AI Act): ``Art. 6(1)(a)``, ``Article 9``, ``Articles 6 and 7``,
      ``Art 5 (1) e)``, ``Article 6 - Lawfulness of processing``, ``Recital 39``,
      ``Chapter III``.

    An id the tree has is valid (canonical id). One whose labels go *below* the
    tree's granularity (GDPR ``Article 6(1)(a)`` when the tree stops at the leaf
    ``Article 6(1)``) is valid as that leaf and listed in ``coarsened``. One naming
    a paragraph the tree does not have although it has that level
    (``164.512(e)(1)(ix)``), a section that does not exist, a citation of another
    regulation's syntax, or text that is not an id is rejected, with the reason.

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
