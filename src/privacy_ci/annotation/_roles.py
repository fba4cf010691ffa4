"""The role graph G^r built from the annotations (Privacy Checklist section 3.3).

"We first use GPT-4 and parsers to recognize social roles in the legal document, then
we align these roles in the WordNet and recursively append their hypernyms until the
role root "person.n.01" is reached. For new definitions of roles such as the covered
entity, if these definitions include roles in V^r, we further append these new
definitions as roles."

Here: the roles are the annotated senders, recipients and subjects and their roles
(`split_terms`); each is aligned to a WordNet noun sense (the phrase itself, else its
head: ``law enforcement official`` -> ``official``), taking the most frequent sense
under a root, ``person`` or ``social group`` (courts, agencies and organizations are
social groups in WordNet, not persons), and its hypernyms are appended up to that
root. Then each defined term of the regulation whose enumerated sub-paragraphs open
with a role or another defined term (160.103 "Covered entity means: (1) A health
plan. (2) A health care clearinghouse. (3) A health care provider ...") subsumes
those roles, with the definition's node id as the edge's source. Roles WordNet does
not know are kept without a parent and listed in the report.

The graph is written in the published GraphML format (edges ``subsume`` and ``is
subsumed by``, ``source`` ``wordnet`` or a one-element list), so `load_role_graph`
reads it like the published one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from privacy_ci.annotation._terms import head_phrase, split_terms
from privacy_ci.annotation._wordnet import Synset, WordNet
from privacy_ci.knowledge import Definitions, clean_text, term_key

__all__ = ["ROLE_ROOTS", "RoleGraphBuild", "build_role_graph", "write_role_graph"]

ROLE_ROOTS = ("person", "social group")
"""The WordNet senses a role's hypernyms stop at (person.n.01, social_group.n.01)."""
WORDNET = "wordnet"


@dataclass
class RoleGraphBuild:
    """A built role graph and how it was made.

    Args:
        graph: parent -> child DiGraph; edge ``sources`` lists ``wordnet`` or node ids.
        aligned: role -> the WordNet sense (first lemma) it was aligned to.
        unaligned: roles no WordNet sense under a root matched.
        defined: defined term -> the roles its definition enumerates.
    """

    graph: nx.DiGraph
    aligned: dict[str, str] = field(default_factory=dict)
    unaligned: list[str] = field(default_factory=list)
    defined: dict[str, list[str]] = field(default_factory=dict)


def _roots(wordnet: WordNet) -> set[int]:
    """The root senses: the first (most frequent) sense of each `ROLE_ROOTS` word."""
    return {wordnet.synsets(word)[0].offset for word in ROLE_ROOTS if wordnet.synsets(word)}


def _root_path(wordnet: WordNet, senses: list[Synset]) -> list[Synset] | None:
    """The shortest hypernym path from the most frequent sense under a root, cut at it."""
    roots = _roots(wordnet)
    for sense in senses:
        best: list[Synset] | None = None
        for path in wordnet.hypernym_paths(sense):
            for i, node in enumerate(path):
                if node.offset in roots:
                    if best is None or i + 1 < len(best):
                        best = path[: i + 1]
                    break
        if best is not None:
            return best
    return None


def _align(wordnet: WordNet, role: str) -> list[Synset] | None:
    """The path for a role: the phrase, else ever shorter tails of its head phrase."""
    found = _root_path(wordnet, wordnet.synsets(role))
    if found is not None:
        return found
    words = head_phrase(role).split()
    for start in range(len(words)):
        tail = " ".join(words[start:])
        found = _root_path(wordnet, wordnet.synsets(tail))
        if found is not None:
            return found
    return None


