"""Agreement of our eCFR tree with the published GoldCoin and Checklist trees.

Measured on the snapshot in data/ (parser version 1):

| published tree | id agreement | text exact | parents | ref recall | ref precision |
|---|---|---|---|---|---|
| GoldCoin regulation_tree_goldcoin | 100% (2274) | 99.87% (2271/2274) | 100% | 100% (760/760) | 83.4% (760/911) |
| Checklist regulation_tree | 100% (2274) | 99.87% | 100% of 2196 (+77 orphans) | 100% | 83.4% |

The thresholds below sit just under these numbers; every residual difference is
an explained category (see `test_explained_differences`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privacy_ci.regulations import (
    ECFR_FILES,
    AgreementReport,
    AliasIndex,
    RegulationTree,
    agreement_with_goldcoin,
    compare_with_published,
    load_hipaa_graphml,
    parse_ecfr_html,
)


@pytest.fixture(scope="module")
def ours(shared_data: Path) -> RegulationTree:
    return parse_ecfr_html([shared_data / f for f in ECFR_FILES])


@pytest.fixture(scope="module")
def goldcoin(shared_data: Path) -> RegulationTree:
    return load_hipaa_graphml(shared_data / "hipaa/regulation_tree_goldcoin.graphml")[0]


@pytest.fixture(scope="module")
def report(ours: RegulationTree, goldcoin: RegulationTree) -> AgreementReport:
    return compare_with_published(ours, goldcoin)


def _explained(report: AgreementReport) -> dict[str, int]:
    return {d.category: d.count for d in report.explained}


def test_node_ids_agree(report: AgreementReport) -> None:
    assert report.theirs_nodes == 2274 and report.theirs_stubs == 18
    assert report.id_agreement >= 0.999
    assert report.id_recall >= 0.999 and report.id_precision >= 0.999
    assert report.ids_ours_only == [] and report.ids_theirs_only == []
    # 273 nodes differ only in spelling: 124 %20 terms, 147 stripped terms, ANSI, appendix
    assert report.ids_matched - report.ids_exact == 273


def test_node_texts_agree(report: AgreementReport) -> None:
    assert report.text_exact_rate >= 0.998
    assert report.text_mean_ratio >= 0.998
    assert {a for a, _, _ in report.text_differences} == {
        "HIPAA",  # our root describes all three parts
        "AppendixAtoSubpartCofPart164,Title45",  # ours keeps the matrix rows
        "164.520(b)(1)(i)",  # ours keeps the required header statement (div.extract)
    }


def test_parents_agree(report: AgreementReport) -> None:
    assert report.parent_agreement >= 0.999
    assert report.parents_compared == 2273


def test_references_agree(report: AgreementReport) -> None:
    assert report.ref_recall >= 0.99  # measured 100%
    assert report.ref_precision >= 0.80  # measured 83.4%: ours also reads the text
    assert report.refs_unmappable == []
    assert len(report.refs_ours_only) == report.refs_ours - report.refs_common


def test_explained_differences(report: AgreementReport) -> None:
    explained = _explained(report)
    assert explained["id: printed-id erratum"] == 1
    assert explained["id: %20-encoded 160.103 term"] == 124
    assert explained["id: whitespace-stripped term"] == 147
    assert explained["stubs: text-less reference sources"] == 18
    assert explained["refs: stub reference onto itself"] == 1  # 45 CFR 162.1902 -> 162.1902
    not_ours_only = ("refs: stub reference onto itself", "refs: published only")
    ref_explained = sum(
        v for k, v in explained.items() if k.startswith("refs: ") and k not in not_ours_only
    )
    assert ref_explained == len(report.refs_ours_only)
    assert "refs: published only" not in explained
    assert "text: other" not in explained
    assert explained["refs: part/subpart targets"] >= 30
    assert explained["refs: members of a range"] >= 30
    erratum = next(d for d in report.explained if d.category == "id: printed-id erratum")
    assert erratum.examples == ["160.103(ANSI)(1) = 160.103(Business associate)(1)"]


def test_checklist_tree_orphans_are_explained(ours: RegulationTree, shared_data: Path) -> None:
    checklist, _ = load_hipaa_graphml(shared_data / "hipaa/regulation_tree.graphml")
    report = compare_with_published(ours, checklist)
    assert report.id_agreement >= 0.999
    assert report.parent_agreement >= 0.999
    assert report.ref_recall >= 0.99
    explained = _explained(report)
    assert explained["parents: orphan nodes in the published tree"] == 77
    assert explained["stubs: text-less reference sources"] == 41  # 18 stubs + 23 curly parents


def test_privacy_rule_subset(ours: RegulationTree, shared_data: Path) -> None:
    subset, _ = load_hipaa_graphml(shared_data / "hipaa/privacy_rule_tree_goldcoin.graphml")
    report = compare_with_published(ours, subset)
    assert report.ids_theirs_only == []
    assert report.id_recall >= 0.999
    assert report.ref_recall >= 0.99
    assert _explained(report)["refs: ends outside the published tree"] > 0


def test_report_outputs(report: AgreementReport) -> None:
    data = json.loads(json.dumps(report.as_dict(max_examples=3)))
    assert data["ids"]["agreement"] >= 0.999
    assert data["references"]["recall"] >= 0.99
    assert all(len(d["examples"]) <= 10 for d in data["explained"])
    rows = report.rows()
    assert rows[0][0] == "node ids"
    assert all(len(r) == 3 and all(isinstance(x, str) for x in r) for r in rows)
    assert any(r[1] == "recall of theirs" for r in rows)


def test_agreement_with_goldcoin_helper(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path))
    report = agreement_with_goldcoin(shared_data)
    assert report.id_agreement >= 0.999


def test_kb_keys_and_gold_ids_resolve(ours: RegulationTree, shared_data: Path) -> None:
    """The knowledge base and the court cases use GoldCoin spellings; all must resolve."""
    index = AliasIndex.from_tree(ours)
    kb = json.loads((shared_data / "hipaa/kb_annotated.json").read_text(encoding="utf-8"))
    ids = list(kb)
    for entry in kb.values():
        if isinstance(entry["refer_list"], dict):
            ids += list(entry["refer_list"])
    for name in ("real", "synthetic"):
        cases = json.loads(
            (shared_data / f"cases/goldcoin/{name}.json").read_text(encoding="utf-8")
        )
        for case in cases:
            ids += case["refer_ids"]
    assert len(ids) == 1720  # 591 keys + 294 reference targets + 497 + 338 gold ids
    unresolved = [i for i in ids if index.resolve(i) is None]
    assert unresolved == []
    assert index.resolve("164.504(a)Planadministrationfunctions") == (
        "164.504(a)(Plan administration functions)"
    )
