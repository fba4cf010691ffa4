"""From a build's records to a knowledge base folder (`privacy_ci.knowledge.load_kb_folder`).

Every leaf that was annotated becomes a norm in the Checklist format, with its
provenance (model, run, draw) and the raw answer; failed leaves are listed in
``kb.json``, never guessed. The definitions come from the tree, the role graph from
the annotated roles and WordNet, the attribute graph from the annotated types and
the taxonomy (see `_roles`, `_attributes`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_ci._durable import now_iso, write_json_atomic
from privacy_ci.annotation._attributes import build_attribute_graph, write_attribute_graph
from privacy_ci.annotation._definitions import definitions_from_tree
from privacy_ci.annotation._roles import build_role_graph, write_role_graph
from privacy_ci.annotation._run import AnnotationRun, NodeRecord
from privacy_ci.annotation._wordnet import WordNet
from privacy_ci.knowledge import KB_FOLDER_FILE, KB_FOLDER_FORMAT, AttributeGraph, Definitions
from privacy_ci.regulations import RegulationTree

__all__ = ["TAXONOMY_FILE", "KBFolderSummary", "norm_entry", "write_kb_folder"]

TAXONOMY_FILE = "hipaa/attribute_graph.graphml"
"""The attribute taxonomy (relative to the data directory): the published attribute
graph, DPV-PD and OPPO terms with their IRIs (no offline copy of DPV exists here)."""

NORMS_FILE = "norms.json"
DEFINITIONS_FILE = "definitions.json"
ROLE_GRAPH_FILE = "role_graph.graphml"
ATTRIBUTE_GRAPH_FILE = "attribute_graph.graphml"

_PARTY_SPLIT = re.compile(r"\s*(?:;|,|\bor\b|\band\b)\s*", re.IGNORECASE)


def _parties(value: str) -> list[str]:
    """A sender/recipient/subject answer as the Checklist's list of actors."""
    return [p for p in (part.strip(" .") for part in _PARTY_SPLIT.split(value)) if p]


def norm_entry(tree: RegulationTree, record: NodeRecord, run: str) -> dict[str, Any]:
    """One annotated leaf as a Checklist KB entry (`privacy_ci.knowledge.load_checklist_kb`).

    Args:
        tree: the tree (the entry's text is the leaf's full specification).
        record: a successful record.
        run: the run's name, for the provenance.
    """
    ann = record.annotation
    assert ann is not None
    chars = ann.characteristics
    raw = next((a["text"] for a in reversed(record.attempts) if not a.get("parse_error")), "")
    return {
        "text": tree.full_specification(record.node_id),
        "node_index": record.node_id,
        "refer_list": dict(ann.references) if ann.references else [],
        "norm_type": ann.norm_type,
        "sender": _parties(chars["sender"]),
        "sender_role": chars["sender_role"],
        "recipient": _parties(chars["recipient"]),
        "recipient_role": chars["recipient_role"],
        "subject": _parties(chars["subject"]),
        "subject_role": chars["subject_role"],
        "information_type": chars["information_type"],
        "consent_form": chars["consent_form"],
        "purpose": chars["purpose"],
        "sender_is_subject": ann.sender_is_subject,
        "recipient_is_subject": ann.recipient_is_subject,
        "gpt_response": raw,
        "provenance": {
            "model": record.backend,
            "run": run,
            "draw": record.draw,
            "attempts": len(record.attempts),
        },
    }


@dataclass
class KBFolderSummary:
    """What `write_kb_folder` wrote.

    Args:
        folder: the folder.
        norms: norms written.
        failures: leaves without an annotation (id -> why).
        missing: leaves of the build not annotated yet (an interrupted build).
        definitions: defined terms.
        role_graph: nodes and edges, roles aligned / not aligned to WordNet.
        attribute_graph: nodes and edges, types aligned / appended / not aligned.
    """

    folder: Path
    norms: int
    failures: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    definitions: int = 0
    role_graph: dict[str, Any] | None = None
    attribute_graph: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "norms": self.norms,
            "failures": self.failures,
            "missing": self.missing,
            "definitions": self.definitions,
            "role_graph": self.role_graph,
            "attribute_graph": self.attribute_graph,
        }


def _values(entries: Iterable[dict[str, Any]], names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for entry in entries:
        for name in names:
            value = entry[name]
            out.extend(value if isinstance(value, list) else [value])
    return out


def write_kb_folder(
    run: AnnotationRun,
    tree: RegulationTree,
    *,
    wordnet: WordNet | None,
    taxonomy: AttributeGraph | None,
    definitions: Definitions | None = None,
) -> KBFolderSummary:
    """Write the knowledge base files into the run's folder.

    Args:
        run: the build (its folder receives the files).
        tree: the tree it annotated (its hash must be the run's).
        wordnet: WordNet for the role graph (None: no role graph).
        taxonomy: the attribute taxonomy (None: no attribute graph).
        definitions: the definitions (default: read from the tree).

    Returns:
        What was written.
    """
    folder = run.folder
    name = folder.name
    ok = [r for r in run.records if r.ok]
    entries = {r.node_id: norm_entry(tree, r, name) for r in ok}
    write_json_atomic(folder / NORMS_FILE, entries)
    summary = KBFolderSummary(
        folder,
        len(entries),
        failures={r.node_id: str(r.failure) for r in run.failures()},
        missing=run.missing(),
    )
    files: dict[str, str | None] = {"norms": NORMS_FILE}
    defs = definitions if definitions is not None else definitions_from_tree(tree)
    write_json_atomic(
        folder / DEFINITIONS_FILE,
        {d.term: {"content": d.text, "source": d.source} for d in defs},
    )
    files["definitions"] = DEFINITIONS_FILE
    summary.definitions = len(defs)
    if wordnet is not None:
        roles = build_role_graph(
            _values(
                entries.values(),
                ("sender", "recipient", "subject", "sender_role", "recipient_role", "subject_role"),
            ),
            wordnet,
            defs,
        )
        write_role_graph(roles, folder / ROLE_GRAPH_FILE)
        files["role_graph"] = ROLE_GRAPH_FILE
        summary.role_graph = {
            "nodes": roles.graph.number_of_nodes(),
            "edges": roles.graph.number_of_edges(),
            "aligned": len(roles.aligned),
            "unaligned": roles.unaligned,
            "defined": roles.defined,
        }
    if taxonomy is not None:
        attributes = build_attribute_graph(
            _values(entries.values(), ("information_type",)), taxonomy
        )
        write_attribute_graph(attributes, folder / ATTRIBUTE_GRAPH_FILE)
        files["attribute_graph"] = ATTRIBUTE_GRAPH_FILE
        summary.attribute_graph = {
            "nodes": attributes.graph.number_of_nodes(),
            "edges": attributes.graph.number_of_edges(),
            "aligned": len(attributes.aligned),
            "appended": attributes.appended,
            "unaligned": attributes.unaligned,
            "taxonomy": attributes.taxonomy,
        }
    identity = run.identity
    write_json_atomic(
        folder / KB_FOLDER_FILE,
        {
            "format": KB_FOLDER_FORMAT,
            "regulation": run.regulation,
            "tree": run.tree_variant,
            "tree_sha256": identity.get("tree_sha256"),
            "files": files,
            "built": {
                "at": now_iso(),
                "backend": run.backend,
                "run": name,
                "nodes": len(run.nodes),
                "prompts": identity.get("prompts"),
                "selection": identity.get("selection"),
            },
            "summary": {k: v for k, v in summary.as_dict().items() if k != "folder"},
        },
    )
    return summary
