"""The cross-check: the model-free ci-reasoner (facts, then law) beside a model's verdict.

`cross_check` compares a model's verdict with the `FactJudgment` of the same event
(`FactJudge.judge`: the facts read from its CI fields and narrative, the event's given
facts winning, and the law's decision on them) and flags a verdict the law does not
support:

* ``permit-unsupported``: the model permits, and the law, on the facts read,
  prohibits. The flag names the deciding rule (a prohibition, or the default rule:
  no permission applies), the facts it used (each with its source and quote;
  presumed ones marked ``presumed``), the near misses (permissions that would apply
  but for one fact) and, when the verdict rests on presumptions, the questions whose
  answers decide it.
* ``prohibit-despite-permission``: the model prohibits, and the law permits (or
  requires the disclosure). The flag says whether that verdict is determined (it
  holds whatever the unknown facts are) or rests on presumptions, and which.

A Not applicable on either side, or no verdict from the model, is never flagged.
``agree`` is whether the two verdicts are the same (the law's verdict on presumptions
counts; ``reasoner_determined`` says which it is).

`CrossChecker` runs the judge (the one the ``ci-reasoner`` step keeps per regulation
and knowledge base) and says what it is for a run's identity.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from privacy_ci.ci import Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._pipeline import PipelineContext
from privacy_ci.judging._reason import fact_judge
from privacy_ci.judging._types import Event

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase
    from privacy_ci.reasoning import FactJudge, FactJudgment, FactValue, LawDecision

__all__ = [
    "CROSS_CHECK_REASONER",
    "PERMIT_UNSUPPORTED",
    "PROHIBIT_DESPITE_PERMISSION",
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
        reasoner_verdict: the law's verdict on the facts read (None: the judge failed).
        reasoner_rule: the id of the rule that decided ("" when it failed).
        agree: the two verdicts are the same.
        determined: the law's verdict holds whatever the unknown facts are (False: it
            rests on the fact schema's presumptions).
        flag: ``permit-unsupported``, ``prohibit-despite-permission`` or None.
        reason: one sentence saying why it is flagged (None when not).
        rule: the deciding rule (id, paragraph, title, effect), when flagged.
        facts: the facts that rule used, each with its source and quote, when flagged.
        near_misses: permissions that would apply but for one fact, when flagged.
        questions: the unknown facts the verdict hinges on, each with the verdict per
            answer, when flagged on presumptions.
        error: the judge's failure, if it failed.
    """

    model_verdict: Verdict | None
    reasoner_verdict: Verdict | None
    reasoner_rule: str
    agree: bool
    determined: bool = False
    flag: str | None = None
    reason: str | None = None
    rule: dict[str, Any] | None = None
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)
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
            "reasoner_determined": self.determined,
            "agree": self.agree,
            "flagged": self.flagged,
            "flag": None
            if self.flag is None
            else {
                "kind": self.flag,
                "reason": self.reason,
                "determined": self.determined,
                "rule": self.rule,
                "facts": self.facts,
                "near_misses": self.near_misses,
                "questions": self.questions,
            },
            "error": self.error,
        }


def _fact_text(name: str, fact: FactValue) -> str:
    quote = f' "{fact.quote}"' if fact.quote else ""
    return f"{name} = {fact.value} ({fact.source.value}{quote})"


def _grounds(decision: LawDecision) -> str:
    """The rule, the facts it used, and how firm the verdict is, in words."""
    rule = decision.rule
    used = "; ".join(_fact_text(k, v) for k, v in decision.used.items())
    text = f"{rule.paragraph} {rule.title}" + (f" ({used})" if used else "")
    if decision.determined:
        return text + "; determined: no unknown fact changes it"
    presumed = ", ".join(f"{k} presumed {v.value}" for k, v in decision.presumed.items())
    text += f"; on presumptions ({presumed or 'unknown facts'})"
    if decision.questions:
        text += ": " + "; ".join(f"{q.fact}: {q.text}" for q in decision.questions)
    return text


def _near_misses(decision: LawDecision) -> str:
    parts = []
    for miss in decision.near_misses[:3]:
        fails = "; ".join(
            f"{fact} is {value or 'unknown'}, needs {' or '.join(needs)}"
            for fact, value, needs in miss.failing
        )
        parts.append(f"{miss.rule.paragraph} ({miss.rule.title}): {fails}")
    return ("; nearly permitted by " + " | ".join(parts)) if parts else ""


