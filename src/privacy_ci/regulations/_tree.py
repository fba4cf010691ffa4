"""`RegulationTree`: regulation text as a tree of nodes with cross-references.

The tree is the document structure of section 3.1 of the Privacy Checklist paper:
a dummy root (e.g. ``HIPAA``), then parts, subparts, sections and paragraphs
(or chapters, articles and paragraphs for the EU texts). Each leaf's *full
specification* is the text of every node from the root down to it (section 3.2).
References are kept apart from the tree edges: ``references[a]`` lists the
nodes that node ``a`` cites.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from privacy_ci.errors import PrivacyCIError


class NodeKind(StrEnum):
    ROOT = "root"
    PART = "part"
    SUBPART = "subpart"
    SECTION = "section"
    PARAGRAPH = "paragraph"
    DEFINITION = "definition"
    APPENDIX = "appendix"
    CHAPTER = "chapter"
    ARTICLE = "article"
    RECITAL = "recital"
    STUB = "stub"  # a node that exists only as a reference source/target, outside the tree
    OTHER = "other"


class TreeError(PrivacyCIError):
    """A regulation source could not be turned into a proper tree."""


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a regulation tree.

    Args:
        id: the node id, e.g. ``164.502(a)(1)(i)`` or ``160.103(Business associate)(1)``.
        text: the node's own text (without its ancestors').
        kind: what the node is (part, section, paragraph, definition, ...).
        parent: the parent's id (None for the root and for stubs).
        children: the children's ids in document order.
        title: a heading, when the node has one (sections, subparts, articles).
    """

    id: str
    text: str
    kind: NodeKind
    parent: str | None = None
    children: tuple[str, ...] = ()
    title: str = ""

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass
class RegulationTree:
    """An immutable-by-convention regulation tree with references.

    Build one with `TreeBuilder` (which checks the structure) or a loader.

    Args:
        regulation: short name, e.g. ``hipaa``, ``gdpr``, ``ai_act``.
        root: id of the dummy root node.
        nodes: every node by id (tree nodes and stubs).
        references: node id -> ids it cites, in order of appearance.
        source: where it was read from (for messages and reports).
    """

    regulation: str
    root: str
    nodes: dict[str, Node]
    references: dict[str, tuple[str, ...]] = field(default_factory=dict)
    source: str = ""
    _referenced_by: dict[str, tuple[str, ...]] | None = field(default=None, repr=False)

    # -- lookups ---------------------------------------------------------------------
    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def __getitem__(self, node_id: str) -> Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise KeyError(f"{self.regulation}: no node {node_id!r}") from None

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def get(self, node_id: str) -> Node | None:
        return self.nodes.get(node_id)

    def resolve(self, node_id: str) -> str | None:
        """The node id for any accepted spelling (ours, GoldCoin's, a citation), or None.

        ``160.103(Business%20associate)(1)``, ``164.504(a)Planadministrationfunctions``
        and ``§ 164.502(a)`` all resolve to the canonical id when the node exists.
        """
        if node_id in self.nodes:
            return node_id
        from privacy_ci.regulations._ids import alias_index

        return alias_index(self).resolve(node_id)

    def children(self, node_id: str) -> tuple[str, ...]:
        return self[node_id].children

    def parent(self, node_id: str) -> str | None:
        return self[node_id].parent

    def ancestors(self, node_id: str) -> list[str]:
        """Ids from the parent up to the root (nearest first)."""
        out = []
        current = self[node_id].parent
        while current is not None:
            out.append(current)
            current = self.nodes[current].parent
        return out

    def path(self, node_id: str) -> list[str]:
        """Ids from the root down to `node_id` (inclusive)."""
        return [*reversed(self.ancestors(node_id)), node_id]

    def descendants(self, node_id: str) -> list[str]:
        """All ids below `node_id`, in document order (pre-order)."""
        out: list[str] = []
        stack = list(reversed(self[node_id].children))
        while stack:
            current = stack.pop()
            out.append(current)
            stack.extend(reversed(self.nodes[current].children))
        return out

    def subtree(self, node_id: str) -> list[str]:
        return [node_id, *self.descendants(node_id)]

    def in_tree(self, node_id: str) -> bool:
        """Whether the node is reachable from the root (stubs are not)."""
        node = self.nodes.get(node_id)
        if node is None:
            return False
        while node.parent is not None:
            node = self.nodes[node.parent]
        return node.id == self.root

    def tree_nodes(self) -> Iterator[Node]:
        """Nodes reachable from the root, in document order."""
        for node_id in self.subtree(self.root):
            yield self.nodes[node_id]

    def leaves(self) -> Iterator[Node]:
        return (n for n in self.tree_nodes() if n.is_leaf and n.id != self.root)

    def full_specification(self, node_id: str, sep: str = "\n") -> str:
        """The concatenated text from the root down to `node_id` (section 3.2)."""
        parts = []
        for nid in self.path(node_id):
            node = self.nodes[nid]
            if nid == self.root:
                continue
            piece = node.text or node.title
            if piece:
                parts.append(piece)
        return sep.join(parts)

    def refs(self, node_id: str) -> tuple[str, ...]:
        """The nodes `node_id` cites."""
        self[node_id]
        return self.references.get(node_id, ())

    def referenced_by(self, node_id: str) -> tuple[str, ...]:
        """The nodes that cite `node_id`."""
        if self._referenced_by is None:
            back: dict[str, list[str]] = {}
            for src, targets in self.references.items():
                for tgt in targets:
                    back.setdefault(tgt, []).append(src)
            self._referenced_by = {k: tuple(v) for k, v in back.items()}
        self[node_id]
        return self._referenced_by.get(node_id, ())

    # -- summaries -------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Counts over the part reachable from the root, plus references and stubs."""
        reach = list(self.tree_nodes())
        leaves = sum(1 for n in reach if n.is_leaf and n.id != self.root)
        return {
            "nodes": len(self.nodes),
            "tree_nodes": len(reach),
            "internal_nodes": len(reach) - leaves,
            "leaves": leaves,
            "subsumption_edges": len(reach) - 1,
            "references": sum(len(v) for v in self.references.values()),
            "stubs": len(self.nodes) - len(reach),
            "max_depth": max((len(self.ancestors(n.id)) for n in reach), default=0),
        }

    def content_hash(self) -> str:
        """A hash of ids, structure, text and references (for cache invalidation)."""
        h = hashlib.sha256(self.regulation.encode())
        for node in self.nodes.values():
            h.update(
                "\x1f".join(
                    [node.id, node.kind.value, node.parent or "", node.title, node.text]
                ).encode()
            )
            h.update("\x1e".join(node.children).encode())
        for src in sorted(self.references):
            h.update(f"{src}->{'|'.join(self.references[src])}".encode())
        return h.hexdigest()

    def to_networkx(self) -> Any:
        """A networkx DiGraph with `subsume` and `refer` edges (networkx imported lazily)."""
        import networkx as nx

        g = nx.DiGraph(regulation=self.regulation, root=self.root)
        for node in self.nodes.values():
            g.add_node(node.id, text=node.text, kind=node.kind.value, title=node.title)
        for node in self.nodes.values():
            for child in node.children:
                g.add_edge(node.id, child, relation="subsume")
        for src, targets in self.references.items():
            for tgt in targets:
                if not g.has_edge(src, tgt):
                    g.add_edge(src, tgt, relation="refer")
        return g


