"""Parse the official eCFR part pages (45 CFR Parts 160, 162, 164) into a `RegulationTree`.

Section 3.1 of the Privacy Checklist paper: the HIPAA text as a tree under a
dummy root ``HIPAA`` (parts, subparts, sections, paragraphs nested up to six
levels, definition entries, the appendix), with the cross-references of every
node resolved to node ids.

The structure comes from the HTML nesting, not from the printed ids: each
paragraph is a ``<p class="indent-N">`` inside a ``<div id="p-...">`` wrapper
(or, in § 160.103, a flat run of ``p.indent-N``), and its parent is the paragraph
of the enclosing wrapper (or the nearest shallower indent). A node's id is its
parent's id plus its own label, so the page's mislabelled ``160.103(ANSI)(1)``
becomes ``160.103(Business associate)(1)``; every such correction is reported.

References come first from the page's ``<a class="cfr">`` links, then from the
text (`privacy_ci.regulations._references`), deduplicated. A link whose target
does not exist is not used (its text is still read); a text citation of a
missing paragraph falls back to its nearest existing ancestor. Both are reported.

`load_ecfr_tree` parses the three pages of the data directory and caches the
tree in the cache directory, keyed by the pages' sha256 and `PARSER_VERSION`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pickle
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from privacy_ci.errors import DataMissingError
from privacy_ci.regulations._ids import canonical_id, is_label, split_id
from privacy_ci.regulations._references import find_citations
from privacy_ci.regulations._tree import Node, NodeKind, RegulationTree, TreeBuilder, TreeError

__all__ = [
    "ECFR_FILES",
    "PARSER_VERSION",
    "ROOT_ID",
    "EcfrReport",
    "ecfr_paths",
    "load_ecfr",
    "load_ecfr_tree",
    "parse_ecfr",
    "parse_ecfr_html",
]

PARSER_VERSION = "1"
"""Bumped whenever the parser's output changes (invalidates cached trees)."""

ROOT_ID = "HIPAA"
ROOT_TEXT = "HIPAA Administrative Simplification Regulations (45 CFR Parts 160, 162 and 164)"
ECFR_FILES: tuple[str, ...] = tuple(
    f"hipaa/ecfr/subchapter-C_part-{n}.html" for n in (160, 162, 164)
)
"""The eCFR pages, relative to the data directory."""

_INDENT_RE = re.compile(r"^indent-(\d+)$")
_WS_RE = re.compile(r"\s+")
_PART_CITE_RE = re.compile(r"45 CFR Part (\d+)$")
_SUBPART_CITE_RE = re.compile(r"45 CFR Part (\d+) Subpart ([A-Z](?:-[A-Z])?)$")
_SECTION_CITE_RE = re.compile(r"45 CFR (\d+\.\d+)$")
_SECTION_HEAD_RE = re.compile(r"^§+\s*\d+\.\d+\s*")
_HREF_RE = re.compile(
    r"^(?:https?://www\.ecfr\.gov)?/current/title-(?P<title>\d+)"
    r"(?:/(?:subtitle|chapter|subchapter)-[^/#]+)*"
    r"(?:/part-(?P<part>[\w.]+))?(?:/subpart-(?P<subpart>[A-Z]))?"
    r"(?:/appendix-[^#]*)?"
    r"(?:/section-(?P<section>[\w.]+))?/?(?:#(?P<frag>.*))?$"
)


def _norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def _classes(el: Any) -> list[str]:
    return str(el.get("class") or "").split()


