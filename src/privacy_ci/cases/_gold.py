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

Which rule applies follows the regulation's id syntax in the registry
(`privacy_ci.regulations.RegulationSpec.ids`: ``cfr`` like HIPAA, ``article`` like
GDPR, ``dotted`` like the AI Act), and its tree files come from the same entry. The
id parsing itself (`parse_article_mention`, `article_index`, `article_node`,
`reduce_to_ancestor`) lives in `privacy_ci.regulations._ids`.

Trees are loaded lazily, once per process and data directory (`gold_resolver`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from privacy_ci.regulations import (
    ArticleRef,
    IdSyntax,
    RegistryView,
    article_index,
    article_node,
    find_regulation,
    get_regulation,
    has_article_keyword,
    parse_article_mention,
    reduce_to_ancestor,
    regulations,
    syntax_of,
)

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

TREE_FILES: Mapping[str, str] = RegistryView(
    lambda: {
        f"{spec.key}:published" if spec.ecfr else spec.key: spec.tree for spec in regulations()
    }
)
"""The tree files, relative to the data directory, read from the registry (the same as
`privacy_ci.knowledge.KB_FILES`).

HIPAA's default tree (``hipaa:ecfr``) is parsed from ``hipaa/ecfr/*.html``, the
tree `load_knowledge_base("hipaa")` uses, so gold nodes and KB norm ids agree.
"""

HIPAA_TREES = ("ecfr", "published")
"""The HIPAA trees gold ids can be resolved against (see `load_knowledge_base`)."""

TREELESS = ("aclu",)
"""Case collections that name no registered regulation and have no tree (ACLU cites
constitutional amendments and statutes): their gold ids are kept raw."""


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
        self.syntax = syntax_of(regulation)
        spec = find_regulation(regulation)
        self.law = spec.name if spec is not None else regulation
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
        elif self.syntax is IdSyntax.CFR:
            out = self._resolve_cfr(self.tree, raw)
        else:
            out = self._resolve_articles(self.tree, raw)
        with self._lock:
            self._memo[raw] = out
        return out

    # -- CFR ids (HIPAA) ------------------------------------------------------------
    def _resolve_cfr(self, tree: RegulationTree, raw: str) -> GoldResolution:
        text = raw.strip()
        node = tree.resolve(text)
        if node is not None:
            if node == raw:
                return GoldResolution(raw, (node,), GoldKind.EXACT)
            return GoldResolution(raw, (node,), GoldKind.ALIAS, f"spelled {node!r} in the tree")
        node = reduce_to_ancestor(tree, text)
        if node is not None:
            return GoldResolution(
                raw, (node,), GoldKind.REDUCED, f"no node {raw!r}; reduced to ancestor {node!r}"
            )
        note = f"no such node in the {self.law} tree"
        return GoldResolution(raw, (), GoldKind.UNRESOLVED, note)

    # -- article mentions (GDPR, AI Act) --------------------------------------------
    def _node_of(self, tree: RegulationTree, ref: ArticleRef) -> tuple[str | None, bool]:
        """The deepest node for a reference, and whether detail was dropped."""
        if self._articles is None:
            self._articles = article_index(tree, self.syntax)
        return article_node(tree, ref, self.syntax, self._articles)

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
        law = self.law
        if not nodes:
            listed = ", ".join(str(a) for a in missing)
            note = f"no article {listed} in the {law} tree"
            return GoldResolution(raw, (), GoldKind.UNRESOLVED, note)
        if missing:
            listed = ", ".join(str(a) for a in missing)
            return GoldResolution(
                raw, tuple(nodes), GoldKind.PARTIAL, f"no article {listed} in the {law} tree"
            )
        bare = (
            "" if has_article_keyword(raw) else "no 'Article' keyword; read as an article number; "
        )
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


def _tree_paths(regulation: str, variant: str, root: Path) -> list[Path]:
    return [root / f for f in get_regulation(regulation).tree_files(variant)]


def _signature(paths: list[Path]) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            return ()
        out.append((st.st_mtime_ns, st.st_size))
    return tuple(out)


def _load_tree(regulation: str, variant: str, root: Path, paths: list[Path]) -> RegulationTree:
    from privacy_ci.errors import DataMissingError
    from privacy_ci.regulations import load_regulation_tree

    missing = [p for p in paths if not p.is_file()]
    if missing:
        listed = ", ".join(str(p.relative_to(root)) for p in missing)
        raise DataMissingError(
            f"{len(missing)} regulation tree file(s) needed to resolve {regulation} gold ids are "
            f"missing from {root}: {listed}. Run `privacy-ci data fetch`, or load with "
            "resolve_gold=False."
        )
    return load_regulation_tree(regulation, root, variant)[0]


def gold_resolver(
    regulation: str, data_dir: Path | str | None = None, hipaa_tree: str = "ecfr"
) -> GoldResolver:
    """The (per-process cached) gold resolver of a regulation.

    The tree is loaded on the first call for a data directory and reused until its
    files change (modification time or size).

    Args:
        regulation: a registered regulation key (``hipaa``, ``gdpr``, ``ai_act``, ...)
            or ``aclu`` (no tree).
        data_dir: the data directory; default `privacy_ci.data.data_dir()`.
        hipaa_tree: for a regulation with eCFR pages (HIPAA): ``ecfr`` (the knowledge
            base's default tree, parsed from the pages) or ``published`` (its GraphML
            tree); ignored otherwise.

    Returns:
        The resolver.

    Raises:
        UnknownRegulation: unknown regulation (a `ValueError`).
        RegistryError: unknown ``hipaa_tree`` (a `ValueError`).
        DataMissingError: a tree file is missing.
        TreeError: a tree file cannot be parsed.
    """
    if regulation in TREELESS:
        return GoldResolver(regulation, None)
    variant = get_regulation(regulation).check_tree(hipaa_tree)
    if data_dir is None:
        from privacy_ci.data import data_dir as default_data_dir

        root = default_data_dir()
    else:
        root = Path(data_dir)
    key = (regulation, variant, str(root.expanduser().resolve()))
    paths = _tree_paths(regulation, variant, root)
    signature = _signature(paths)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and signature and hit[0] == signature:
            return hit[1]
        resolver = GoldResolver(regulation, _load_tree(regulation, variant, root, paths))
        if signature:
            _CACHE[key] = (signature, resolver)
        return resolver


def clear_tree_cache() -> None:
    """Forget every cached tree and resolver (for tests and long-lived processes)."""
    with _CACHE_LOCK:
        _CACHE.clear()