class TreeBuilder:
    """Accumulates nodes and references, then checks and freezes a `RegulationTree`.

    Checks: one root, every parent exists, no node has two parents, no cycles,
    every reference points at a node.
    """

    def __init__(self, regulation: str, root: str, source: str = "", root_text: str = "") -> None:
        self.regulation = regulation
        self.root = root
        self.source = source
        self._nodes: dict[str, dict[str, Any]] = {
            root: {"text": root_text, "kind": NodeKind.ROOT, "parent": None, "title": ""}
        }
        self._children: dict[str, list[str]] = {root: []}
        self._refs: dict[str, list[str]] = {}

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._nodes

    def add(
        self,
        node_id: str,
        parent: str | None,
        text: str = "",
        kind: NodeKind = NodeKind.PARAGRAPH,
        title: str = "",
    ) -> None:
        """Add a node under `parent` (None for a stub outside the tree)."""
        if node_id in self._nodes:
            raise TreeError(f"{self.source}: node {node_id!r} is defined twice")
        if parent is not None and parent not in self._nodes:
            raise TreeError(f"{self.source}: node {node_id!r} names unknown parent {parent!r}")
        self._nodes[node_id] = {"text": text, "kind": kind, "parent": parent, "title": title}
        self._children[node_id] = []
        if parent is not None:
            self._children[parent].append(node_id)

    def set_text(self, node_id: str, text: str) -> None:
        self._nodes[node_id]["text"] = text

    def refer(self, src: str, targets: Iterable[str]) -> None:
        """Record that `src` cites `targets` (duplicates and self-references dropped)."""
        bucket = self._refs.setdefault(src, [])
        for tgt in targets:
            if tgt != src and tgt not in bucket:
                bucket.append(tgt)

    def build(self) -> RegulationTree:
        nodes = {
            nid: Node(
                id=nid,
                text=info["text"],
                kind=info["kind"],
                parent=info["parent"],
                children=tuple(self._children[nid]),
                title=info["title"],
            )
            for nid, info in self._nodes.items()
        }
        missing = sorted({t for ts in self._refs.values() for t in ts if t not in nodes})
        if missing:
            shown = ", ".join(missing[:5]) + (
                f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            )
            raise TreeError(f"{self.source}: references to unknown nodes: {shown}")
        refs = {k: tuple(v) for k, v in self._refs.items() if v}
        return RegulationTree(self.regulation, self.root, nodes, refs, self.source)


