"""Model-free baselines: the health-information rule and the majority class, on the real data."""

from __future__ import annotations

import ast
import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.cases import load_dataset
from privacy_ci.ci import Verdict
from privacy_ci.evaluation import (
    baseline_scores,
    health_rule_baseline,
    is_health_information,
    majority_baseline,
)

from . import toy_dataset


@pytest.mark.parametrize(
    "text",
    [
        "Medical records",
        "Protected Health Information (PHI)",
        "PHI",
        "Psychotherapy notes",
        "HIV status",
        "Blood-alcohol test results",
        "Prescription records for controlled substances",
        "Health insurance plan details",
        "Medical/Health Information",
        "Name, Diagnosis, Treatment Plan",
    ],
)
def test_health_information_matches(text: str) -> None:
    assert is_health_information(text)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "Credit report information",
        "Voice recording",
        "DNA sample",
        "Likenesses and physical characteristics",
        "Philosophy lecture notes",  # 'phi' only as a whole word
        "Telephone number",
        "Names and addresses",
    ],
)
def test_other_information_does_not(text: str | None) -> None:
    assert not is_health_information(text)


def test_baselines_on_toy_data() -> None:
    ds = toy_dataset(10)
    maj = majority_baseline(ds.cases, ds.protocol)
    # labels cycle P X N N P: 4 permit, 2 prohibit, 4 not applicable -> tie, permit first
    assert set(maj.predictions.values()) == {Verdict.PERMIT}
    rule = health_rule_baseline(ds.cases)
    for case in ds:
        expected = (
            Verdict.PERMIT
            if is_health_information(case.flow.information_type)
            else Verdict.NOT_APPLICABLE
        )
        assert rule.predictions[case.id] is expected


# ---------------------------------------------------------------------------------
# the expected figures, computed here from the raw files (json/csv, not the loaders)
# ---------------------------------------------------------------------------------
# The health-information rule, re-typed from its definition (privacy_ci.evaluation's
# module notes): whole-word, case-insensitive, on the information-type field only.
HEALTH = re.compile(
    r"\b(?:health|medical|medicine|medication|mental|psychiatr\w*|psychotherap\w*|phi|hiv"
    r"|diagnos\w*|treatment|prescription\w*|patient|hospital\w*|clinical|dental|surg\w*"
    r"|blood)\b",
    re.IGNORECASE,
)
GOLD = {"positive_norm": "permit", "negative_norm": "prohibit", "not applicable": "not_applicable"}
CSV_GOLD = {"Permit": "permit", "Forbid": "prohibit", "Not Applicable": "not_applicable"}
THREE = ("permit", "prohibit", "not_applicable")


def raw_goldcoin(shared_data: Path, name: str) -> list[tuple[str, str]]:
    """(gold class, information type) per case of cases/goldcoin/<name>.json."""
    rows = json.loads((shared_data / "cases" / "goldcoin" / f"{name}.json").read_text("utf-8"))
    return [(GOLD[r["norm_type"]], r["information_type"]) for r in rows]


def rule(information_type: str) -> str:
    return "permit" if HEALTH.search(information_type) else "not_applicable"


def class_scores(pairs: list[tuple[str, str]], label: str) -> dict[str, float]:
    tp = sum(g == p == label for g, p in pairs)
    predicted = sum(p == label for _, p in pairs)
    support = sum(g == label for g, _ in pairs)
    precision = tp / predicted if predicted else 0.0
    recall = tp / support if support else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "predicted": predicted}


def macro(pairs: list[tuple[str, str]], classes: tuple[str, ...]) -> float:
    return sum(class_scores(pairs, c)["f1"] for c in classes) / len(classes)