@dataclass
class EcfrReport:
    """What the parser found, corrected and could not resolve.

    Attributes:
        sources: the pages read, in part order.
        warnings: one line per oddity (mislabelled ids, appended blocks, broken links).
        relabelled: printed page id -> our id, where the HTML nesting disagrees with
            the id the page prints (e.g. ``160.103(ANSI)(1)``).
        anchors: every page anchor (``p-`` id without the prefix, unquoted) -> our id.
        appended: node id -> number of unlabelled blocks (``p.no-hierarchy``,
            ``div.extract``) whose text was appended to that node.
        broken_links: (node, href) of ``a.cfr`` links whose target does not exist.
        external_links: (node, href) of links outside the tree (other titles/parts).
        fallbacks: (node, cited id, id used) for text citations of missing paragraphs.
        unresolved: (node, cited words) for text citations outside the tree.
        link_references: references taken from links.
        text_references: references found only in the text.
    """

    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    relabelled: dict[str, str] = field(default_factory=dict)
    anchors: dict[str, str] = field(default_factory=dict)
    appended: dict[str, int] = field(default_factory=dict)
    broken_links: list[tuple[str, str]] = field(default_factory=list)
    external_links: list[tuple[str, str]] = field(default_factory=list)
    fallbacks: list[tuple[str, str, str]] = field(default_factory=list)
    unresolved: list[tuple[str, str]] = field(default_factory=list)
    link_references: int = 0
    text_references: int = 0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary.

        Returns:
            Counts, the corrections and the problem lists (anchors omitted).
        """
        return {
            "sources": list(self.sources),
            "warnings": list(self.warnings),
            "relabelled": dict(self.relabelled),
            "appended": dict(self.appended),
            "broken_links": [list(x) for x in self.broken_links],
            "external_links": [list(x) for x in self.external_links],
            "fallbacks": [list(x) for x in self.fallbacks],
            "unresolved": [list(x) for x in self.unresolved],
            "link_references": self.link_references,
            "text_references": self.text_references,
        }


@dataclass
class _Pending:
    """A node's HTML blocks, kept until the tree exists and references can be resolved."""

    node_id: str
    blocks: list[Any] = field(default_factory=list)
    ref_text: list[str] = field(default_factory=list)


class _Page:
    """Parses one eCFR part page into the shared builder."""

    def __init__(
        self,
        path: Path,
        builder: TreeBuilder,
        texts: dict[str, list[str]],
        pending: dict[str, _Pending],
        report: EcfrReport,
    ) -> None:
        self.path = path
        self.builder = builder
        self.texts = texts
        self.pending = pending
        self.report = report
        self.sections = 0

    # -- nodes ----------------------------------------------------------------------
    def _add(self, node_id: str, parent: str, kind: NodeKind, text: str, title: str = "") -> None:
        if node_id in self.builder:
            raise TreeError(f"{self.path}: node {node_id!r} appears twice")
        self.builder.add(node_id, parent, "", kind, title)
        self.texts[node_id] = [text] if text else []
        self.pending[node_id] = _Pending(node_id)

    def _append(self, node_id: str, block: Any, why: str) -> None:
        text = _norm(block.text_content())
        if not text:
            return
        self.texts[node_id].append(text)
        self.pending[node_id].blocks.append(block)
        self.pending[node_id].ref_text.append(text)
        self.report.appended[node_id] = self.report.appended.get(node_id, 0) + 1
        self.report.warnings.append(f"{self.path.name}: {why} appended to {node_id}")

    # -- page -----------------------------------------------------------------------
    def parse(self, root: Any) -> str:
        parts = [d for d in root.iter("div") if "part" in _classes(d)]
        if not parts:
            raise TreeError(
                f'{self.path}: no part (<div class="part">) found; is this an eCFR part page?'
            )
        first = ""
        for div in parts:
            part_id = self._part(div)
            first = first or part_id
        if self.sections == 0:
            raise TreeError(f'{self.path}: no sections (<div class="section">) found')
        return first

    def _metadata(self, heading: Any) -> str:
        raw = heading.get("data-hierarchy-metadata")
        if not raw:
            return ""
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            return ""
        return str(data.get("citation", "")) if isinstance(data, dict) else ""

    def _part(self, div: Any) -> str:
        h1 = next((c for c in div if c.tag == "h1"), None)
        m = _PART_CITE_RE.match(self._metadata(h1)) if h1 is not None else None
        number = m.group(1) if m else str(div.get("id") or "").removeprefix("part-")
        if not number.isdigit():
            raise TreeError(f"{self.path}: cannot tell which part this page holds")
        part_id = f"Part{number}"
        heading = _norm(h1.text_content()) if h1 is not None else f"PART {number}"
        self._add(part_id, ROOT_ID, NodeKind.PART, heading, heading.partition("—")[2] or heading)
        for child in div:
            cls = _classes(child)
            if child.tag != "div":
                continue
            if "subpart" in cls:
                self._subpart(child, part_id)
            elif "section" in cls:
                self._section(child, part_id)
            elif "appendix" in cls:
                self._appendix(child, part_id)
        return part_id

    def _subpart(self, div: Any, part_id: str) -> None:
        h2 = next((c for c in div if c.tag == "h2"), None)
        if h2 is None:
            raise TreeError(f"{self.path}: a subpart of {part_id} has no <h2> heading")
        m = _SUBPART_CITE_RE.match(self._metadata(h2))
        if m is not None:
            letters = m.group(2)
        else:
            hm = re.match(r"Subparts?\s+([A-Z])(?:\s*[–-]\s*([A-Z]))?", _norm(h2.text_content()))
            if hm is None:
                raise TreeError(f"{self.path}: cannot read the subpart heading of {part_id}")
            letters = hm.group(1) + (f"-{hm.group(2)}" if hm.group(2) else "")
        subpart_id = f"{part_id}Subpart{letters}"
        heading = _norm(h2.text_content())
        title = heading.partition("—")[2] or re.sub(r"^Subparts?\s+\S+\s*", "", heading)
        self._add(subpart_id, part_id, NodeKind.SUBPART, heading, title)
        for child in div:
            cls = _classes(child)
            if child.tag != "div":
                continue
            if "section" in cls:
                self._section(child, subpart_id)
            elif "appendix" in cls:
                self._appendix(child, subpart_id)

    def _appendix(self, div: Any, parent: str) -> None:
        h4 = next((c for c in div if c.tag == "h4"), None)
        heading = _norm(h4.text_content()) if h4 is not None else ""
        cite = self._metadata(h4) if h4 is not None else ""
        name = cite.split(",")[0] if cite else heading.partition("—")[0]
        node_id = canonical_id(name)
        rows = []
        for tr in div.iter("tr"):
            cells = [_norm(c.text_content()) for c in tr if c.tag in ("td", "th")]
            cells = [c for c in cells if c]
            if cells:
                rows.append(" | ".join(cells))
        self._add(node_id, parent, NodeKind.APPENDIX, heading, heading.partition("—")[2] or heading)
        if rows:
            table = " ; ".join(rows)
            self.texts[node_id].append(table)
            self.pending[node_id].blocks.append(div)
            self.pending[node_id].ref_text.append(table)

    def _section(self, div: Any, parent: str) -> None:
        h4 = next((c for c in div if c.tag == "h4"), None)
        if h4 is None:
            raise TreeError(f"{self.path}: section {div.get('id')!r} has no <h4> heading")
        m = _SECTION_CITE_RE.match(self._metadata(h4))
        section_id = m.group(1) if m else str(div.get("id") or "")
        if not re.fullmatch(r"\d+\.\d+", section_id):
            raise TreeError(
                f"{self.path}: cannot read the section number of {_norm(h4.text_content())!r}"
            )
        if div.get("id") and div.get("id") != section_id:
            self.report.warnings.append(
                f"{self.path.name}: section div id {div.get('id')!r} != heading {section_id!r}"
            )
        heading = _norm(h4.text_content())
        self._add(section_id, parent, NodeKind.SECTION, heading, _SECTION_HEAD_RE.sub("", heading))
        self.sections += 1
        _SectionWalker(self, section_id).walk(div)


