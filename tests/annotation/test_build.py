"""`kb build` end to end on a small subtree with a scripted model that knows the answers:
records, the knowledge base folder, its loading through the published formats'
loaders, and the comparison with the published KB."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from privacy_ci.annotation import (
    Annotator,
    compare_knowledge_bases,
    load_annotation_run,
    run_annotation,
    select_leaves,
)
from privacy_ci.knowledge import KnowledgeBase, NormType, load_kb_folder
from privacy_ci.llm import Capability

from . import SUBTREE, build, node_of, published_answers, scripted


def test_every_leaf_of_the_subtree_is_asked_once_with_table5(
    published: KnowledgeBase, tmp_path: Path
) -> None:
    client, backend = scripted(published_answers(published))
    annotator = Annotator(client, published.tree)
    leaves = select_leaves(published.tree, SUBTREE)
    assert leaves == [f"{SUBTREE}({n})" for n in ("i", "ii", "iii", "iv", "v", "vi")]
    run = asyncio.run(run_annotation(annotator, tmp_path, leaves, tree_variant="ecfr"))
    assert [r.node_id for r in run.records] == leaves and not run.failures()
    asked = [node_of(messages)[0] for messages, _ in backend.calls]
    assert sorted(asked) == sorted(leaves)
    messages, settings = backend.calls[0]
    node, refs = node_of(messages)
    prompt = messages[-1].content
    # the full specification (root to node) and the tree's references are in the prompt
    assert published.tree.full_specification(node) in prompt
    assert refs == list(published.tree.refs(node))
    assert prompt.startswith("As a legal expert specializing in the HIPAA Privacy Rule")
    # the scripted backend takes a JSON schema: Q5's keys are exactly the references
    assert Capability.JSON_SCHEMA in backend.capabilities
    assert settings.json_schema is not None
    assert settings.json_schema["properties"]["Q5"]["required"] == refs
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    identity = manifest["identity"]
    assert identity["regulation"] == "hipaa" and identity["tree"] == "ecfr"
    assert identity["tree_sha256"] == published.tree.content_hash()
    assert identity["backend"] == "scripted-test-double:scripted"
    assert set(identity["prompts"]) == {"ci_annotation", "ci_annotation_answer"}


def test_the_built_kb_loads_and_agrees_with_the_published_one(
    published: KnowledgeBase, tmp_path: Path
) -> None:
    build(published, tmp_path)
    kb = load_kb_folder(tmp_path)
    leaves = select_leaves(published.tree, SUBTREE)
    assert kb.regulation == "hipaa" and sorted(kb.norms) == sorted(leaves)
    assert kb.norms_report is not None and not kb.norms_report.skipped
    norm = kb.norm(f"{SUBTREE}(iv)")
    assert norm.norm_type is NormType.POSITIVE
    assert norm.consent_form == "authorization"
    assert norm.raw["provenance"] == {
        "model": "scripted-test-double:scripted",
        "run": tmp_path.name,
        "draw": 1,
        "attempts": 1,
    }
    assert kb.definitions is not None and "Covered entity" in kb.definitions
    assert kb.definitions["Covered entity"].source == "160.103(Covered entity)"
    assert kb.attribute_graph is not None
    assert "protected health information" in kb.attribute_graph
    comparison = compare_knowledge_bases(kb, published)
    assert comparison.coverage["both"] == 6
    assert comparison.norm_type["agreement"] == 1.0
    assert comparison.references["agreement"] == 1.0
    assert comparison.references["both"] == sum(len(published.norms[n].references) for n in leaves)
    for name, row in comparison.fields.items():
        assert row["normalised"] == 1.0, name
    assert all(row["agreement"] == 1.0 for row in comparison.is_subject.values())
    assert comparison.differences == []
    # the trivial baseline is measured on the same norms and does worse
    assert comparison.baseline is not None
    assert comparison.baseline["norm_type"]["agreement"] < 1.0


def test_the_run_folder_reads_back(published: KnowledgeBase, tmp_path: Path) -> None:
    build(published, tmp_path)
    run = load_annotation_run(tmp_path)
    assert run.regulation == "hipaa" and run.missing() == []
    kb_json = json.loads((tmp_path / "kb.json").read_text())
    assert kb_json["summary"]["norms"] == 6 and kb_json["summary"]["failures"] == {}
    assert kb_json["built"]["backend"] == "scripted-test-double:scripted"
