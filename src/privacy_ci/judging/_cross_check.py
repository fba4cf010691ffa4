"""The cross-check: the model-free ci-reasoner run beside a model's judgment.

`cross_check` compares a model's verdict with the reasoner's `Reasoning` of the
same event and flags what the reasoner's checklist does not support:

* a model ``permit`` whose deciding conditions the reasoner finds unstated or
  contradicted. The deciding norm is the reasoner's deciding norm when it
  permits, else the first candidate permitting norm that holds, else the
  best-matching candidate permitting norm. It is flagged when that norm does not
  hold (for alternatives, ``requires: any``: when none is met), naming its
  unstated and contradicted conditions. No permitting candidate (or Not
  applicable): nothing to check, no flag (the disagreement still counts).
* a model ``prohibit`` where the reasoner finds every condition of an applicable
  (candidate) permitting norm met (for alternatives: one met). A permitting norm
  without conditions counts when its pattern matched the flow (its score is above
  0): it asks nothing more (e.g. a disclosure to a provider for treatment).

Other verdicts (Not applicable, none) are never flagged. ``agree`` is whether the
two verdicts are the same (an undetermined reasoner agrees with nothing).

`CrossChecker` runs the reasoner (the one the ``ci-reasoner`` step keeps per
knowledge base) and says what it is for a run's identity.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from privacy_ci.ci import Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._pipeline import PipelineContext
from privacy_ci.judging._reason import _reasoner
from privacy_ci.judging._types import Event

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase
    from privacy_ci.reasoning import CIReasoner, NormCheck, Reasoning

__all__ = [
    "CROSS_CHECK_REASONER",
    "CrossCheck",
    "CrossChecker",
    "cross_check",
]

CROSS_CHECK_REASONER = "ci-reasoner"
"""What the cross-check runs (named in records, metrics and the run's identity)."""

PERMIT_UNSUPPORTED = "permit-unsupported"
PROHIBIT_DESPITE_PERMISSION = "prohibit-despite-permission"


@dataclass(frozen=True)
class CrossCheck:
    """One event's cross-check.

    Args:
        model_verdict: the model's verdict (None: no verdict).
        reasoner_verdict: the reasoner's (None: undetermined, or it failed).
        reasoner_rule: the clause of the reasoner's rule that decided.
        agree: the two verdicts are the same.
        flag: ``permit-unsupported``, ``prohibit-despite-permission`` or None.
        reason: one sentence saying why it is flagged (None when not).
        norm: the norm the flag rests on (id, paragraph, title, effect, requires).
        conditions: that norm's conditions (id, question, status, evidence).
        error: the reasoner's failure, if it failed.
    """

    model_verdict: Verdict | None
    reasoner_verdict: Verdict | None
    reasoner_rule: str
    agree: bool
    flag: str | None = None
    reason: str | None = None
    norm: dict[str, Any] | None = None
    conditions: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def flagged(self) -> bool:
        return self.flag is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "reasoner": CROSS_CHECK_REASONER,
            "model_verdict": None if self.model_verdict is None else self.model_verdict.value,
            "reasoner_verdict": None
            if self.reasoner_verdict is None
            else self.reasoner_verdict.value,
            "reasoner_rule": self.reasoner_rule,
            "agree": self.agree,
            "flagged": self.flagged,
            "flag": None
            if self.flag is None
            else {
                "kind": self.flag,
                "reason": self.reason,
                "norm": self.norm,
                "conditions": self.conditions,
            },
            "error": self.error,
        }


def _norm(check: NormCheck) -> dict[str, Any]:
    n = check.norm
    return {
        "id": n.id,
        "paragraph": n.paragraph,
        "title": n.title,
        "effect": n.effect.value,
        "requires": n.requires,
    }


def _permitting(reasoning: Reasoning) -> list[NormCheck]:
    from privacy_ci.reasoning import Effect

    return [c for c in reasoning.candidates if c.norm.effect is Effect.PERMIT]


def _deciding_permission(reasoning: Reasoning) -> NormCheck | None:
    """The permitting norm a permit rests on (see the module docstring)."""
    from privacy_ci.reasoning import Effect

    deciding = reasoning.deciding
    if deciding is not None and deciding.norm.effect is Effect.PERMIT:
        return deciding
    permitting = _permitting(reasoning)
    holding = [c for c in permitting if c.holds]
    ranked = holding or permitting
    return ranked[0] if ranked else None