class _SectionWalker:
    """Places the paragraphs of one section by their HTML nesting."""

    def __init__(self, page: _Page, section_id: str) -> None:
        self.page = page
        self.section = section_id
        self.stack: list[tuple[int, str]] = [(0, section_id)]  # (indent level, node)
        self.wrappers: list[str | None] = []  # node of each open <div id="p-..."> wrapper
        self.kinds: dict[str, NodeKind] = {section_id: NodeKind.SECTION}
        self.seen_paragraph = False

    @property
    def current(self) -> str:
        for node in reversed(self.wrappers):
            if node is not None:
                return node
        return self.stack[-1][1]

    def walk(self, container: Any) -> None:
        for el in container:
            tag = el.tag
            if not isinstance(tag, str) or tag in ("h4", "h3", "h2", "h1"):
                continue
            cls = _classes(el)
            if tag == "p":
                if "citation" in cls:
                    continue
                level = next((int(m.group(1)) for c in cls if (m := _INDENT_RE.match(c))), None)
                if level is not None and "no-hierarchy" not in cls:
                    self._paragraph(el, level)
                elif not cls and not self.seen_paragraph:
                    self._intro(el)
                else:
                    what = "unlabelled paragraph" + (f" ({' '.join(cls)})" if cls else "")
                    self.page._append(self.current, el, what)
            elif tag == "div":
                div_id = str(el.get("id") or "")
                if div_id.startswith("p-"):
                    self.wrappers.append(None)
                    self.walk(el)
                    self.wrappers.pop()
                elif cls and cls[0] in ("extract", "table-wrapper"):
                    self.page._append(self.current, el, f"div.{cls[0]}")
                else:
                    self.walk(el)
            elif _norm(el.text_content()):
                self.page._append(self.current, el, f"<{tag}>")

    def _intro(self, p: Any) -> None:
        text = _norm(p.text_content())
        if text:
            self.page.texts[self.section].append(text)
            self.page.pending[self.section].blocks.append(p)
            self.page.pending[self.section].ref_text.append(text)

    def _label(self, p: Any) -> tuple[str, bool, str] | None:
        """(label or term, is it a term, the label as printed) of a paragraph."""
        for child in p:
            if child.tag in ("span", "em") and "paragraph-hierarchy" in _classes(child):
                raw = _norm(child.text_content())
                labels = re.findall(r"\(([^()]*)\)", raw)
                if child.tag == "span" and labels and re.fullmatch(r"(\([^()]*\)[–-]?)+", raw):
                    return labels[0].strip(), False, raw
                return raw.rstrip(":,.;").strip(), True, raw
        return None

    def _printed_id(self, p: Any) -> str | None:
        raw = p.get("id")
        if not raw:
            parent = p.getparent()
            if parent is not None and parent.tag == "div":
                raw = parent.get("id")
        if raw and raw.startswith("p-"):
            return unquote(raw[2:])
        title = p.get("data-title")
        return canonical_id(title) if title else None

    def _paragraph(self, p: Any, level: int) -> None:
        page = self.page
        self.seen_paragraph = True
        label = self._label(p)
        printed = self._printed_id(p)
        if label is None:
            page.report.warnings.append(
                f"{page.path.name}: p.indent-{level} without a label under {self.current}"
                f" ({printed}); appended"
            )
            page._append(self.current, p, "unlabelled indented paragraph")
            return
        text_label, is_term, printed_label = label
        # parent by indentation
        while len(self.stack) > 1 and self.stack[-1][0] >= level:
            self.stack.pop()
        parent = self.stack[-1][1]
        # parent by wrapper nesting, when the paragraph opens a wrapper
        in_wrapper = (
            bool(self.wrappers)
            and self.wrappers[-1] is None
            and (p.getparent() is not None and str(p.getparent().get("id") or "").startswith("p-"))
        )
        if in_wrapper:
            outer = next((w for w in reversed(self.wrappers[:-1]) if w is not None), self.section)
            if outer != parent:
                page.report.warnings.append(
                    f"{page.path.name}: indent-{level} of {printed} suggests parent {parent},"
                    f" the HTML nesting {outer}; the nesting wins"
                )
                while len(self.stack) > 1 and self.stack[-1][1] != outer:
                    self.stack.pop()
                parent = outer
        if self.stack[-1][0] != level - 1 and self.stack[-1][1] != self.section:
            page.report.warnings.append(
                f"{page.path.name}: {printed} jumps from indent-{self.stack[-1][0]} to {level}"
            )
        if not is_term and not is_label(text_label):
            page.report.warnings.append(f"{page.path.name}: odd paragraph label {text_label!r}")
        node_id = f"{parent}({text_label})"
        if not is_term and printed_label != f"({text_label})":
            page.report.warnings.append(
                f"{page.path.name}: paragraph {printed_label} is one node, named {node_id}"
                " by its first label"
            )
        parent_kind = self.kinds.get(parent, NodeKind.PARAGRAPH)
        is_definition = is_term or parent_kind == NodeKind.DEFINITION
        kind = NodeKind.DEFINITION if is_definition else NodeKind.PARAGRAPH
        if printed is not None:
            page.report.anchors.setdefault(printed, node_id)
            if canonical_id(printed) != node_id:
                page.report.relabelled[printed] = node_id
                page.report.warnings.append(
                    f"{page.path.name}: the page labels {node_id} as {printed!r}"
                )
        text = _norm(p.text_content())
        page._add(node_id, parent, kind, text)
        page.pending[node_id].blocks.append(p)
        page.pending[node_id].ref_text.append(text)
        self.kinds[node_id] = kind
        self.stack.append((level, node_id))
        if in_wrapper:
            self.wrappers[-1] = node_id


