"""Resolve the cross-references written in regulation text to node ids.

`resolve_references(text, context_node_id, tree)` is a pure function: the same
text, context and tree always give the same ids. It understands the citation
styles of 45 CFR Parts 160, 162 and 164:

* section citations: ``§ 164.506``, ``45 CFR 164.501``, ``§§ 164.502(b), 164.514(d),
  and 164.530(c)``, section ranges ``§§ 160.404–160.408``;
* paragraph lists that continue a citation: ``§ 164.514(e), (f), or (g)``,
  ``(g)(3)(i)(A), (B), or (C)``, ``paragraphs (a)(2) or (3) of this section`` (a bare
  ``(3)`` continues at the level where it fits: ``(a)(3)``);
* ranges, expanded to every paragraph between the ends: ``(a)(2) through (a)(5)``,
  ``(i)(2)(i)(A)–(C)``, ``§ 164.508(a)(2) through (4)``;
* scopes: ``of this section``, ``of this definition``, ``of the definition of
  health care operations``, ``of the definition of marketing at § 164.501``,
  ``of § 164.508``; without a scope a paragraph citation means this section (or
  this definition when the context is a definition and the label is a number);
* subparts and parts: ``subpart E of this part``, ``subparts D or E of this part``,
  ``subpart C of part 160 of this subchapter``, ``part 160, subpart C of this
  subchapter``, ``parts 160 and 162 of this subchapter``.

A citation of a paragraph that does not exist resolves to its nearest existing
ancestor (``Citation.exact`` is False); a citation outside the tree (another
title, a part that is not in the tree) has ``target`` None. `find_citations`
returns these details; `resolve_references` returns only the ids.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from privacy_ci.regulations._ids import CFR_LABEL, split_id

if TYPE_CHECKING:
    from privacy_ci.regulations._tree import RegulationTree

__all__ = ["Citation", "find_citations", "resolve_references"]

_CHAIN_RE = re.compile(rf"(?:\({CFR_LABEL}\))+")
_ONE_LABEL_RE = re.compile(rf"\(({CFR_LABEL})\)")
_NUM_RE = re.compile(r"(\d{1,4}[a-z]?)\.(\d{1,4}[a-z]?)(?![\w]|\.\d)")
_HEAD_RE = re.compile(
    r"(?P<sect>§§?)\s*(?=\d)"
    r"|(?<!\d)(?P<title>\d{1,2})\s+CFR\s+(?=\d)"
    r"|\b(?P<para>[Pp]aragraphs?)\s+(?=\(|§)"
    r"|\b(?P<secword>[Ss]ections?)\s+(?=\d{1,4}\.\d)"
    r"|(?<![\w.§(])(?P<bare>)(?=16[024]\.\d)"
)
_PARAGRAPH_WORD_RE = re.compile(r"[Pp]aragraphs?\s+")
_SECT_SIGN_RE = re.compile(r"§§?\s*")
_AT_SECTION_RE = re.compile(r"\s+(?:at|in)\s+§\s*(\d{1,4}\.\d{1,4})")
_CONNECTOR_RE = re.compile(r"\s*(?:,\s*(?:and/or|and|or)?|and/or|and|or|through|–)\s*")
_RANGE_WORDS = ("through", "–")
_SCOPE_RE = re.compile(
    r"\s+of\s+(?:"
    r"this\s+(?P<this>section|definition|part|subpart|subchapter|title|paragraph)\b"
    r"|the\s+definition\s+of\s+(?:the\s+term\s+)?(?P<defn>)"
    r"|§§?\s*(?P<ofsec>\d{1,4}\.\d{1,4})"
    r")"
)
_SUBPART_RE = re.compile(
    r"\b[Ss]ubparts?\s+(?P<letters>[A-Z](?:(?:\s*,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+"
    r"|\s*–\s*|\s+through\s+)[A-Z])*)\s+of\s+(?:this\s+part\b|part\s+(?P<part>\d+))"
)
_PART_SUBPART_RE = re.compile(
    r"\b[Pp]art\s+(?P<part>\d+),\s+subpart\s+(?P<letter>[A-Z])\s+of\s+this\s+subchapter"
)
_PARTS_RE = re.compile(
    r"(?:(?<!\d)(?P<title>\d{1,2})\s+CFR\s+)?\b[Pp]arts?\s+(?P<nums>\d+(?:(?:\s*,\s*(?:and\s+|or\s+)?"
    r"|\s+and\s+|\s+or\s+)(?:parts?\s+)?\d+)*)\b(?!\.\d)(?P<sub>\s+of\s+this\s+subchapter)?"
)
_ROMAN_RE = re.compile(r"x{0,3}(?:ix|iv|v?i{0,3})")
_QUOTED_RE = re.compile(r"\s*[“\"]([^”\"]{1,80})[”\"]")
_WORD_RE = re.compile(r"\s*([A-Za-z][A-Za-z'’-]*)")

# label kinds by depth below a section, and below a definition entry
_SECTION_SCHEME = ("letter", "digit", "roman", "upper", "digit", "roman")
_DEFINITION_SCHEME = ("digit", "roman", "upper", "digit", "roman", "upper")


@dataclass(frozen=True, slots=True)
class Citation:
    """One reference found in a text.

    Attributes:
        start: offset of the citation in the whitespace-normalised text.
        end: offset just past it.
        text: the cited words, e.g. ``paragraphs (a)(2) or (3) of this section``.
        wanted: the id the words name (it may not exist), e.g. ``164.510(a)(3)``.
        target: the existing node: ``wanted`` or its nearest existing ancestor; None
            when the citation points outside the tree (another title or part).
    """

    start: int
    end: int
    text: str
    wanted: str
    target: str | None

    @property
    def exact(self) -> bool:
        """Whether the cited node exists as written."""
        return self.target == self.wanted


def _label_kinds(label: str) -> set[str]:
    kinds: set[str] = set()
    if label.isdigit():
        kinds.add("digit")
    elif len(label) == 1 and label.isupper():
        kinds.add("upper")
    else:
        if len(label) <= 2 and label.islower() and (len(label) == 1 or label[0] == label[1]):
            kinds.add("letter")
        if _ROMAN_RE.fullmatch(label):
            kinds.add("roman")
    return kinds


@dataclass
class _Index:
    """Per-tree lookups the resolver needs (built once per tree, cached)."""

    definitions: dict[str, list[str]] = field(default_factory=dict)  # squashed term -> entry ids
    entries_by_section: dict[str, dict[str, str]] = field(default_factory=dict)
    subparts: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)


_INDEX_CACHE: dict[int, tuple[weakref.ref[RegulationTree], int, _Index]] = {}


def _squash(term: str) -> str:
    return re.sub(r"[\s“”\"'‘’]+", "", term).casefold()


def _index(tree: RegulationTree) -> _Index:
    key = id(tree)
    hit = _INDEX_CACHE.get(key)
    if hit is not None and hit[0]() is tree and hit[1] == len(tree.nodes):
        return hit[2]
    idx = _Index()
    for node_id in tree.nodes:
        if node_id.startswith("Part"):
            m = re.fullmatch(r"Part(\d+)Subpart([A-Z])(?:-([A-Z]))?", node_id)
            if m is not None:
                idx.subparts.setdefault(m.group(1), []).append(
                    (m.group(2), m.group(3) or m.group(2), node_id)
                )
            continue
        parts = split_id(node_id)
        if parts is None or parts.term is None or parts.after:
            continue
        squashed = _squash(parts.term)
        idx.definitions.setdefault(squashed, []).append(node_id)
        idx.entries_by_section.setdefault(parts.section, {})[squashed] = node_id
    _INDEX_CACHE[key] = (weakref.ref(tree, _forget(key)), len(tree.nodes), idx)
    return idx


def _forget(key: int) -> Callable[[weakref.ref[RegulationTree]], None]:
    def callback(_ref: weakref.ref[RegulationTree]) -> None:
        _INDEX_CACHE.pop(key, None)

    return callback


@dataclass
class _Item:
    """One cited element of a group before resolution."""

    start: int
    end: int
    section: str | None  # set for an explicit section citation (``§ 164.502(a)``)
    labels: tuple[str, ...]
    range_from_previous: bool = False


@dataclass
class _Group:
    start: int
    end: int
    kind: str  # "section" (§ / CFR / bare number) or "paragraph"
    title: int = 45
    items: list[_Item] = field(default_factory=list)
    scope: str | None = None  # section | definition | defn | ofsec | other
    scope_term: str | None = None  # for "of the definition of X"
    scope_section: str | None = None


class _Resolver:
    def __init__(self, text: str, context: str, tree: RegulationTree) -> None:
        self.text = text
        self.context = context
        self.tree = tree
        self.index = _index(tree)
        parts = split_id(context)
        self.context_section = parts.section if parts is not None else None
        self.context_part = self._part_of(context)
        self.context_entry = self._definition_entry(context)
        self.out: list[Citation] = []

    # -- helpers ------------------------------------------------------------------
    def _part_of(self, node_id: str) -> str | None:
        m = re.match(r"Part(\d+)", node_id)
        if m is not None:
            return m.group(1)
        m = re.match(r"(\d+)\.", node_id)
        if m is not None:
            return m.group(1)
        m = re.search(r"of Part (\d+)", node_id)
        return m.group(1) if m is not None else None

    def _definition_entry(self, node_id: str) -> str | None:
        parts = split_id(node_id)
        if parts is None or parts.term is None:
            return None
        entry = parts.section + "".join(f"({x})" for x in parts.before) + f"({parts.term})"
        return entry if entry in self.tree.nodes else None

    def _exists(self, node_id: str) -> bool:
        return node_id in self.tree.nodes

    def _nearest(self, base: str, labels: Sequence[str]) -> str | None:
        """The node ``base + labels`` or its nearest existing ancestor."""
        for cut in range(len(labels), -1, -1):
            candidate = base + "".join(f"({x})" for x in labels[:cut])
            if self._exists(candidate):
                return candidate
        return None

    def _emit(self, start: int, end: int, wanted: str, target: str | None) -> None:
        self.out.append(Citation(start, end, self.text[start:end], wanted, target))

    # -- the scan -----------------------------------------------------------------
    def run(self) -> list[Citation]:
        taken: list[tuple[int, int]] = []
        pos = 0
        text = self.text
        while True:
            m = _HEAD_RE.search(text, pos)
            if m is None:
                break
            group = self._parse_group(m)
            if group is None or not group.items:
                pos = m.end() if m.end() > m.start() else m.start() + 1
                continue
            self._resolve_group(group)
            taken.append((group.start, group.end))
            pos = max(group.end, m.end(), m.start() + 1)
        self._subparts_and_parts(taken)
        self.out.sort(key=lambda c: (c.start, c.end))
        return self.out

    def _parse_item(self, pos: int, group: _Group, first: bool) -> _Item | None:
        text = self.text
        start = pos
        m = _SECT_SIGN_RE.match(text, pos)
        if m is not None and not first:
            pos = m.end()
        if group.kind == "section" or m is not None or first:
            nm = _NUM_RE.match(text, pos)
            if nm is not None and (group.kind == "section" or m is not None):
                section = f"{nm.group(1)}.{nm.group(2)}"
                cm = _CHAIN_RE.match(text, nm.end())
                labels = tuple(_ONE_LABEL_RE.findall(cm.group(0))) if cm else ()
                end = cm.end() if cm else nm.end()
                return _Item(start, end, section, labels)
        if m is not None:
            return None
        if not first:
            pm = _PARAGRAPH_WORD_RE.match(text, pos)
            if pm is not None:
                if group.kind == "section":
                    return None  # "§ 164.502(j) or paragraph (g)(2) of this section": new group
                pos = pm.end()
        cm = _CHAIN_RE.match(text, pos)
        if cm is None:
            return None
        if first and group.kind == "section":
            return None
        return _Item(start, cm.end(), None, tuple(_ONE_LABEL_RE.findall(cm.group(0))))

    def _parse_group(self, head: re.Match[str]) -> _Group | None:
        text = self.text
        if head.group("para") is not None:
            group = _Group(head.start(), head.end(), "paragraph")
            pos = head.end()
            if text.startswith("§", pos):
                group.kind = "section"
                sm = _SECT_SIGN_RE.match(text, pos)
                pos = sm.end() if sm is not None else pos
        else:
            group = _Group(head.start(), head.end(), "section")
            if head.group("title") is not None:
                group.title = int(head.group("title"))
            pos = head.end()
        item = self._parse_item(pos, group, first=True)
        if item is None:
            return None
        group.items.append(item)
        pos = item.end
        while True:
            cm = _CONNECTOR_RE.match(text, pos)
            if cm is None or cm.end() == pos:
                break
            nxt = self._parse_item(cm.end(), group, first=False)
            if nxt is None:
                break
            connector = cm.group(0).strip()
            nxt.range_from_previous = connector in _RANGE_WORDS
            group.items.append(nxt)
            pos = nxt.end
        group.end = pos
        sm = _SCOPE_RE.match(text, pos)
        if sm is not None:
            if sm.group("this") is not None:
                group.scope = sm.group("this")
                group.end = sm.end()
            elif sm.group("ofsec") is not None:
                group.scope = "ofsec"
                group.scope_section = sm.group("ofsec")
                group.end = sm.end()
            else:
                found = self._definition_scope(sm.end())
                group.scope = "defn"
                group.scope_term, group.end = found if found is not None else (None, sm.end())
        return group

    def _definition_scope(self, pos: int) -> tuple[str, int] | None:
        """After "of the definition of": the defined entry named there, and the end."""
        text = self.text
        section: str | None = None
        qm = _QUOTED_RE.match(text, pos)
        candidates: list[tuple[str, int]] = []
        if qm is not None:
            candidates.append((qm.group(1), qm.end()))
        else:
            words: list[str] = []
            cur = pos
            for _ in range(8):
                wm = _WORD_RE.match(text, cur)
                if wm is None:
                    break
                words.append(wm.group(1))
                cur = wm.end()
                candidates.append((" ".join(words), cur))
            candidates.reverse()  # longest first
        for term, end in candidates:
            at = _AT_SECTION_RE.match(text, end)
            section = at.group(1) if at is not None else None
            entry = self._find_entry(term, section)
            if entry is not None:
                return entry, (at.end() if at is not None else end)
        return None

    def _find_entry(self, term: str, section: str | None) -> str | None:
        squashed = _squash(term)
        variants = [squashed]
        if squashed.endswith("s"):
            variants.append(squashed[:-1])
        for variant in variants:
            if section is not None:
                hit = self.index.entries_by_section.get(section, {}).get(variant)
                if hit is not None:
                    return hit
                continue
            if self.context_section is not None:
                hit = self.index.entries_by_section.get(self.context_section, {}).get(variant)
                if hit is not None:
                    return hit
            hits = self.index.definitions.get(variant, [])
            if len(hits) == 1:
                return hits[0]
            same_part = [h for h in hits if self._part_of(h) == self.context_part]
            if same_part:
                return same_part[0]
            if hits:
                return hits[0]
        return None

    # -- resolution -------------------------------------------------------------
    def _paragraph_base(self, group: _Group) -> str | None:
        """The node that a scoped paragraph citation's labels hang from."""
        if group.scope == "definition":
            return self.context_entry
        if group.scope == "defn":
            return group.scope_term
        if group.scope == "ofsec":
            return group.scope_section
        return self.context_section

    def _default_bases(self, first_label: str) -> list[str]:
        """Bases for a paragraph citation without a scope, most likely first."""
        out: list[str] = []
        if self.context_section is not None:
            out.append(self.context_section)
        if self.context_entry is not None:
            out.insert(0 if first_label.isdigit() else len(out), self.context_entry)
        return out

    def _continue(
        self, base: str, scheme: Sequence[str], prev: tuple[str, ...], new: tuple[str, ...]
    ) -> tuple[str, ...]:
        kinds = _label_kinds(new[0])
        levels = [k for k in range(len(prev) - 1, -1, -1) if k < len(scheme) and scheme[k] in kinds]
        for k in levels:
            labels = prev[:k] + new
            if self._exists(base + "".join(f"({x})" for x in labels)):
                return labels
        if levels:
            return prev[: levels[0]] + new
        return new

    def _resolve_group(self, group: _Group) -> None:
        if group.title != 45:
            for item in group.items:
                sec = item.section or ""
                wanted = f"{group.title} CFR {sec}" + "".join(f"({x})" for x in item.labels)
                self._emit(item.start, item.end, wanted, None)
            return
        base: str | None = None
        scheme: Sequence[str] = _SECTION_SCHEME
        prev: tuple[str, ...] | None = None
        labels: tuple[str, ...]
        resolved: list[tuple[_Item, str | None, tuple[str, ...]]] = []
        for item in group.items:
            if item.section is not None:
                base = item.section
                labels = item.labels
                scheme = _DEFINITION_SCHEME if labels and labels[0].isdigit() else _SECTION_SCHEME
                prev = labels
            else:
                if base is None or prev is None:
                    labels = item.labels
                    if group.scope is None:
                        bases = self._default_bases(labels[0])
                        base = next(
                            (b for b in bases if self._exists(b + _render(labels))),
                            bases[0] if bases else None,
                        )
                    else:
                        base = self._paragraph_base(group)
                    scheme = _DEFINITION_SCHEME if labels[0].isdigit() else _SECTION_SCHEME
                else:
                    labels = self._continue(base, scheme, prev, item.labels)
                prev = labels
            resolved.append((item, base, labels))
        for i, (item, item_base, labels) in enumerate(resolved):
            if item.range_from_previous and i > 0:
                prev_item, prev_base, prev_labels = resolved[i - 1]
                if prev_base is not None and item_base is not None:
                    self._emit_range(prev_item, prev_base, prev_labels, item, item_base, labels)
                    continue
            self._emit_one(item, item_base, labels)

    def _emit_one(self, item: _Item, base: str | None, labels: Sequence[str]) -> None:
        if base is None:  # e.g. "of the definition of" a term no section defines
            self._emit(item.start, item.end, _render(labels), None)
            return
        wanted = base + "".join(f"({x})" for x in labels)
        self._emit(item.start, item.end, wanted, self._nearest(base, labels))

    def _emit_range(
        self,
        first: _Item,
        first_base: str,
        first_labels: Sequence[str],
        last: _Item,
        last_base: str,
        last_labels: Sequence[str],
    ) -> None:
        start_id = self._nearest(first_base, first_labels)
        end_id = self._nearest(last_base, last_labels)
        end_wanted = last_base + "".join(f"({x})" for x in last_labels)
        if start_id is None or end_id is None:
            self._emit(last.start, last.end, end_wanted, end_id)
            return
        members = _between(self.tree, start_id, end_id)
        for node_id in members:
            if node_id != start_id:
                self._emit(first.start, last.end, node_id, node_id)
        if end_id not in members:
            self._emit(last.start, last.end, end_wanted, end_id)

    def _subpart_node(self, part: str, letter: str) -> str | None:
        for lo, hi, node_id in self.index.subparts.get(part, []):
            if lo <= letter <= hi:
                return node_id
        return None

    def _subparts_and_parts(self, taken: list[tuple[int, int]]) -> None:
        text = self.text
        spans = list(taken)

        def free(a: int, b: int) -> bool:
            return all(b <= s or a >= e for s, e in spans)

        for m in _SUBPART_RE.finditer(text):
            part = m.group("part") or self.context_part
            if part is None or not free(m.start(), m.end()):
                continue
            letters = re.findall(r"[A-Z]", m.group("letters"))
            if re.search(r"through|–", m.group("letters")) and len(letters) == 2:
                letters = [chr(c) for c in range(ord(letters[0]), ord(letters[1]) + 1)]
            for letter in letters:
                wanted = f"Part{part}Subpart{letter}"
                self._emit(m.start(), m.end(), wanted, self._subpart_node(part, letter))
            spans.append((m.start(), m.end()))
        for m in _PART_SUBPART_RE.finditer(text):
            if not free(m.start(), m.end()):
                continue
            part, letter = m.group("part"), m.group("letter")
            self._emit(
                m.start(), m.end(), f"Part{part}Subpart{letter}", self._subpart_node(part, letter)
            )
            spans.append((m.start(), m.end()))
        for m in _PARTS_RE.finditer(text):
            if not free(m.start(), m.end()):
                continue
            title = int(m.group("title")) if m.group("title") else 45
            nums = re.findall(r"\d+", m.group("nums"))
            for num in nums:
                wanted = f"Part{num}" if title == 45 else f"{title} CFR part {num}"
                in_tree = title == 45 and self._exists(wanted)
                if not in_tree and title == 45 and not m.group("sub") and not m.group("title"):
                    continue  # "part 2" of some other law: not a citation of this title
                self._emit(m.start(), m.end(), wanted, wanted if in_tree else None)
            spans.append((m.start(), m.end()))