def tree_from_parent_map(
    regulation: str,
    root: str,
    parents: Mapping[str, str | None],
    texts: Mapping[str, str],
    kinds: Mapping[str, NodeKind] | None = None,
    references: Mapping[str, Iterable[str]] | None = None,
    source: str = "",
    order: Iterable[str] | None = None,
) -> RegulationTree:
    """Build a tree from a child -> parent map (parents before children not required).

    Raises:
        TreeError: on a cycle, an unknown parent or a node with no path to the root
            that is not declared a stub (parent None).
    """
    kinds = kinds or {}
    ids = list(order) if order is not None else list(parents)
    # detect cycles by walking up from each node
    for nid in ids:
        seen = {nid}
        cur = parents.get(nid)
        while cur is not None:
            if cur in seen:
                raise TreeError(f"{source}: the subsumption edges form a cycle through {cur!r}")
            seen.add(cur)
            if cur != root and cur not in parents:
                raise TreeError(f"{source}: node {nid!r} has unknown ancestor {cur!r}")
            cur = parents.get(cur)
    builder = TreeBuilder(regulation, root, source, texts.get(root, ""))
    pending = [n for n in ids if n != root]
    placed = {root}
    while pending:
        rest = []
        for nid in pending:
            parent = parents.get(nid)
            if parent is None or parent in placed:
                builder.add(nid, parent, texts.get(nid, ""), kinds.get(nid, NodeKind.OTHER))
                placed.add(nid)
            else:
                rest.append(nid)
        if len(rest) == len(pending):
            raise TreeError(f"{source}: {len(rest)} node(s) cannot be placed under the root")
        pending = rest
    for src, targets in (references or {}).items():
        builder.refer(src, targets)
    return builder.build()