def _read_page(path: Path) -> Any:
    lxml_html: Any = importlib.import_module("lxml.html")  # no type stubs for lxml
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TreeError(f"{path}: file not found") from None
    except OSError as exc:
        raise TreeError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TreeError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise TreeError(f"{path}: the file is empty")
    if not re.search(r"</html>\s*$", text[-4096:], re.IGNORECASE):
        raise TreeError(
            f"{path}: the page is truncated (it does not end with </html>); download it again"
        )
    try:
        return lxml_html.document_fromstring(text)
    except Exception as exc:  # lxml raises ParserError/XMLSyntaxError subclasses
        raise TreeError(f"{path}: not parseable HTML ({exc})") from None


def _link_target(
    href: str, tree: RegulationTree, anchors: dict[str, str]
) -> tuple[str | None, str]:
    """Resolve an ``a.cfr`` href: (node id or None, "ok" | "broken" | "external")."""
    m = _HREF_RE.match(href.strip())
    if m is None:
        return None, "external"
    if m.group("title") != "45":
        return None, "external"
    frag = unquote(m.group("frag") or "")
    if frag.startswith("p-"):
        anchor = frag[2:]
        target = anchors.get(anchor) or canonical_id(anchor)
        if target in tree.nodes:
            return target, "ok"
        parts = split_id(target)
        section = parts.section if parts is not None else None
        return None, ("broken" if section in tree.nodes else "external")
    section = m.group("section")
    if section:
        return (section, "ok") if section in tree.nodes else (None, "external")
    part = m.group("part")
    if part:
        if m.group("subpart"):
            letter = m.group("subpart")
            part_node = tree.nodes.get(f"Part{part}")
            for child in part_node.children if part_node is not None else ():
                sm = re.fullmatch(rf"Part{part}Subpart([A-Z])(?:-([A-Z]))?", child)
                if sm and sm.group(1) <= letter <= (sm.group(2) or sm.group(1)):
                    return child, "ok"
            return None, "external"
        return (f"Part{part}", "ok") if f"Part{part}" in tree.nodes else (None, "external")
    return None, "external"


