"""Hand-made catalogue entries and a stand-in reasoner, for tests of what is built on
the ci-reasoner (``checklist-qa``, the cross-check) without its catalogue or its NLP:
the packaged catalogue is tuned elsewhere, and these tests must not move with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from privacy_ci.ci import Flow, Verdict
from privacy_ci.reasoning import (
    Applicability,
    Condition,
    ConditionCheck,
    Cues,
    Effect,
    Evidence,
    NormCheck,
    NormEntry,
    Reasoning,
    Status,
)


def condition(cid: str, question: str) -> Condition:
    return Condition(id=cid, paragraph="164.506(c)", question=question, cues=Cues())


TREATMENT = NormEntry(
    id="164.506(c)(1)-own-tpo",
    paragraph="164.506(c)(1)",
    title="Disclosure for treatment",
    effect=Effect.PERMIT,
    conditions=(
        condition("for-treatment", "Is the chart disclosed for the individual's treatment?"),
        condition("to-provider", "Is the recipient a health care provider?"),
    ),
)
SALE = NormEntry(
    id="164.502(a)(5)(ii)-sale-of-phi",
    paragraph="164.502(a)(5)(ii)",
    title="No sale of PHI without authorization",
    effect=Effect.PROHIBIT,
    conditions=(condition("sold", "Did the covered entity sell the information?"),),
)
ALTERNATIVES = NormEntry(
    id="164.512(e)-judicial",
    paragraph="164.512(e)(1)",
    title="Judicial proceedings",
    effect=Effect.PERMIT,
    requires="any",
    conditions=(
        condition("court-order", "Was there a court order?"),
        condition("assurances", "Were satisfactory assurances given?"),
    ),
)
NO_CONDITIONS = NormEntry(
    id="164.506(c)(2)-treatment",
    paragraph="164.506(c)(2)",
    title="Disclosure for another provider's treatment",
    effect=Effect.PERMIT,
)
APPLICABLE = Applicability(True, ("the information (chart) is protected information",))
NOT_APPLICABLE = Applicability(False, ("the information is an employment record",))


def candidate(norm: NormEntry, score: int = 1, *statuses: Status) -> NormCheck:
    """A candidate norm; its conditions unstated unless `statuses` are given."""
    given = statuses or tuple(Status.UNSTATED for _ in norm.conditions)
    checks = tuple(
        ConditionCheck(c, s, _evidence(c, s)) for c, s in zip(norm.conditions, given, strict=True)
    )
    return NormCheck(norm, ("recipients: Physician",) if score else (), score, checks)


def _evidence(cond: Condition, status: Status) -> tuple[Evidence, ...]:
    if status is Status.UNSTATED:
        return ()
    states = "met" if status is Status.MET else "not_met"
    quote = f"quote for {cond.id}"
    return (Evidence(states, cond.id, quote, 0, len(quote), quote),)


def reasoning(
    verdict: Verdict | None,
    candidates: Sequence[NormCheck] = (),
    deciding: NormCheck | None = None,
    applicability: Applicability = APPLICABLE,
    rule: str = "the stub's rule",
) -> Reasoning:
    return Reasoning(verdict, rule, deciding, applicability, tuple(candidates))


class StubReasoner:
    """Stands in for `CIReasoner`: a fixed reasoning, or one computed from the text."""

    def __init__(self, answer: Reasoning | Callable[[str], Reasoning]) -> None:
        self.answer = answer
        self.seen: list[tuple[str, Flow | None]] = []
        # what `CrossChecker.identity` reads
        self.catalogue: Any = SimpleNamespace(regulation="hipaa", model_dump_json=lambda: "{}")
        self.kb: Any = SimpleNamespace(tree=SimpleNamespace(content_hash=lambda: "kb-hash"))

    def judge(self, text: str, flow: Flow | None = None) -> Reasoning:
        self.seen.append((text, flow))
        return self.answer(text) if callable(self.answer) else self.answer