def _add(graph: nx.DiGraph, parent: str, child: str, source: str) -> None:
    if parent == child:
        return
    if graph.has_edge(parent, child):
        graph.edges[parent, child]["sources"] = tuple(
            sorted(set(graph.edges[parent, child]["sources"]) | {source})
        )
        return
    graph.add_edge(parent, child, sources=(source,))
    if not nx.is_directed_acyclic_graph(graph):  # WordNet and a definition disagreed
        graph.remove_edge(parent, child)


def _enumerated(
    definitions: Definitions, known: dict[str, str], roles: set[str]
) -> dict[str, list[str]]:
    """Defined term -> the known roles or defined terms its enumerated items open with."""
    out: dict[str, list[str]] = {}
    for item in definitions:
        if term_key(item.display_term) not in roles:
            continue  # only a role's definition adds roles ("genetic information" is none)
        text = item.text
        pieces = [p for p in _items(text) if p]
        if len(pieces) < 2:
            continue
        named: list[str] = []
        for piece in pieces:
            opening = " ".join(piece.split()[:8])  # "A health care provider who ..."
            tokens = term_key(re.sub(r"^(?:a|an|the|any)\s+", "", opening, flags=re.I)).split()
            # the longest known role or term the item opens with
            for end in range(len(tokens), 0, -1):
                hit = known.get(" ".join(tokens[:end]))
                if hit is not None and hit != clean_text(item.display_term):
                    named.append(hit)
                    break
        if len(named) >= 2:
            out[clean_text(item.display_term)] = list(dict.fromkeys(named))
    return out


def _items(text: str) -> list[str]:
    """The enumerated items of a definition: the text after each ``(1)``, ``(2)`` ..."""
    parts = re.split(r"\(\d+\)\s*", text)
    return [p.strip() for p in parts[1:]] if len(parts) > 2 else []


def build_role_graph(
    roles: Iterable[str], wordnet: WordNet, definitions: Definitions | None = None
) -> RoleGraphBuild:
    """Build G^r from annotated roles, WordNet and the regulation's definitions.

    Args:
        roles: annotated values (senders, recipients, subjects and their roles);
            split and cleaned here.
        wordnet: the WordNet nouns.
        definitions: the regulation's definitions (for its own roles), or None.

    Returns:
        The graph and the alignment report.
    """
    graph = nx.DiGraph()
    build = RoleGraphBuild(graph)
    terms = split_terms(roles)
    known = {term_key(t): t for t in terms}
    if definitions is not None:
        defined_terms = {term_key(d.display_term): clean_text(d.display_term) for d in definitions}
        for key, term in defined_terms.items():
            known.setdefault(key, term)
        build.defined = _enumerated(definitions, known, {term_key(t) for t in terms})
        for term, items in build.defined.items():
            graph.add_node(term)
            for item in items:
                graph.add_node(item)
        terms = list(
            dict.fromkeys([*terms, *build.defined, *(i for v in build.defined.values() for i in v)])
        )
    for term in terms:
        graph.add_node(term)
        path = _align(wordnet, term)
        if path is None:
            build.unaligned.append(term)
            continue
        build.aligned[term] = path[0].name
        if path[0].name != term:
            _add(graph, path[0].name, term, WORDNET)
        for child, parent in itertools.pairwise(path):
            _add(graph, parent.name, child.name, WORDNET)
    for term, items in build.defined.items():
        source = next(
            (d.source for d in definitions or () if clean_text(d.display_term) == term), term
        )
        for item in items:
            _add(graph, term, item, source)
    return build


def write_role_graph(build: RoleGraphBuild, path: Path) -> None:
    """Write the graph in the published GraphML format (both edge directions)."""
    out = nx.DiGraph()
    out.add_nodes_from(build.graph.nodes)
    for parent, child, data in build.graph.edges(data=True):
        pages = [s for s in data["sources"] if s != WORDNET]
        written = repr(pages) if pages else WORDNET  # the published file's two spellings
        out.add_edge(parent, child, relation="subsume", source=written)
        out.add_edge(child, parent, relation="is subsumed by", source=written)
    nx.write_graphml(out, path)
