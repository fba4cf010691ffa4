"""`kb compare` recomputed against agreement counted by hand on a three-norm fixture."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privacy_ci.annotation import compare_knowledge_bases
from privacy_ci.knowledge import KB_FOLDER_FORMAT, KnowledgeBase, load_kb_folder

A, B, C = "164.502(a)(1)(i)", "164.502(a)(1)(ii)", "164.502(a)(1)(iv)"


def entry(node: str, **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "text": node,
        "node_index": node,
        "refer_list": [],
        "norm_type": "positive_norm",
        "sender": ["covered entity"],
        "sender_role": "none",
        "recipient": ["none"],
        "recipient_role": "none",
        "subject": ["individual"],
        "subject_role": "patient",
        "information_type": "protected health information",
        "consent_form": "none",
        "purpose": "treatment",
        "sender_is_subject": "no",
        "recipient_is_subject": "no",
    }
    return base | values


def folder(root: Path, norms: dict[str, dict[str, Any]]) -> Path:
    root.mkdir()
    (root / "norms.json").write_text(json.dumps(norms))
    (root / "kb.json").write_text(
        json.dumps(
            {
                "format": KB_FOLDER_FORMAT,
                "regulation": "hipaa",
                "tree": "ecfr",
                "files": {"norms": "norms.json"},
            }
        )
    )
    return root


@pytest.fixture()
def pair(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))
    published = folder(
        tmp_path / "published",
        {
            A: entry(A, norm_type="general_definition", purpose="treatment"),
            B: entry(B, refer_list={"164.506": "support"}, sender_role="Covered Entities"),
            C: entry(
                C,
                refer_list={"164.502(a)(5)(i)": "exception", "164.508": "support"},
                consent_form="authorization",
                recipient_is_subject="not sure",
            ),
        },
    )
    built = folder(
        tmp_path / "built",
        {
            # norm type differs; purpose differs in spelling only ("treatments")
            A: entry(A, purpose="treatments"),
            # same; the role differs by case and plural only
            B: entry(B, refer_list={"164.506": "support"}, sender_role="covered entity"),
            # one reference label differs; consent differs; purpose means the same
            C: entry(
                C,
                refer_list={"164.502(a)(5)(i)": "support", "164.508": "support"},
                consent_form="none",
                purpose="medical treatment",
            ),
            # not in the published KB
            "164.502(a)(1)(iii)": entry("164.502(a)(1)(iii)"),
        },
    )
    return built, published


def fake_cosine(value: str, others: Sequence[str]) -> list[float]:
    """Cosine 0.9 when the two values share a word, else 0.1."""
    return [0.9 if set(value.split()) & set(o.split()) else 0.1 for o in others]


def test_agreement_matches_the_hand_count(pair: tuple[Path, Path]) -> None:
    built, published = (load_kb_folder(p) for p in pair)
    assert isinstance(built, KnowledgeBase)
    c = compare_knowledge_bases(built, published, scorer=fake_cosine)
    assert c.coverage["both"] == 3 and c.coverage["only_built"] == ["164.502(a)(1)(iii)"]
    # norm type: B and C agree, A does not -> 2/3; confusion rows = published
    assert c.norm_type["agreement"] == round(2 / 3, 4)
    assert c.norm_type["confusion"]["general_definition"]["positive"] == 1
    assert c.norm_type["confusion"]["positive"]["positive"] == 2
    # purpose: exact only B (A "treatments", C "medical treatment"), normalised A and B,
    # semantic all three (C shares the word "treatment")
    assert c.fields["purpose"] == {
        "n": 3,
        "both_empty": 0,
        "exact": round(1 / 3, 4),
        "normalised": round(2 / 3, 4),
        "semantic": 1.0,
    }
    # sender_role: "none" everywhere but B; B differs by case/plural: exact misses
    assert c.fields["sender_role"]["both_empty"] == 2
    assert c.fields["sender_role"]["exact"] == round(2 / 3, 4)
    assert c.fields["sender_role"]["normalised"] == 1.0
    # consent form: C differs (authorization vs none) and no scorer can rescue an empty side
    assert c.fields["consent_form"]["normalised"] == round(2 / 3, 4)
    assert c.fields["consent_form"]["semantic"] == round(2 / 3, 4)
    # recipient is subject: C differs
    assert c.is_subject["recipient_is_subject"]["agreement"] == round(2 / 3, 4)
    assert c.is_subject["sender_is_subject"]["agreement"] == 1.0
    # references both have: 164.506 (same), 164.502(a)(5)(i) (differs), 164.508 (same)
    assert c.references["both"] == 3 and c.references["agreement"] == round(2 / 3, 4)
    assert c.references["confusion"]["exception"]["support"] == 1
    differing = {d["id"]: set(d["fields"]) for d in c.differences}
    assert differing == {
        A: {"norm_type"},  # the purpose differs in spelling only
        C: {"consent_form", "purpose", "recipient_is_subject", "references"},
    }
    # the baseline: every norm a general definition (A only), every field empty
    assert c.baseline is not None
    assert c.baseline["norm_type"]["agreement"] == round(1 / 3, 4)
    assert c.baseline["fields"]["recipient"]["normalised"] == 1.0  # "none" everywhere
    assert c.baseline["fields"]["subject"]["normalised"] == 0.0
    assert c.baseline["references"]["agreement"] == round(2 / 3, 4)


def test_the_cli_prints_the_same_figures_as_json(pair: tuple[Path, Path]) -> None:
    from privacy_ci.cli.main import app

    built, published = pair
    result = CliRunner().invoke(
        app, ["kb", "compare", str(built), str(published), "--no-semantic", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["norm_type"]["agreement"] == round(2 / 3, 4)
    assert data["fields"]["purpose"]["semantic"] is None and data["semantic"] is None
    assert len(data["differences"]) == 2


def test_different_regulations_are_refused(pair: tuple[Path, Path], shared_data: Path) -> None:
    from privacy_ci.knowledge import load_knowledge_base

    built = load_kb_folder(pair[0])
    with pytest.raises(ValueError, match="gdpr"):
        compare_knowledge_bases(built, load_knowledge_base("gdpr", shared_data))
