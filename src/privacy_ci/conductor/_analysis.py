"""Whole-corpus analysis: every (agent, document) flow classified and decided,
the comparison with Table VI, and the inert-field control (section VI-D).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from privacy_ci.ci import Flow, Party, TransmissionPrinciple
from privacy_ci.conductor._corpus import Corpus, load_corpus, riverside_dir
from privacy_ci.conductor._flows import TABLE_VI, FlowClass, classify_flow
from privacy_ci.conductor._gate import Decision, Gate
from privacy_ci.conductor._labels import Label, SensitivityTier
from privacy_ci.conductor._policy import Requester

STORE = Party("document store", "Store")


def describe_flow(requester: Requester, label: Label, corpus: Corpus) -> Flow:
    """The five CI parameters of a flow (Table III): the Store sends, the requester
    receives, the label gives subject, information type and transmission principle.
    """
    recipient_name = corpus.directory.person_name(requester.id) or requester.id
    if label.subject is None:
        subject = Party("organization-level (no individual subject)", label.subject_type.value)
    else:
        subject = Party(
            corpus.directory.person_name(label.subject) or label.subject, label.subject_type.value
        )
    return Flow(
        sender=STORE,
        recipient=Party(recipient_name, requester.active_role or "(no active role)"),
        subject=subject,
        information_type=f"{label.sensitivity_tier.value} ({label.document_type})",
        principle=TransmissionPrinciple(purpose=label.governing_principle),
        attributes=tuple(label.pii_attributes) + tuple(label.implied_attributes),
    )


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """One (agent, document) flow with its class and the gate's decision."""

    agent_id: str
    doc_id: str
    tier: SensitivityTier
    flow_class: FlowClass
    decision: Decision

    @property
    def agrees(self) -> bool:
        """Whether the gate's decision is the one the flow's class expects."""
        return self.decision.permitted == self.flow_class.expected_permit


