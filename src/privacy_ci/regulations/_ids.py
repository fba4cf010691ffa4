"""HIPAA node ids: our canonical spelling and the published (GoldCoin/Checklist) aliases.

Canonical ids (what `parse_ecfr_html` produces):

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

import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

if TYPE_CHECKING:
    from privacy_ci.regulations._tree import RegulationTree

__all__ = [
    "PRINTED_ID_ERRATA",
    "AliasIndex",
    "IdParts",
    "alias_index",
    "alias_key",
    "canonical_id",
    "id_spellings",
    "is_label",
    "resolve_id",
    "split_id",
    "to_goldcoin_id",
]

PRINTED_ID_ERRATA: Mapping[str, str] = {
    "160.103(ANSI)(1)": "160.103(Business associate)(1)",
}
"""Ids printed by the eCFR page (and copied by GoldCoin) that name the wrong node.

The page gives paragraph (1) of the "Business associate" definition the id
``p-160.103(ANSI)(1)``; the HTML nesting shows where it really belongs.
"""

_LABEL = r"(?:[a-z]{1,2}|[ivxlc]{1,7}|\d{1,3}|[A-Z])"
_LABEL_RE = re.compile(rf"{_LABEL}")
_LABEL_TOKEN_RE = re.compile(rf"\(({_LABEL})\)")
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
            rebuilt if the tree gains or loses nodes.

    Returns:
        The index.
    """
    key = id(tree)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is tree and hit[1] == len(tree.nodes):
        return hit[2]
    index = AliasIndex.from_tree(tree)
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
