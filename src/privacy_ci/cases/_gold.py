"""Gold-id resolution: the regulation ids a case file cites -> nodes of the regulation tree.

* HIPAA: GoldCoin ``refer_ids`` (``164.512``, ``164.502(a)``) and PrivaCI-Bench
  ``followed/violated_articles`` (``164.512(e)(1)``) go through the tree's own
  `RegulationTree.resolve` (every published spelling). An id that names no node
  is reduced to its nearest existing ancestor (dropping trailing labels) and
  reported as reduced; one with no such ancestor is reported unresolved.
* GDPR: free-form mentions (``Article 6 - Lawfulness of processing``,
  ``Art. 21 (3) GDPR``, ``Art. 5 (1) f) GDPR``, ``Articles 38 and 39 of the GDPR``,
  ``Article 6.1.b``, ``Art. 4 nr. 11 GDPR``) are parsed by `parse_article_mention`
  into article/paragraph references and mapped to ``Article N(p)`` when that
  paragraph node exists, else ``Article N``. Mentions of another law
  (``Art. 27 (2) of the Croatian Act on the Implementation of the GDPR``,
  ``Article 82 of the French Law on Informatics and Freedoms``) are *not* mapped
  to the GDPR article with the same number: they are reported unresolved.
* AI Act: ``Article N`` -> the ``EU_AI_ACT.chapterX[.sectionX-Y].articleN`` node
  (and ``….articleN.p[.x]`` when a paragraph or point is given and exists).
* ACLU cases cite constitutional amendments and statutes; there is no tree, so
  their ids are kept raw and nothing is resolved (`GoldResolver.applicable` is False).

Trees are loaded lazily, once per process and data directory (`gold_resolver`).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from privacy_ci.regulations import RegulationTree

__all__ = [
    "TREE_FILES",
    "ArticleRef",
    "GoldKind",
    "GoldResolution",
    "GoldResolver",
    "clear_tree_cache",
    "gold_resolver",
    "parse_article_mention",
]

TREE_FILES: dict[str, str] = {
    "hipaa:published": "hipaa/regulation_tree_goldcoin.graphml",
    "gdpr": "law_trees/gdpr.graphml",
    "ai_act": "law_trees/ai_act.graphml",
}
"""The tree files, relative to the data directory (the same as `privacy_ci.knowledge.KB_FILES`).

