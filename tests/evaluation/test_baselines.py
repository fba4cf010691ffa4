"""Model-free baselines: the health-information rule and the majority class, on the real data."""

from __future__ import annotations

from pathlib import Path

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
            if is_health_information(case.information_type)
            else Verdict.NOT_APPLICABLE
        )
        assert rule.predictions[case.id] is expected


def test_baselines_on_real(shared_data: Path) -> None:
    real = load_dataset("real", shared_data)
    scores = baseline_scores(real.cases, real.protocol, bootstrap=0)
    rule = scores["health-rule"]["scores"]
    main = rule["main"]
    # measured: 183 of 214 right (the brief's "about 0.855"); prohibit never predicted
    assert (main["correct"], main["n"]) == (183, 214)
    assert main["accuracy"] == pytest.approx(0.855140, abs=1e-6)
    assert main["per_class"]["prohibit"]["recall"] == 0.0
    assert main["per_class"]["prohibit"]["predicted"] == 0
    assert main["per_class"]["permit"]["f1"] == pytest.approx(0.8324, abs=1e-4)
    assert main["per_class"]["not_applicable"]["f1"] == pytest.approx(0.9507, abs=1e-4)
    assert main["macro_f1"] == pytest.approx(0.5944, abs=1e-4)
    assert rule["compliance"]["macro_f1"] == pytest.approx(0.4185, abs=1e-4)
    assert rule["applicability"]["accuracy"] == pytest.approx(203 / 214)
    maj = scores["majority"]["scores"]["main"]
    assert maj["accuracy"] == 0.5  # 107 not applicable of 214
    assert maj["per_class"]["not_applicable"]["recall"] == 1.0
    assert "not_applicable" in scores["majority"]["description"]


def test_baselines_on_synthetic(shared_data: Path) -> None:
    syn = load_dataset("synthetic", shared_data)
    scores = baseline_scores(syn.cases, syn.protocol, bootstrap=0)
    main = scores["health-rule"]["scores"]["main"]
    assert (main["correct"], main["n"]) == (527, 618)
    assert main["per_class"]["prohibit"]["recall"] == 0.0
    assert main["macro_f1"] == pytest.approx(0.5843, abs=1e-4)
    assert scores["majority"]["scores"]["main"]["accuracy"] == 0.5  # 309 of 618


def test_baselines_under_the_compliance_protocol(shared_data: Path) -> None:
    comp = load_dataset("goldcoin-real-compliance", shared_data)
    scores = baseline_scores(comp.cases, comp.protocol, bootstrap=0)
    maj = scores["majority"]["scores"]["main"]
    assert maj["task"] == "compliance"
    assert (maj["correct"], maj["n"]) == (87, 107)  # always permit
    assert maj["macro_f1"] == pytest.approx(0.4485, abs=1e-4)
