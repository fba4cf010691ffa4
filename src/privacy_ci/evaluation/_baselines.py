"""Model-free baselines printed beside every model: majority class, a health-information
rule, and (for cases with gold facts or pair ids) always Permit.

Both are computed from the cases they are compared on (never hard-coded), so a
run on a sample is compared with baselines on the same sample.

* ``majority``: predicts, for every case, the most frequent gold class of the
  scored cases (ties broken by the protocol's class order). On ``real`` that is
  ``not_applicable`` (107 of 214).
* ``health-rule``: "applicable exactly when the case's information type is health
  information, then always Permit". A case is predicted ``permit`` when its
  ``information_type`` field matches `HEALTH_INFORMATION` and ``not_applicable``
  otherwise (also when the field is missing). It never predicts ``prohibit``, so
  its prohibit recall is 0 by construction: it measures how much of the accuracy
  a model could earn from applicability alone.
* ``always-permit``: predicts ``permit`` for every case, the answer of a judge that
  reads nothing. The facts-then-law judge's targets are stated against it; runs add
  it on cases that carry gold facts or pair ids (`compute_baselines` with
  ``always_permit=True``), so that the recorded metrics of the GoldCoin runs keep
  their two baselines.

What "health information" matches (`is_health_information`): a case-insensitive,
whole-word match of any of `HEALTH_TERMS` in the information type. The terms
follow HIPAA's definition of health information (45 CFR 160.103: information
that "relates to the past, present, or future physical or mental health or
condition of an individual; the provision of health care to an individual; or
the payment for the provision of health care") as it is written in case files:
health and medical records, mental-health and psychiatric or psychotherapy
records, PHI, HIV status, diagnoses, treatment, prescriptions and medication,
patients, hospitals, clinical and dental records, surgery, and blood tests
(``blood-alcohol test results`` are hospital records in the court cases). The
field only is read, never the narrative or the label. Four term lists were tried
on ``real`` while writing this rule (``health|medical`` substring: 0.827;
``health|medical|PHI`` words: 0.827; this list without medication/hospital/
clinical/surgery/blood: 0.846; this list: 0.855); the list is fixed here and
its score is asserted by the tests.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from privacy_ci.cases import VERDICT_ORDER, Case, Protocol
from privacy_ci.ci import Verdict
from privacy_ci.evaluation._metrics import Pair, RunScores, score_run

__all__ = [
    "HEALTH_INFORMATION",
    "HEALTH_TERMS",
    "Baseline",
    "always_permit_baseline",
    "baseline_scores",
    "compute_baselines",
    "health_rule_baseline",
    "is_health_information",
    "majority_baseline",
]

HEALTH_TERMS: tuple[str, ...] = (
    "health",
    "medical",
    "medicine",
    "medication",
    "mental",
    r"psychiatr\w*",
    r"psychotherap\w*",
    "phi",
    "hiv",
    r"diagnos\w*",
    "treatment",
    r"prescription\w*",
    "patient",
    r"hospital\w*",
    "clinical",
    "dental",
    r"surg\w*",
    "blood",
)
"""Whole-word, case-insensitive regular expressions; see the module notes."""

HEALTH_INFORMATION = re.compile(r"\b(?:" + "|".join(HEALTH_TERMS) + r")\b", re.IGNORECASE)
"""Matches an information type that is health information."""


def is_health_information(information_type: str | None) -> bool:
    """Whether a case's information type names health information.

    Args:
        information_type: the case's ``information_type`` field (None when missing).

    Returns:
        True when any of `HEALTH_TERMS` occurs as a whole word, case-insensitively.
    """
    return bool(information_type) and HEALTH_INFORMATION.search(information_type or "") is not None


@dataclass(frozen=True)
class Baseline:
    """A model-free predictor's verdicts on some cases.

    Args:
        name: ``majority`` or ``health-rule``.
        description: one line saying what it predicts.
        predictions: case id -> predicted verdict.
    """

    name: str
    description: str
    predictions: dict[str, Verdict]

    def pairs(self, cases: Sequence[Case]) -> list[Pair]:
        """(gold, predicted) verdict values for `cases`, in order."""
        return [(c.label.value, self.predictions[c.id].value) for c in cases]


def majority_baseline(cases: Sequence[Case], protocol: Protocol) -> Baseline:
    """Always the most frequent gold class of `cases` under the protocol's task.

    Ties go to the class listed first in ``protocol.classes``. Under the
    applicability task the predicted verdict is the most frequent gold verdict of
    the chosen class (so that it scores as that class).

    Args:
        cases: the scored cases.
        protocol: their protocol (task and classes).

    Returns:
        The baseline.
    """
    targets = Counter(protocol.target(c.label) for c in cases)
    classes = protocol.classes
    chosen = max(classes, key=lambda k: (targets[k], -classes.index(k))) if cases else classes[0]
    verdicts = Counter(c.label for c in cases if protocol.target(c.label) == chosen)
    candidates = [v for v in VERDICT_ORDER if protocol.target(v) == chosen]
    verdict = max(candidates, key=lambda v: (verdicts[v], -VERDICT_ORDER.index(v)))
    share = targets[chosen] / len(cases) if cases else 0.0
    return Baseline(
        "majority",
        f"always {chosen!r}, the most frequent gold class ({targets[chosen]}/{len(cases)}, "
        f"{share:.1%})",
        {c.id: verdict for c in cases},
    )


def health_rule_baseline(cases: Sequence[Case]) -> Baseline:
    """Permit when the information type is health information, else not applicable.

    Args:
        cases: the scored cases.

    Returns:
        The baseline (it never predicts prohibit).
    """
    return Baseline(
        "health-rule",
        "applicable exactly when the information type is health information "
        "(privacy_ci.evaluation.HEALTH_TERMS), then always permit",
        {
            c.id: Verdict.PERMIT
            if is_health_information(c.flow.information_type)
            else Verdict.NOT_APPLICABLE
            for c in cases
        },
    )


def always_permit_baseline(cases: Sequence[Case]) -> Baseline:
    """Permit for every case.

    Args:
        cases: the scored cases.

    Returns:
        The baseline.
    """
    return Baseline(
        "always-permit",
        "always permit (a judge that reads nothing)",
        {c.id: Verdict.PERMIT for c in cases},
    )


def compute_baselines(
    cases: Sequence[Case], protocol: Protocol, *, always_permit: bool = False
) -> list[Baseline]:
    """The baselines on `cases`.

    Args:
        cases: the scored cases.
        protocol: their protocol.
        always_permit: add the always-permit baseline.

    Returns:
        ``[majority, health-rule]``, then ``always-permit`` when asked for.
    """
    out = [majority_baseline(cases, protocol), health_rule_baseline(cases)]
    if always_permit:
        out.append(always_permit_baseline(cases))
    return out


def baseline_scores(
    cases: Sequence[Case],
    protocol: Protocol,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    always_permit: bool = False,
) -> dict[str, dict[str, Any]]:
    """Score the baselines exactly as a run on `cases` is scored.

    Args:
        cases: the scored cases.
        protocol: their protocol (its task decides the scores).
        bootstrap / seed: macro-F1 bootstrap settings (as for runs).
        always_permit: add the always-permit baseline.

    Returns:
        name -> ``{"description": ..., "scores": RunScores.as_dict()}``.
    """
    out: dict[str, dict[str, Any]] = {}
    for baseline in compute_baselines(cases, protocol, always_permit=always_permit):
        scores: RunScores = score_run(
            baseline.pairs(cases), protocol.task.value, bootstrap=bootstrap, seed=seed
        )
        out[baseline.name] = {"description": baseline.description, "scores": scores.as_dict()}
    return out
