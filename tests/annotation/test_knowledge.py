"""The auxiliary knowledge a build writes (definitions from the tree, the role graph on
WordNet, the attribute graph) and the built KB in the commands: `kb build --dry-run`,
`kb show`, `retrieve` and `judge` with ``--kb``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privacy_ci.annotation import (
    Annotator,
    WordNetMissing,
    build_attribute_graph,
    build_role_graph,
    definitions_from_tree,
    estimate_cost,
    load_wordnet,
    run_annotation,
    select_leaves,
    wordnet_folder,
    write_kb_folder,
)
from privacy_ci.cli.main import app
from privacy_ci.errors import PrivacyCIError
from privacy_ci.knowledge import KnowledgeBase, load_role_graph
from privacy_ci.regulations import load_regulation_tree
from tests._shared import missing

from . import SUBTREE, published_answers, scripted


@pytest.fixture(scope="module")
def wordnet() -> object:
    try:
        wordnet_folder()
    except WordNetMissing as exc:  # CI installs wordnet-base (scripts/ci_wordnet.sh)
        missing("/usr/share/wordnet", str(exc))
    return load_wordnet()


def test_definitions_come_from_the_definition_sections(
    published: KnowledgeBase, shared_data: Path
) -> None:
    hipaa = definitions_from_tree(published.tree)
    assert hipaa["Covered entity"].source == "160.103(Covered entity)"
    assert "(1) A health plan." in hipaa["Covered entity"].text  # sub-paragraphs joined
    assert hipaa["Payment"].source.startswith("164.501")
    assert hipaa["Availability"].source == "164.304(Availability)"
    assert all(
        d.source.split("(")[0] in {"160.103", "164.103", "164.304", "164.501"} for d in hipaa
    )
    gdpr = definitions_from_tree(load_regulation_tree("gdpr", shared_data)[0])
    assert gdpr["personal data"].source == "Article 4(1)"
    assert len(gdpr) == 26


def test_the_role_graph_climbs_wordnet_to_person_and_adds_defined_roles(
    published: KnowledgeBase, wordnet: object, tmp_path: Path
) -> None:
    from privacy_ci.annotation import write_role_graph

    roles = ["Surgeon", "covered entity", "Court or Administrative Tribunal", "None"]
    build = build_role_graph(roles, wordnet, definitions_from_tree(published.tree))  # type: ignore[arg-type]
    assert build.aligned["surgeon"] == "surgeon"
    assert build.defined["covered entity"] == [
        "health plan",
        "health care clearinghouse",
        "health care provider",
    ]
    write_role_graph(build, tmp_path / "roles.graphml")
    graph = load_role_graph(tmp_path / "roles.graphml")  # the published format's loader
    assert graph.ancestors("surgeon")[:2] == ["doctor", "medical practitioner"]
    assert graph.ancestors("surgeon")[-1] == "person"
    assert "social group" in graph.ancestors("court")
    assert graph.regulation_roles == ["covered entity"]
    assert graph.edge_sources("covered entity", "health plan") == ("160.103(Covered entity)",)
    assert "none" not in graph


def test_the_attribute_graph_keeps_the_taxonomy_part_the_types_reach(
    published: KnowledgeBase,
) -> None:
    taxonomy = published.attribute_graph
    assert taxonomy is not None
    build = build_attribute_graph(
        ["Health Records", "psychiatric health record; quantum flux"], taxonomy
    )
    assert build.aligned["health records"] == "health record"  # same lemma key
    assert build.appended == ["psychiatric health record"]  # ends with a taxonomy term
    assert build.graph.has_edge("health record", "psychiatric health record")
    assert build.unaligned == ["quantum flux"]
    for ancestor in taxonomy.ancestors("health record"):
        assert ancestor in build.graph


def test_no_wordnet_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PRIVACY_CI_WORDNET", str(tmp_path))
    with pytest.raises(WordNetMissing, match="apt-get install wordnet-base"):
        wordnet_folder()


def test_dry_run_counts_without_a_model(published: KnowledgeBase, shared_data: Path) -> None:
    leaves = select_leaves(published.tree, SUBTREE)
    cost = estimate_cost(published.tree, leaves)
    assert cost.nodes == cost.calls == 6 and cost.max_calls == 18
    assert cost.references == sum(len(published.tree.refs(n)) for n in leaves)
    assert cost.prompt_tokens > 6 * 500  # Table 5 alone is ~500 tokens
    result = CliRunner().invoke(
        app,
        ["kb", "build", "--only", SUBTREE, "--dry-run", "--json"],
        env={"PRIVACY_CI_DATA": str(shared_data)},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["prompt_tokens"] == cost.prompt_tokens
    bad = CliRunner().invoke(
        app,
        ["kb", "build", "--only", "999.9", "--dry-run"],
        env={"PRIVACY_CI_DATA": str(shared_data)},
    )
    assert bad.exit_code == 2 and "no leaf" in bad.output
    with pytest.raises(PrivacyCIError):
        select_leaves(published.tree, SUBTREE, limit=0)


def test_retrieve_judge_and_show_accept_a_built_kb(
    published: KnowledgeBase, shared_data: Path, tmp_path: Path
) -> None:
    client, _ = scripted(published_answers(published))
    leaves = select_leaves(published.tree, SUBTREE)
    run = asyncio.run(
        run_annotation(Annotator(client, published.tree), tmp_path, leaves, tree_variant="ecfr")
    )
    write_kb_folder(run, published.tree, wordnet=None, taxonomy=published.attribute_graph)
    env = {"PRIVACY_CI_DATA": str(shared_data)}
    runner = CliRunner()
    shown = runner.invoke(
        app, ["kb", "show", f"{SUBTREE}(iv)", "--kb", str(tmp_path), "--json"], env=env
    )
    assert shown.exit_code == 0, shown.output
    norm = json.loads(shown.output)["norm"]
    assert norm["provenance"]["model"] == "scripted-test-double:scripted"
    stats = runner.invoke(app, ["kb", "stats", "--kb", str(tmp_path), "--json"], env=env)
    assert json.loads(stats.output)["hipaa"]["ours"]["norms"] == 6
    found = runner.invoke(
        app,
        [
            "retrieve",
            "disclose with a valid authorization",
            "--kb",
            str(tmp_path),
            "--retriever",
            "bm25-paper",
            "-k",
            "3",
            "--json",
        ],
        env=env,
    )
    assert found.exit_code == 0, found.output
    hits = [h["id"] for h in json.loads(found.output)["hits"]]
    assert hits and set(hits) <= set(leaves)  # bm25-paper indexes the built norms only
    judged = runner.invoke(
        app,
        [
            "judge",
            "A clinic disclosed a patient's records.",
            "--method",
            "ci-reasoner",
            "--kb",
            str(tmp_path),
            "--json",
        ],
        env=env,
    )
    assert judged.exit_code == 0, judged.output
    assert json.loads(judged.output)["method"] == "ci-reasoner"
    wrong = runner.invoke(app, ["kb", "show", "x", "--kb", str(tmp_path / "nowhere")], env=env)
    assert wrong.exit_code == 2 and "not a knowledge base folder" in wrong.output