def cross_check(model_verdict: Verdict | None, judgment: FactJudgment) -> CrossCheck:
    """Compare a model's verdict with the ci-reasoner's judgment of the same event.

    Args:
        model_verdict: the model's verdict (None: it gave none).
        judgment: `FactJudge.judge` of the same narrative, flow and given facts.

    Returns:
        The `CrossCheck` (flag rules in the module docstring).
    """
    decision = judgment.decision
    verdict = decision.verdict
    agree = model_verdict is not None and model_verdict is verdict
    base = CrossCheck(model_verdict, verdict, decision.rule.id, agree, decision.determined)
    if model_verdict is Verdict.PERMIT and verdict is Verdict.PROHIBIT:
        kind = PERMIT_UNSUPPORTED
        reason = (
            "the model permits, but on the facts read the law prohibits: "
            + _grounds(decision)
            + _near_misses(decision)
        )
    elif model_verdict is Verdict.PROHIBIT and verdict is Verdict.PERMIT:
        kind = PROHIBIT_DESPITE_PERMISSION
        does = "requires the disclosure" if decision.required else "permits"
        reason = f"the model prohibits, but on the facts read the law {does}: " + _grounds(decision)
    else:
        return base
    return CrossCheck(
        model_verdict,
        verdict,
        decision.rule.id,
        agree,
        decision.determined,
        kind,
        reason,
        decision.rule.as_dict(),
        {k: v.as_dict() for k, v in decision.used.items()},
        [m.as_dict() for m in decision.near_misses],
        [q.as_dict() for q in decision.questions],
    )


def _law_files_sha256(regulation: str) -> str:
    """sha256 of the regulation's fact schema, law book and reading guide (the data the
    judge decides and reads with)."""
    root = resources.files("privacy_ci.reasoning")
    digest = hashlib.sha256()
    for folder in ("facts", "law", "reading"):
        path = root / folder / f"{regulation}.yaml"
        if path.is_file():
            digest.update(f"{folder}/{regulation}.yaml\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


class CrossChecker:
    """Runs the ci-reasoner's judge beside a model and cross-checks its verdicts.

    Args:
        kb: the knowledge base whose role graph the reader uses (None: `regulation`'s,
            loaded on first use when its data is installed).
        regulation: the regulation whose facts and law are applied.
        reasoner: a judge to use (e.g. with another reader); default the one the
            ``ci-reasoner`` step keeps for the regulation and knowledge base.
    """

    def __init__(
        self,
        kb: KnowledgeBase | None = None,
        regulation: str = "hipaa",
        *,
        reasoner: FactJudge | None = None,
    ) -> None:
        from privacy_ci.judging._config import JudgeConfig

        regulation = kb.regulation if kb is not None else regulation
        self._ctx = PipelineContext(None, config=JudgeConfig(regulation=regulation), kb=kb)
        self._given = reasoner

    @property
    def reasoner(self) -> FactJudge:
        """The judge (built on first use: the law book, the fact schema, the reader).

        Raises:
            PrivacyCIError: the regulation has no fact model or law book.
        """
        return self._given if self._given is not None else fact_judge(self._ctx)

    def identity(self) -> dict[str, Any]:
        """What the cross-check is, for a run's identity: the reasoner, its law book and
        fact schema versions, the sha256 of their files, and the knowledge base's
        content hash (None when the judge reads without one)."""
        judge = self.reasoner
        kb = self._ctx.kb if self._given is None else None
        return {
            "reasoner": CROSS_CHECK_REASONER,
            "regulation": judge.regulation,
            "law": judge.book.version_id,
            "facts": judge.schema.version_id,
            "files_sha256": _law_files_sha256(judge.regulation),
            "knowledge_base": None if kb is None else kb.tree.content_hash(),
        }

    def check_sync(self, event: Event, model_verdict: Verdict | None) -> CrossCheck:
        """Judge `event` (its narrative, CI fields and given facts) and cross-check
        `model_verdict`.

        A failure of the judge (a `PrivacyCIError`) is returned as the check's
        ``error``, never raised: the model's judgment stands on its own.
        """
        try:
            # the judge the ci-reasoner step takes for this event: the same verdict
            judge = self._given if self._given is not None else fact_judge(self._ctx, event)
            judgment = judge.judge(event.text, event.flow, event.facts or None)
        except PrivacyCIError as exc:
            return CrossCheck(model_verdict, None, "", False, error=f"the reasoner failed: {exc}")
        return cross_check(model_verdict, judgment)

    async def check(self, event: Event, model_verdict: Verdict | None) -> CrossCheck:
        """`check_sync` in a worker thread (the reader's NLP is CPU-bound)."""
        return await asyncio.to_thread(self.check_sync, event, model_verdict)