def _render(labels: Sequence[str]) -> str:
    return "".join(f"({x})" for x in labels)


def _between(tree: RegulationTree, start: str, end: str) -> list[str]:
    """Every node from ``start`` to ``end`` at ``start``'s depth, in document order."""
    a, b = tree.nodes[start], tree.nodes[end]
    if a.parent is not None and a.parent == b.parent:
        siblings = tree.nodes[a.parent].children
        i, j = siblings.index(start), siblings.index(end)
        return list(siblings[i : j + 1]) if i <= j else [start, end]
    depth = len(tree.ancestors(start))
    if depth != len(tree.ancestors(end)):
        return [start, end]
    common = set(tree.ancestors(start)) & set(tree.ancestors(end))
    top = next((x for x in tree.ancestors(start) if x in common), None)
    if top is None:
        return [start, end]
    order = tree.subtree(top)
    i, j = order.index(start), order.index(end)
    if i > j:
        return [start, end]
    return [x for x in order[i : j + 1] if len(tree.ancestors(x)) == depth]


def find_citations(text: str, context_node_id: str, tree: RegulationTree) -> list[Citation]:
    """Every cross-reference in a text, with what it names and what it resolves to.

    Args:
        text: the text of one node (whitespace is normalised first; offsets refer
            to the normalised text).
        context_node_id: the node the text belongs to (for "this section", "this
            definition", "this part" and bare paragraph labels).
        tree: the tree the ids must exist in.

    Returns:
        Citations in text order (a range gives one citation per member).
    """
    normalised = " ".join(text.split())
    if not normalised:
        return []
    return _Resolver(normalised, context_node_id, tree).run()


def resolve_references(text: str, context_node_id: str, tree: RegulationTree) -> list[str]:
    """The node ids a text cites, in order of appearance, without duplicates.

    A cited paragraph that does not exist gives its nearest existing ancestor;
    citations outside the tree are dropped (see `find_citations` for both), and so
    is the context node itself.

    Args:
        text: the text of one node.
        context_node_id: the node the text belongs to.
        tree: the tree the ids must exist in.

    Returns:
        Existing node ids.
    """
    out: list[str] = []
    for citation in find_citations(text, context_node_id, tree):
        target = citation.target
        if target is not None and target != context_node_id and target not in out:
            out.append(target)
    return out