HIPAA's default tree (``hipaa:ecfr``) is parsed from ``hipaa/ecfr/*.html``, the
tree `load_knowledge_base("hipaa")` uses, so gold nodes and KB norm ids agree.
"""

HIPAA_TREES = ("ecfr", "published")
"""The HIPAA trees gold ids can be resolved against (see `load_knowledge_base`)."""


class GoldKind(StrEnum):
    """How a gold mention reached the tree."""

    EXACT = "exact"  # the mention is a node id as written
    ALIAS = "alias"  # another spelling of nodes at the same granularity
    REDUCED = "reduced"  # mapped to coarser nodes (a point or paragraph without a node)
    PARTIAL = "partial"  # some of the articles it names resolved, some did not
    UNRESOLVED = "unresolved"  # no node
    NO_TREE = "no_tree"  # the regulation has no tree (ACLU)


@dataclass(frozen=True, slots=True)
class GoldResolution:
    """What one gold mention resolved to.

    Args:
        raw: the mention as written in the case file.
        nodes: the tree node ids it maps to (empty when unresolved).
        kind: how it was mapped.
        note: the reduction made, or why it did not resolve ("" for exact hits).
    """

    raw: str
    nodes: tuple[str, ...]
    kind: GoldKind
    note: str = ""

    @property
    def resolved(self) -> bool:
        """Whether the mention reached at least one node."""
        return bool(self.nodes)


# ---------------------------------------------------------------------------------
# parsing article mentions (GDPR, AI Act)
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
_OWN_LAW_WORDS = frozenset({"GDPR", "UK", "EU", "AI", "General", "Regulation", "Artificial"})
_LAW_NAME = re.compile(
    r"\b(?:of\s+)?(?:the\s+)?(?:UK\s+|EU\s+)?"
    r"(?:GDPR|General\s+Data\s+Protection\s+Regulation|AI\s+Act|Artificial\s+Intelligence\s+Act)\b",
    re.IGNORECASE,
)
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


def parse_article_mention(raw: str) -> tuple[list[ArticleRef], str]:
    """Read the article references of a free-form mention.

    Titles (``Article 6 - Lawfulness of processing``, ``Article 6 (Lawfulness of
    processing)``), the law's name (``GDPR``, ``of the GDPR``, ``UK GDPR``) and
    trailing words (``subparagraph 2``) are ignored; lists (``Articles 5, 6, 7``,
    ``Articles 38 and 39``, ``Art. 13 (1), (2)``) give one reference each.

    Args:
        raw: the mention, e.g. ``Art. 5 (1) f) GDPR`` or ``Articles 38 and 39 of the GDPR``.

    Returns:
        ``(refs, problem)``: the references in order, and, when there are none, why
        (``"cites another law: …"``, ``"no article number"``). A mention with no
        ``Art``/``Article`` keyword that is just a number (``14(1)(c)``) is read as
        an article, with the problem ``""`` and the reference returned.
    """
    text = _clean_mention(raw)
    head = _DASHES.split(text, maxsplit=1)[0]
    head = _TITLE_PAREN.sub(" ", head)
    for m in _FOREIGN.finditer(head):
        if m.group(1) not in _OWN_LAW_WORDS:
            return [], f"cites another law: {head[m.start() :].strip()!r}"
    head = " ".join(_LAW_NAME.sub(" ", head).split())
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


# ---------------------------------------------------------------------------------
# resolvers
# ---------------------------------------------------------------------------------
class GoldResolver:
    """Maps gold mentions of one regulation to tree nodes, memoising per mention.

    Get one with `gold_resolver`; it is shared by every dataset of the process
    that uses the same tree.

    Args:
        regulation: ``hipaa``, ``gdpr``, ``ai_act`` or ``aclu``.
        tree: the regulation tree (None for ACLU, which has none).
    """

    def __init__(self, regulation: str, tree: RegulationTree | None) -> None:
        self.regulation = regulation
        self.tree = tree
        self._memo: dict[str, GoldResolution] = {}
        self._lock = threading.Lock()
        self._articles: dict[int, str] | None = None

    @property
    def applicable(self) -> bool:
        """Whether there is a tree to resolve against."""
        return self.tree is not None

    def resolve(self, raw: str) -> GoldResolution:
        """Resolve one mention.

        Args:
            raw: the id or article mention as written in the case file.

        Returns:
            The resolution (never raises for an unknown id: it is reported instead).
        """
        hit = self._memo.get(raw)
        if hit is not None:
            return hit
        if self.tree is None:
            note = f"no regulation tree for {self.regulation}"
            out = GoldResolution(raw, (), GoldKind.NO_TREE, note)
        elif self.regulation == "hipaa":
            out = self._resolve_hipaa(self.tree, raw)
        else:
            out = self._resolve_articles(self.tree, raw)
        with self._lock:
            self._memo[raw] = out
        return out

    # -- HIPAA ----------------------------------------------------------------------
    @staticmethod
    def _resolve_hipaa(tree: RegulationTree, raw: str) -> GoldResolution:
        text = raw.strip()
        node = tree.resolve(text)
        if node is not None:
            if node == raw:
                return GoldResolution(raw, (node,), GoldKind.EXACT)
            return GoldResolution(raw, (node,), GoldKind.ALIAS, f"spelled {node!r} in the tree")
        current = text
        while True:
            m = re.fullmatch(r"(.*\S)\s*\([^()]*\)", current)
            if m is None:
                break
            current = m.group(1)
            node = tree.resolve(current)
            if node is not None:
                return GoldResolution(
                    raw, (node,), GoldKind.REDUCED, f"no node {raw!r}; reduced to ancestor {node!r}"
                )
        return GoldResolution(raw, (), GoldKind.UNRESOLVED, "no such node in the HIPAA tree")

    # -- GDPR / AI Act --------------------------------------------------------------
    def _article_index(self, tree: RegulationTree) -> dict[int, str]:
        if self._articles is None:
            index: dict[int, str] = {}
            if self.regulation == "ai_act":
                for node_id in tree.nodes:
                    m = re.fullmatch(r"EU_AI_ACT(?:\.[\w-]+)*\.article(\d+)", node_id)
                    if m is not None:
                        index.setdefault(int(m.group(1)), node_id)
            else:
                for node_id in tree.nodes:
                    m = re.fullmatch(r"Article (\d+)", node_id)
                    if m is not None:
                        index[int(m.group(1))] = node_id
            self._articles = index
        return self._articles

    def _node_of(self, tree: RegulationTree, ref: ArticleRef) -> tuple[str | None, bool]:
        """The deepest node for a reference, and whether detail was dropped."""
        article = self._article_index(tree).get(ref.article)
        if article is None:
            return None, False
        candidates: list[str] = []
        if self.regulation == "ai_act":
            if ref.paragraph is not None:
                para = f"{article}.{ref.paragraph}"
                if ref.point is not None:
                    candidates.append(f"{para}.{ref.point}")
                candidates.append(para)
        elif ref.paragraph is not None:
            candidates.append(f"{article}({ref.paragraph})")
        for i, cand in enumerate(candidates):
            if cand in tree.nodes:
                dropped = i > 0 or (self.regulation != "ai_act" and ref.point is not None)
                return cand, dropped
        return article, ref.paragraph is not None or ref.point is not None

    def _resolve_articles(self, tree: RegulationTree, raw: str) -> GoldResolution:
        if raw in tree.nodes:
            return GoldResolution(raw, (raw,), GoldKind.EXACT)
        refs, problem = parse_article_mention(raw)
        if not refs:
            return GoldResolution(raw, (), GoldKind.UNRESOLVED, problem)
        nodes: list[str] = []
        missing: list[int] = []
        reduced = False
        for ref in refs:
            node, dropped = self._node_of(tree, ref)
            if node is None:
                missing.append(ref.article)
                continue
            reduced = reduced or dropped
            if node not in nodes:
                nodes.append(node)
        law = {"gdpr": "GDPR", "ai_act": "AI Act"}.get(self.regulation, self.regulation)
        if not nodes:
            listed = ", ".join(str(a) for a in missing)
            note = f"no article {listed} in the {law} tree"
            return GoldResolution(raw, (), GoldKind.UNRESOLVED, note)
        if missing:
            listed = ", ".join(str(a) for a in missing)
            return GoldResolution(
                raw, tuple(nodes), GoldKind.PARTIAL, f"no article {listed} in the {law} tree"
            )
        bare = "" if _KEYWORD.search(raw) else "no 'Article' keyword; read as an article number; "
        if reduced:
            return GoldResolution(
                raw,
                tuple(nodes),
                GoldKind.REDUCED,
                f"{bare}finer than the tree; reduced to {', '.join(nodes)}",
            )
        return GoldResolution(raw, tuple(nodes), GoldKind.ALIAS, bare.rstrip("; "))


# ---------------------------------------------------------------------------------
# the per-process cache
# ---------------------------------------------------------------------------------
_CACHE: dict[tuple[str, str, str], tuple[tuple[tuple[int, int], ...], GoldResolver]] = {}
_CACHE_LOCK = threading.Lock()


def _tree_paths(regulation: str, hipaa_tree: str, root: Path) -> list[Path]:
    if regulation == "hipaa":
        if hipaa_tree == "ecfr":
            from privacy_ci.regulations import ECFR_FILES

            return [root / f for f in ECFR_FILES]
        return [root / TREE_FILES["hipaa:published"]]
    return [root / TREE_FILES[regulation]]


def _signature(paths: list[Path]) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            return ()
        out.append((st.st_mtime_ns, st.st_size))
    return tuple(out)


def _load_tree(regulation: str, hipaa_tree: str, root: Path, paths: list[Path]) -> RegulationTree:
    from privacy_ci.errors import DataMissingError

    missing = [p for p in paths if not p.is_file()]
    if missing:
        listed = ", ".join(str(p.relative_to(root)) for p in missing)
        raise DataMissingError(
            f"{len(missing)} regulation tree file(s) needed to resolve {regulation} gold ids are "
            f"missing from {root}: {listed}. Run `privacy-ci data fetch`, or load with "
            "resolve_gold=False."
        )
    if regulation == "hipaa" and hipaa_tree == "ecfr":
        from privacy_ci.regulations import load_ecfr_tree

        return load_ecfr_tree(root)
    if regulation == "hipaa":
        from privacy_ci.regulations import load_hipaa_graphml

        return load_hipaa_graphml(paths[0])[0]
    from privacy_ci.regulations import load_privaci_law_tree

    return load_privaci_law_tree(paths[0], regulation)[0]


def gold_resolver(
    regulation: str, data_dir: Path | str | None = None, hipaa_tree: str = "ecfr"
) -> GoldResolver:
    """The (per-process cached) gold resolver of a regulation.

    The tree is loaded on the first call for a data directory and reused until its
    files change (modification time or size).

    Args:
        regulation: ``hipaa``, ``gdpr``, ``ai_act`` or ``aclu`` (no tree).
        data_dir: the data directory; default `privacy_ci.data.data_dir()`.
        hipaa_tree: ``ecfr`` (the knowledge base's default tree, parsed from the
            eCFR pages) or ``published`` (the GoldCoin GraphML tree).

    Returns:
        The resolver.

    Raises:
        ValueError: unknown regulation or HIPAA tree.
        DataMissingError: a tree file is missing.
        TreeError: a tree file cannot be parsed.
    """
    if regulation == "aclu":
        return GoldResolver("aclu", None)
    if regulation not in ("hipaa", "gdpr", "ai_act"):
        raise ValueError(f"unknown regulation {regulation!r}; expected hipaa, gdpr, ai_act or aclu")
    if hipaa_tree not in HIPAA_TREES:
        raise ValueError(f"hipaa_tree must be 'ecfr' or 'published', not {hipaa_tree!r}")
    if data_dir is None:
        from privacy_ci.data import data_dir as default_data_dir

        root = default_data_dir()
    else:
        root = Path(data_dir)
    variant = hipaa_tree if regulation == "hipaa" else ""
    key = (regulation, variant, str(root.expanduser().resolve()))
    paths = _tree_paths(regulation, hipaa_tree, root)
    signature = _signature(paths)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and signature and hit[0] == signature:
            return hit[1]
        resolver = GoldResolver(regulation, _load_tree(regulation, hipaa_tree, root, paths))
        if signature:
            _CACHE[key] = (signature, resolver)
        return resolver


def clear_tree_cache() -> None:
    """Forget every cached tree and resolver (for tests and long-lived processes)."""
    with _CACHE_LOCK:
        _CACHE.clear()