def check_scores(got: Any, pairs: list[tuple[str, str]], classes: tuple[str, ...]) -> None:
    """The package's scores of a baseline equal the ones computed here from `pairs`."""
    correct = sum(g == p for g, p in pairs)
    assert (got["correct"], got["n"]) == (correct, len(pairs))
    assert got["accuracy"] == pytest.approx(correct / len(pairs), abs=1e-6)
    per_class = got["per_class"]
    assert set(per_class) == set(classes)
    for c in classes:
        want = class_scores(pairs, c)
        for key in ("precision", "recall", "f1"):
            assert per_class[c][key] == pytest.approx(want[key], abs=1e-6), (c, key)
        assert per_class[c]["predicted"] == want["predicted"]
    assert got["macro_f1"] == pytest.approx(macro(pairs, classes), abs=1e-6)


def test_baselines_on_real(shared_data: Path) -> None:
    raw = raw_goldcoin(shared_data, "real")
    pairs = [(gold, rule(info)) for gold, info in raw]
    real = load_dataset("real", shared_data)
    scores = baseline_scores(real.cases, real.protocol, bootstrap=0)
    health = scores["health-rule"]["scores"]
    check_scores(health["main"], pairs, THREE)
    # the brief's "about 0.855": 183 of 214; prohibit is never predicted
    assert (health["main"]["correct"], health["main"]["n"]) == (183, 214)
    assert health["main"]["per_class"]["prohibit"]["predicted"] == 0
    # compliance: the applicable cases only, permit vs prohibit (not applicable is wrong)
    applicable = [(g, p) for g, p in pairs if g != "not_applicable"]
    assert len(applicable) == 107
    check_scores(health["compliance"], applicable, ("permit", "prohibit"))
    # applicability: applicable vs not applicable
    app = [(g != "not_applicable", p != "not_applicable") for g, p in pairs]
    right = sum(g == p for g, p in app)
    assert health["applicability"]["correct"] == right
    assert health["applicability"]["accuracy"] == pytest.approx(right / len(app), abs=1e-6)
    # majority: the most frequent gold class, predicted for every case
    counts = Counter(gold for gold, _ in raw)
    assert counts == {"not_applicable": 107, "permit": 87, "prohibit": 20}
    top = max(THREE, key=lambda c: (counts[c], -THREE.index(c)))
    maj = scores["majority"]
    check_scores(maj["scores"]["main"], [(gold, top) for gold, _ in raw], THREE)
    assert top == "not_applicable" and top in maj["description"]


def test_baselines_on_synthetic(shared_data: Path) -> None:
    raw = raw_goldcoin(shared_data, "synthetic")
    pairs = [(gold, rule(info)) for gold, info in raw]
    syn = load_dataset("synthetic", shared_data)
    scores = baseline_scores(syn.cases, syn.protocol, bootstrap=0)
    check_scores(scores["health-rule"]["scores"]["main"], pairs, THREE)
    assert len(pairs) == 618
    counts = Counter(gold for gold, _ in raw)
    top = max(THREE, key=lambda c: (counts[c], -THREE.index(c)))
    assert (top, counts[top]) == ("not_applicable", 309)
    check_scores(scores["majority"]["scores"]["main"], [(g, top) for g, _ in raw], THREE)


def test_baselines_under_the_compliance_protocol(shared_data: Path) -> None:
    path = shared_data / "cases" / "goldcoin" / "test_real_cases_hipaa_compliance.csv"
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    gold = [CSV_GOLD[row["generate_HIPAA_type"]] for row in rows]
    types = [ast.literal_eval(row["generate_characteristics"])["Type"] for row in rows]
    counts = Counter(gold)
    assert set(counts) == {"permit", "prohibit"}
    top = max(("permit", "prohibit"), key=lambda c: counts[c])
    comp = load_dataset("goldcoin-real-compliance", shared_data)
    scores = baseline_scores(comp.cases, comp.protocol, bootstrap=0)
    maj = scores["majority"]["scores"]["main"]
    assert maj["task"] == "compliance"
    check_scores(maj, [(g, top) for g in gold], ("permit", "prohibit"))
    assert (top, counts[top], len(gold)) == ("permit", 87, 107)  # always permit
    # the health rule under this protocol: its not_applicable answers are wrong
    health = scores["health-rule"]["scores"]["main"]
    check_scores(
        health, [(g, rule(t)) for g, t in zip(gold, types, strict=True)], ("permit", "prohibit")
    )
