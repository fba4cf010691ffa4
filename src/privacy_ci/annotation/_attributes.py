"""The attribute graph G^a built from the annotations (Privacy Checklist section 3.3).

The paper aligns the annotated information types with expert ontologies, the W3C
Data Privacy Vocabulary's personal-data taxonomy (DPV-PD) and OPPO, keeping their
class-class and class-individual inclusions, and appends new terms under the terms
they include. No copy of DPV can be had offline here (no package ships it and
nothing is downloaded at run time), so the taxonomy is the published attribute
graph, whose nodes carry their DPV-PD and OPPO IRIs: the build keeps the part of it
the annotated types reach. That makes its overlap with the published graph no
independent evidence; `kb compare` says so.

Each annotated type (`split_terms`) that the taxonomy knows (same term or lemma key)
brings itself and its ancestors with their edges; a type that ends with a taxonomy
term (``psychotherapy notes`` -> ``notes``) is appended under the longest such term
("has subclass", no IRI); any other type is kept without a parent and listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from privacy_ci.annotation._terms import split_terms
from privacy_ci.knowledge import AttributeGraph, term_tokens

__all__ = ["AttributeGraphBuild", "build_attribute_graph", "write_attribute_graph"]

TAXONOMY_NOTE = (
    "taxonomy: the published attribute graph (DPV-PD and OPPO terms with their IRIs);"
    " no offline copy of the W3C Data Privacy Vocabulary was available"
)


@dataclass
class AttributeGraphBuild:
    """A built attribute graph and how it was made.

    Args:
        graph: parent -> child DiGraph; node ``domain``, edge ``label``.
        aligned: type -> the taxonomy term it is (or falls under).
        appended: types appended under a taxonomy term they end with.
        unaligned: types the taxonomy does not reach.
        taxonomy: where the taxonomy came from.
    """

    graph: nx.DiGraph
    aligned: dict[str, str] = field(default_factory=dict)
    appended: list[str] = field(default_factory=list)
    unaligned: list[str] = field(default_factory=list)
    taxonomy: str = TAXONOMY_NOTE


def _bring(graph: nx.DiGraph, taxonomy: AttributeGraph, term: str) -> None:
    """Add a taxonomy term, its ancestors and the edges between them."""
    source = taxonomy.graph
    for node in [term, *taxonomy.ancestors(term)]:
        graph.add_node(node, domain=source.nodes[node].get("domain", ""))
        for parent in source.predecessors(node):
            graph.add_node(parent, domain=source.nodes[parent].get("domain", ""))
            graph.add_edge(parent, node, label=source.edges[parent, node].get("label", ""))


def build_attribute_graph(
    information_types: Iterable[str], taxonomy: AttributeGraph
) -> AttributeGraphBuild:
    """Build G^a from annotated information types and a taxonomy.

    Args:
        information_types: annotated values (split and cleaned here).
        taxonomy: the taxonomy (see the module docstring).

    Returns:
        The graph and the alignment report.
    """
    graph = nx.DiGraph()
    build = AttributeGraphBuild(graph)
    by_tokens = {term_tokens(t): t for t in taxonomy.terms if t.strip()}
    for kind in split_terms(information_types):
        found = taxonomy.resolve(kind)
        if found is not None:
            build.aligned[kind] = found
            _bring(graph, taxonomy, found)
            continue
        tokens = term_tokens(kind)
        parent = next(
            (by_tokens[tokens[i:]] for i in range(1, len(tokens)) if tokens[i:] in by_tokens),
            None,
        )
        if parent is None:
            build.unaligned.append(kind)
            graph.add_node(kind, domain="")
            continue
        build.aligned[kind] = parent
        build.appended.append(kind)
        _bring(graph, taxonomy, parent)
        graph.add_node(kind, domain="")
        graph.add_edge(parent, kind, label="has subclass")
    return build


def write_attribute_graph(build: AttributeGraphBuild, path: Path) -> None:
    """Write the graph in the published GraphML format (quoted labels, ``domain``)."""
    out = nx.DiGraph(name="g")
    for node, data in build.graph.nodes(data=True):
        out.add_node(node, domain=data.get("domain", ""))
    for parent, child, data in build.graph.edges(data=True):
        out.add_edge(parent, child, label=f'"{data.get("label", "has subclass")}"')
    nx.write_graphml(out, path)
