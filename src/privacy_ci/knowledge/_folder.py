"""A knowledge base folder: our own format, written by `privacy-ci kb build`.

A folder holds ``kb.json`` (which regulation and tree, the files, how it was built)
and the files in the published formats the loaders already read:

* ``norms.json``: the Checklist ``{node_id: entry}`` format of ``kb_annotated.json``,
  each entry with its ``provenance`` (model, run, draw) and the raw answer in
  ``gpt_response``;
* ``definitions.json``: ``{term: {content, source}}`` (source: the tree node);
* ``role_graph.graphml`` and ``attribute_graph.graphml``: the Checklist GraphML.

`load_kb_folder` reads it into the same `KnowledgeBase` the published files give, so
``kb stats``/``show``, retrieval, judging and the reasoner accept it (``--kb DIR``).
The tree is not copied: it is loaded from the regulation's registry entry, and a
tree whose text changed since the build is noted in the norms report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privacy_ci._durable import read_json
from privacy_ci.errors import PrivacyCIError
from privacy_ci.knowledge._definitions import load_hipaa_definitions
from privacy_ci.knowledge._graphs import load_attribute_graph, load_role_graph
from privacy_ci.knowledge._kb import KnowledgeBase
from privacy_ci.knowledge._norms import load_checklist_kb
from privacy_ci.regulations import get_regulation, load_regulation_tree

__all__ = [
    "KB_FOLDER_FILE",
    "KB_FOLDER_FORMAT",
    "is_kb_folder",
    "load_kb_folder",
    "open_knowledge_base",
    "read_kb_manifest",
]

KB_FOLDER_FILE = "kb.json"
KB_FOLDER_FORMAT = "privacy-ci-kb/1"


def is_kb_folder(path: Path | str) -> bool:
    """Whether `path` is a folder with a ``kb.json``."""
    return (Path(path) / KB_FOLDER_FILE).is_file()


def read_kb_manifest(folder: Path | str) -> dict[str, Any]:
    """The folder's ``kb.json``.

    Raises:
        PrivacyCIError: no ``kb.json``, not JSON, or another format.
    """
    path = Path(folder) / KB_FOLDER_FILE
    data = read_json(
        path,
        f"{folder}: not a knowledge base folder (no {KB_FOLDER_FILE};"
        " `privacy-ci kb build --out DIR` writes one)",
    )
    if not isinstance(data, dict) or data.get("format") != KB_FOLDER_FORMAT:
        raise PrivacyCIError(f"{path}: not a {KB_FOLDER_FORMAT} manifest")
    return data


def load_kb_folder(folder: Path | str, data_dir: Path | str | None = None) -> KnowledgeBase:
    """Load a knowledge base folder (see the module docstring).

    Norms are read leniently: an entry whose node is not in today's tree is skipped
    into ``norms_report`` rather than refusing the whole folder.

    Args:
        folder: the folder.
        data_dir: the data directory the tree is loaded from (default
            `privacy_ci.data.data_dir()`).

    Returns:
        The knowledge base.

    Raises:
        PrivacyCIError: not a knowledge base folder, an unknown regulation, or a file
            it names is missing or invalid.
    """
    root = Path(folder)
    manifest = read_kb_manifest(root)
    spec = get_regulation(str(manifest.get("regulation")))
    tree, tree_report = load_regulation_tree(spec.key, data_dir, str(manifest.get("tree")))
    files: dict[str, str] = manifest.get("files", {})
    paths = {role: root / name for role, name in files.items() if name}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise PrivacyCIError(f"{root}: file(s) named in {KB_FOLDER_FILE} missing: {missing}")
    if "norms" not in paths:
        raise PrivacyCIError(f"{root / KB_FOLDER_FILE}: names no norms file")
    norms, report = load_checklist_kb(paths["norms"], tree, tree.resolve, strict=False)
    if manifest.get("tree_sha256") not in (None, tree.content_hash()):
        report.notes.append(
            f"the {spec.name} tree changed since this knowledge base was built"
            " (its text or references differ)"
        )
    return KnowledgeBase(
        regulation=spec.key,
        tree=tree,
        norms={n.id: n for n in norms},
        definitions=(
            load_hipaa_definitions(paths["definitions"], spec.key)
            if "definitions" in paths
            else None
        ),
        role_graph=load_role_graph(paths["role_graph"]) if "role_graph" in paths else None,
        attribute_graph=(
            load_attribute_graph(paths["attribute_graph"]) if "attribute_graph" in paths else None
        ),
        norms_report=report,
        tree_report=tree_report,
        sources={"folder": str(root), "tree": tree.source, **{k: str(p) for k, p in paths.items()}},
    )


def open_knowledge_base(
    regulation: str | None = None,
    kb_dir: Path | str | None = None,
    hipaa_tree: str = "ecfr",
) -> KnowledgeBase:
    """A built knowledge base folder when `kb_dir` is given, else the published one.

    Args:
        regulation: the regulation (default ``hipaa``); with `kb_dir`, it must be the
            folder's, if given.
        kb_dir: a knowledge base folder (``kb build --out``), or None.
        hipaa_tree: the tree variant of the published knowledge base.

    Raises:
        PrivacyCIError: the folder is another regulation's, or cannot be read.
    """
    if kb_dir is None:
        from privacy_ci.knowledge._kb import load_knowledge_base

        return load_knowledge_base(regulation or "hipaa", hipaa_tree=hipaa_tree)
    kb = load_kb_folder(kb_dir)
    if regulation is not None and get_regulation(regulation).key != kb.regulation:
        raise PrivacyCIError(f"{kb_dir}: a {kb.regulation} knowledge base, not {regulation}'s")
    return kb
