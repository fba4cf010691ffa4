"""`FactJudge`: facts, then law. The model-free judge behind the ``ci-reasoner`` method.

For one case it reads the facts of the disclosure (`FactReader`: the CI fields, then
the narrative; facts the user gives are taken as they are and win over anything
read) and applies the regulation's law book to them (`apply_law`). The answer is a
`FactJudgment`: every fact with where it came from, and the law's decision: the
verdict, the deciding rule, the facts it used, the presumptions it rests on and the
questions that would settle it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from privacy_ci.ci import Flow, Verdict
from privacy_ci.reasoning._facts import Facts, load_fact_schema
from privacy_ci.reasoning._law import LawBook, LawDecision, apply_law, load_law
from privacy_ci.reasoning._reading import FactReader

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

__all__ = ["FactJudge", "FactJudgment"]


@dataclass(frozen=True)
class FactJudgment:
    """The facts of one case and the law's decision on them."""

    facts: Facts
    decision: LawDecision
    law: str

    @property
    def verdict(self) -> Verdict:
        return self.decision.verdict

    @property
    def determined(self) -> bool:
        return self.decision.determined

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "determined": self.determined,
            "law": self.law,
            "facts": self.facts.as_dict(),
            "decision": self.decision.as_dict(),
        }

    def explanation(self) -> str:
        """The decision (verdict, rule, facts used, what would change it), then every
        fact read that it did not use."""
        lines = [self.decision.explanation()]
        others = [k for k in self.facts if k not in self.decision.used]
        if others:
            lines.append("other facts read:")
            for name in others:
                fact = self.facts[name]
                quote = f': "{fact.quote}"' if fact.quote else ""
                lines.append(f"  {name} = {fact.value} ({fact.source.value}{quote})")
        return "\n".join(lines)


class FactJudge:
    """Facts, then law (see the module docstring).

    Args:
        regulation: whose facts and law (HIPAA has both).
        kb: a knowledge base whose role graph the reader uses for senders' roles.
        reader: the fact reader (default: the offline `FactReader`).
    """

    def __init__(
        self,
        regulation: str = "hipaa",
        *,
        kb: KnowledgeBase | None = None,
        reader: FactReader | None = None,
    ) -> None:
        self.regulation = regulation
        self.book: LawBook = load_law(regulation)
        self.schema = load_fact_schema(regulation)
        self.reader = reader or FactReader(
            regulation, role_graph=None if kb is None else kb.role_graph
        )
        self._lock = threading.Lock()  # the spaCy pipeline is not thread-safe

    def given(self, facts: Facts | Mapping[str, Any] | None) -> Facts:
        """User-given facts as `Facts` (a mapping is validated like a facts file)."""
        if facts is None:
            return Facts(self.schema)
        if isinstance(facts, Facts):
            return facts
        return Facts.from_mapping(self.schema, facts)

    def read(self, text: str | None, flow: Flow | None = None) -> Facts:
        with self._lock:
            return self.reader.read(text, flow)

    def judge(
        self,
        text: str | None,
        flow: Flow | None = None,
        facts: Facts | Mapping[str, Any] | None = None,
    ) -> FactJudgment:
        """Read the case's facts (given ones win) and decide them.

        Args:
            text: the narrative (may be None when every fact is given).
            flow: its CI fields.
            facts: facts the user states (``judge --facts``); read facts fill the rest.

        Raises:
            FactError: a given fact or value is unknown.
        """
        given = self.given(facts)
        read = self.read(text, flow) if (text or flow is not None) else Facts(self.schema)
        merged = read.with_facts(dict(given))
        return FactJudgment(merged, apply_law(self.book, merged), self.book.version_id)

    def decide(self, facts: Facts | Mapping[str, Any]) -> LawDecision:
        """The law on facts alone (nothing read)."""
        return apply_law(self.book, self.given(facts))