def cross_check(model_verdict: Verdict | None, reasoning: Reasoning) -> CrossCheck:
    """Compare a model's verdict with the reasoner's reasoning of the same event.

    Args:
        model_verdict: the model's verdict (None: it gave none).
        reasoning: `CIReasoner.judge` of the same narrative and flow.

    Returns:
        The `CrossCheck` (flag rules in the module docstring).
    """
    from privacy_ci.reasoning import Status

    agree = model_verdict is not None and model_verdict is reasoning.verdict
    base = CrossCheck(model_verdict, reasoning.verdict, reasoning.rule, agree)
    if model_verdict is Verdict.PERMIT:
        norm = _deciding_permission(reasoning)
        if norm is None or norm.holds:
            return base
        weak = [c for c in norm.conditions if c.status is not Status.MET]
        said = ", ".join(f"{c.condition.id} ({c.status.value})" for c in weak)
        return CrossCheck(
            model_verdict,
            reasoning.verdict,
            reasoning.rule,
            agree,
            PERMIT_UNSUPPORTED,
            f"the model permits, but the conditions of {norm.norm.id} ({norm.norm.paragraph})"
            f" are not met in the narrative: {said}",
            _norm(norm),
            [c.as_dict() for c in norm.conditions],
        )
    if model_verdict is Verdict.PROHIBIT:
        met = [c for c in _permitting(reasoning) if c.holds and (c.conditions or c.score > 0)]
        if not met:
            return base
        norm = met[0]
        return CrossCheck(
            model_verdict,
            reasoning.verdict,
            reasoning.rule,
            agree,
            PROHIBIT_DESPITE_PERMISSION,
            f"the model prohibits, but the narrative meets the conditions of the permitting"
            f" norm {norm.norm.id} ({norm.norm.paragraph})"
            if norm.conditions
            else f"the model prohibits, but the permitting norm {norm.norm.id}"
            f" ({norm.norm.paragraph}) applies to the flow and requires no condition",
            _norm(norm),
            [c.as_dict() for c in norm.conditions],
        )
    return base


class CrossChecker:
    """Runs the reasoner beside a model and cross-checks its verdicts.

    Args:
        kb: the knowledge base (None: `regulation`'s, loaded on first use).
        regulation: the regulation whose catalogue is checked.
        reasoner: a reasoner to use (e.g. over another catalogue); default the one
            the ``ci-reasoner`` step keeps for the knowledge base.
    """

    def __init__(
        self,
        kb: KnowledgeBase | None = None,
        regulation: str = "hipaa",
        *,
        reasoner: CIReasoner | None = None,
    ) -> None:
        from privacy_ci.judging._config import JudgeConfig

        regulation = kb.regulation if kb is not None else regulation
        self._ctx = PipelineContext(None, config=JudgeConfig(regulation=regulation), kb=kb)
        self._given = reasoner

    @property
    def reasoner(self) -> CIReasoner:
        """The reasoner (built on first use: the NLP pipeline and the catalogue load).

        Raises:
            PrivacyCIError: the regulation has no catalogue, or the NLP model is missing.
        """
        return self._given if self._given is not None else _reasoner(self._ctx)

    def identity(self) -> dict[str, Any]:
        """What the cross-check is, for a run's identity: the reasoner, the sha256 of
        its catalogue's content and the knowledge base's content hash."""
        reasoner = self.reasoner
        content = reasoner.catalogue.model_dump_json().encode("utf-8")
        return {
            "reasoner": CROSS_CHECK_REASONER,
            "regulation": reasoner.catalogue.regulation,
            "catalogue_sha256": hashlib.sha256(content).hexdigest(),
            "knowledge_base": reasoner.kb.tree.content_hash(),
        }

    def check_sync(self, event: Event, model_verdict: Verdict | None) -> CrossCheck:
        """Run the reasoner on `event` and cross-check `model_verdict`.

        A reasoner failure (a `PrivacyCIError`) is returned as the check's
        ``error``, never raised: the model's judgment stands on its own.
        """
        try:
            reasoning = self.reasoner.judge(event.text, event.flow)
        except PrivacyCIError as exc:
            return CrossCheck(model_verdict, None, "", False, error=f"the reasoner failed: {exc}")
        return cross_check(model_verdict, reasoning)

    async def check(self, event: Event, model_verdict: Verdict | None) -> CrossCheck:
        """`check_sync` in a worker thread (the reasoner's NLP is CPU-bound)."""
        return await asyncio.to_thread(self.check_sync, event, model_verdict)
