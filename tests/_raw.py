"""Readers of the raw data files for expected values, written without the package.

Tests compare what the package computes with figures derived here straight from the
files (GraphML with `xml.etree`, JSON and JSON Lines with `json`), so a wrong
loader fails a test instead of being pinned by it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_NS = "{http://graphml.graphdrawing.org/xmlns}"


@dataclass(frozen=True)
class RawGraph:
    """A GraphML file as written: node ids, and edges with their attributes by name."""

    nodes: list[str]
    edges: list[tuple[str, str, dict[str, str]]]

    def relation_counts(self, attribute: str = "relation") -> Counter[str]:
        return Counter(attrs.get(attribute, "") for _, _, attrs in self.edges)

    def tree(self, root: str, relation: str = "subsume") -> tuple[set[str], set[str]]:
        """(internal, leaves) of the nodes reachable from `root` along `relation` edges."""
        children: dict[str, list[str]] = {}
        for source, target, attrs in self.edges:
            if attrs.get("relation") == relation:
                children.setdefault(source, []).append(target)
        seen = {root}
        stack = [root]
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        internal = {n for n in seen if children.get(n)}
        return internal, seen - internal


def read_graphml(path: Path) -> RawGraph:
    """Parse a GraphML file with the standard library only."""
    root = ET.parse(path).getroot()
    names = {key.get("id"): key.get("attr.name") or "" for key in root.iter(f"{_NS}key")}
    graph = root.find(f"{_NS}graph")
    assert graph is not None, path
    nodes = [str(node.get("id")) for node in graph.iter(f"{_NS}node")]
    edges = []
    for edge in graph.iter(f"{_NS}edge"):
        attrs = {names.get(d.get("key"), "?"): d.text or "" for d in edge.iter(f"{_NS}data")}
        edges.append((str(edge.get("source")), str(edge.get("target")), attrs))
    return RawGraph(nodes, edges)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON Lines file (blank lines ignored)."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