def _references(
    tree: RegulationTree, pending: dict[str, _Pending], report: EcfrReport
) -> dict[str, list[str]]:
    refs: dict[str, list[str]] = {}
    for node_id, item in pending.items():
        found: list[str] = []
        for block in item.blocks:
            for a in block.iter("a"):
                if "cfr" not in _classes(a):
                    continue
                href = str(a.get("href") or "")
                target, status = _link_target(href, tree, report.anchors)
                if target is not None:
                    if target != node_id and target not in found:
                        found.append(target)
                elif status == "broken":
                    report.broken_links.append((node_id, href))
                    report.warnings.append(
                        f"link {href!r} in {node_id} points at no node; its text is used instead"
                    )
                else:
                    report.external_links.append((node_id, href))
        n_links = len(found)
        text = " ".join(item.ref_text)
        for citation in find_citations(text, node_id, tree):
            if citation.target is None:
                report.unresolved.append((node_id, citation.text))
                continue
            if not citation.exact:
                report.fallbacks.append((node_id, citation.wanted, citation.target))
            if citation.target != node_id and citation.target not in found:
                found.append(citation.target)
        report.link_references += n_links
        report.text_references += len(found) - n_links
        if found:
            refs[node_id] = found
    return refs


def parse_ecfr(paths: Sequence[Path]) -> tuple[RegulationTree, EcfrReport]:
    """Parse eCFR part pages into one tree, with a report of what was corrected.

    Args:
        paths: the saved part pages (any order; parts are placed by number).

    Returns:
        The tree (regulation ``hipaa``, root ``HIPAA``) and the report.

    Raises:
        TreeError: a page is missing, truncated, not an eCFR part page, has no
            sections, or repeats a node; the message names the file.
    """
    if not paths:
        raise TreeError("parse_ecfr: no eCFR pages given")
    pages = [(Path(p), _read_page(Path(p))) for p in paths]

    def part_number(item: tuple[Path, Any]) -> int:
        ids = item[1].xpath("//div[starts-with(@id, 'part-')]/@id")
        m = re.fullmatch(r"part-(\d+)", str(ids[0])) if ids else None
        return int(m.group(1)) if m else 0

    pages.sort(key=part_number)
    report = EcfrReport(sources=[str(p) for p, _ in pages])
    builder = TreeBuilder("hipaa", ROOT_ID, "; ".join(report.sources), ROOT_TEXT)
    texts: dict[str, list[str]] = {}
    pending: dict[str, _Pending] = {}
    for path, root in pages:
        _Page(path, builder, texts, pending, report).parse(root)
    for node_id, pieces in texts.items():
        builder.set_text(node_id, " ".join(pieces))
    skeleton = builder.build()
    for src, targets in _references(skeleton, pending, report).items():
        builder.refer(src, targets)
    return builder.build(), report