@dataclass
class FlowTable:
    """All flows of a corpus, counted per class and per tier."""

    records: list[FlowRecord]
    policy_version: str
    by_class: Counter[FlowClass] = field(default_factory=Counter)
    by_tier: dict[str, Counter[FlowClass]] = field(default_factory=dict)
    permits: int = 0
    denies: int = 0

    @classmethod
    def build(cls, records: list[FlowRecord], policy_version: str) -> FlowTable:
        table = cls(records, policy_version)
        for rec in records:
            table.by_class[rec.flow_class] += 1
            table.by_tier.setdefault(rec.tier.value, Counter())[rec.flow_class] += 1
            if rec.decision.permitted:
                table.permits += 1
            else:
                table.denies += 1
        return table

    @property
    def disagreements(self) -> list[FlowRecord]:
        return [r for r in self.records if not r.agrees]

    def matches_table_vi(self) -> bool:
        """Counts equal Table VI exactly and the gate agrees on every flow."""
        return (
            all(self.by_class.get(k, 0) == n for k, n in TABLE_VI.items())
            and self.by_class.get(FlowClass.INVALID, 0) == 0
            and not self.disagreements
        )

    def permits_by(self, key: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for rec in self.records:
            if rec.decision.permitted:
                out[rec.flow_class.value if key == "class" else rec.tier.value] += 1
        return out

    def as_dict(self, not_table_vi: str | None = None) -> dict[str, Any]:
        """The table as JSON.

        Args:
            not_table_vi: why Table VI does not describe this corpus (`table_vi_mismatch`);
                the comparison is then left out: no ``table_vi`` count per class,
                ``matches_table_vi`` null and the reason in ``table_vi_not_compared``.
        """
        classes = [c for c in FlowClass if c is not FlowClass.INVALID or self.by_class.get(c)]
        permits_class = self.permits_by("class")
        disagreements = self.disagreements
        compared = not_table_vi is None
        out: dict[str, Any] = {
            "flows": len(self.records),
            "policy_version": self.policy_version,
            "permit": self.permits,
            "deny": self.denies,
            "classes": {
                c.value: {
                    "condition": c.condition,
                    "n": self.by_class.get(c, 0),
                    **({"table_vi": TABLE_VI.get(c)} if compared else {}),
                    "expected": "permit" if c.expected_permit else "deny",
                    "gate_permit": permits_class.get(c.value, 0),
                    "gate_deny": self.by_class.get(c, 0) - permits_class.get(c.value, 0),
                }
                for c in classes
            },
            "tiers": {
                tier: {c.value: n for c, n in sorted(counts.items())}
                for tier, counts in self.by_tier.items()
            },
            "agreement": {
                "agree": len(self.records) - len(disagreements),
                "disagree": len(disagreements),
                "examples": [
                    {
                        "agent": r.agent_id,
                        "doc": r.doc_id,
                        "class": r.flow_class.value,
                        "decision": r.decision.effect.value,
                        "rule": r.decision.rule.key,
                    }
                    for r in disagreements[:10]
                ],
            },
            "matches_table_vi": self.matches_table_vi() if compared else None,
        }
        if not compared:
            out["table_vi_not_compared"] = not_table_vi
        return out


@cache
def _riverside() -> Corpus:
    return load_corpus(riverside_dir())


def table_vi_mismatch(corpus: Corpus) -> str | None:
    """Why Table VI does not describe `corpus`'s flows, or None when it does.

    Table VI counts the flows of the packaged Riverside corpus: its policy, agents and
    assignments over its documents. A corpus is compared with it when those match by
    content (wherever the folder is); the labels may differ (``conductor flows
    --labels`` measures a label file against Table VI).
    """
    riverside = _riverside()
    differs = []
    if corpus.policy.version != riverside.policy.version:
        differs.append("its policy")
    if corpus.directory != riverside.directory:
        differs.append("its agents")
    if corpus.assignments != riverside.assignments:
        differs.append("its assignments")
    if set(corpus.labels.ids) != set(riverside.labels.ids):
        differs.append("its documents")
    if not differs:
        return None
    return (
        "Table VI counts the flows of the packaged Riverside corpus; this corpus differs in "
        + ", ".join(differs)
    )


def enumerate_flows(
    corpus: Corpus, labels: Iterable[Label] | None = None, gate: Gate | None = None
) -> FlowTable:
    """Classify and decide every (agent, document) pair of a corpus.

    Args:
        corpus: agents, assignments and policy (and labels, unless given).
        labels: labels to adjudicate instead of the corpus's own (e.g. model-written).
        gate: the gate to use; one is built from the corpus policy when omitted.

    Returns:
        The `FlowTable` over all agents x documents, agents acting in their own role.
    """
    gate = gate or Gate(corpus.policy)
    label_list = list(corpus.labels if labels is None else labels)
    records = []
    for requester in corpus.requesters():
        for label in label_list:
            records.append(
                FlowRecord(
                    requester.id,
                    label.doc_id,
                    label.sensitivity_tier,
                    classify_flow(requester, label, corpus.policy),
                    gate.decide(requester, label),
                )
            )
    return FlowTable.build(records, gate.version)


@dataclass(frozen=True)
class InertFieldControl:
    """Result of flipping one field on every label and re-adjudicating."""

    field: str
    flows: int
    changed: int
    permits_before: int
    permits_after: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "flows": self.flows,
            "decisions_changed": self.changed,
            "permits_before": self.permits_before,
            "permits_after": self.permits_after,
        }


def inert_field_control(corpus: Corpus, field_name: str = "extra_sensitive") -> InertFieldControl:
    """Invert a boolean label field on all documents and count changed decisions."""
    flipped = [
        label.model_copy(update={field_name: not getattr(label, field_name)})
        for label in corpus.labels
    ]
    before = enumerate_flows(corpus)
    after = enumerate_flows(corpus, labels=flipped)
    changed = sum(
        a.decision.effect != b.decision.effect or a.decision.rule != b.decision.rule
        for a, b in zip(before.records, after.records, strict=True)
    )
    return InertFieldControl(
        field_name, len(before.records), changed, before.permits, after.permits
    )