def parse_ecfr_html(paths: Sequence[Path]) -> RegulationTree:
    """Parse eCFR part pages into a `RegulationTree` with resolved cross-references.

    Args:
        paths: the saved pages, e.g. ``hipaa/ecfr/subchapter-C_part-{160,162,164}.html``.

    Returns:
        The tree (see `parse_ecfr` for the report of corrections).

    Raises:
        TreeError: see `parse_ecfr`.
    """
    return parse_ecfr(paths)[0]


def ecfr_paths(data_dir: Path | None = None) -> list[Path]:
    """The three eCFR pages of a data directory, checked to exist.

    Args:
        data_dir: the data directory (default `privacy_ci.data.data_dir()`).

    Returns:
        The paths of parts 160, 162 and 164.

    Raises:
        DataMissingError: a page is missing (the message says how to fetch it).
    """
    from privacy_ci.data import require

    if data_dir is None:
        root = require(*ECFR_FILES)
    else:
        root = Path(data_dir)
        missing = [f for f in ECFR_FILES if not (root / f).is_file()]
        if missing:
            raise DataMissingError(
                f"{len(missing)} eCFR page(s) missing from {root}: {', '.join(missing)}. "
                "Run `privacy-ci data fetch` to download them."
            )
    return [root / f for f in ECFR_FILES]


def _cache_key(paths: Iterable[Path]) -> str:
    """sha256 of the parser version, the tree classes' fields and the pages' bytes."""
    layout = ",".join(f.name for cls in (RegulationTree, Node, EcfrReport) for f in fields(cls))
    h = hashlib.sha256(f"ecfr-parser-{PARSER_VERSION}|{layout}".encode())
    for path in paths:
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def load_ecfr(
    data_dir: Path | None = None, cache: bool = True
) -> tuple[RegulationTree, EcfrReport]:
    """Parse (or load from the cache) the HIPAA tree of the eCFR pages, with its report.

    Args:
        data_dir: the data directory (default `privacy_ci.data.data_dir()`).
        cache: read and write ``<cache_dir>/regulations/ecfr-hipaa-<key>.pickle``,
            keyed by the sha256 of the three pages, `PARSER_VERSION` and the fields
            of the tree classes, so any change to a page, the parser or the tree
            model invalidates it.

    Returns:
        The tree and the parser's report.

    Raises:
        DataMissingError: a page is missing.
        TreeError: a page cannot be parsed.
    """
    paths = ecfr_paths(data_dir)
    if not cache:
        return parse_ecfr(paths)
    from privacy_ci.data import cache_dir

    key = _cache_key(paths)
    folder = cache_dir() / "regulations"
    target = folder / f"ecfr-hipaa-{key[:24]}.pickle"
    try:
        with target.open("rb") as fh:
            payload = pickle.load(fh)
        if (
            isinstance(payload, dict)
            and payload.get("key") == key
            and isinstance(payload.get("tree"), RegulationTree)
            and isinstance(payload.get("report"), EcfrReport)
        ):
            # the cache is keyed by content, not place: name the pages read now
            tree, report = payload["tree"], payload["report"]
            report.sources = [str(p) for p in paths]
            tree.source = "; ".join(report.sources)
            return tree, report
    except FileNotFoundError:
        pass
    except Exception:  # a damaged cache file is rebuilt, never trusted
        pass
    tree, report = parse_ecfr(paths)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("ecfr-hipaa-*.pickle"):
            if old != target:
                old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ecfr-hipaa-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump({"key": key, "tree": tree, "report": report}, fh, protocol=5)
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
    except OSError:
        pass  # a read-only cache only costs time
    return tree, report


def load_ecfr_tree(data_dir: Path | None = None, cache: bool = True) -> RegulationTree:
    """The HIPAA tree parsed from the eCFR pages of the data directory (cached).

    Args:
        data_dir: the data directory (default `privacy_ci.data.data_dir()`).
        cache: use the cache directory (see `load_ecfr`).

    Returns:
        The tree.

    Raises:
        DataMissingError: a page is missing.
        TreeError: a page cannot be parsed.
    """
    return load_ecfr(data_dir, cache)[0]
