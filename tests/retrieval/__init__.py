"""Tests of `privacy_ci.retrieval`, and a small hand-made knowledge base they share."""

from __future__ import annotations

from collections.abc import Mapping

from privacy_ci.knowledge import (
    Definition,
    Definitions,
    KnowledgeBase,
    Norm,
    NormType,
    Reference,
    ReferenceKind,
)
from privacy_ci.regulations import NodeKind, TreeBuilder

# leaf id -> own text; whitespace tokens are easy to count by hand (no punctuation on words)
TOY_LEAVES: dict[str, str] = {
    "1(a)": "a covered entity may disclose health information in response to an order of a court",
    "1(b)": "a covered entity may disclose health information to a law enforcement official "
    "for identifying a suspect",
    "2(a)": "a covered entity must obtain an authorization for any use of health information "
    "for marketing",
    "2(b)": "an authorization must be written in plain language",
    "3(a)": "a covered entity may disclose health information to an employer about a "
    "workplace injury",
    "3(b)": "the employer must not receive psychotherapy notes",
}
TOY_SECTIONS: dict[str, str] = {
    "1": "Disclosures for judicial and law enforcement purposes",
    "2": "Uses and disclosures that need an authorization",
    "3": "Disclosures to employers",
}


def toy_kb(leaves: Mapping[str, str] | None = None, regulation: str = "toy") -> KnowledgeBase:
    """A three-section knowledge base with norms, references and one definition.

    Args:
        leaves: leaf texts to use instead of `TOY_LEAVES` (same ids).
        regulation: the regulation name.

    Returns:
        The knowledge base.
    """
    texts = dict(TOY_LEAVES if leaves is None else leaves)
    b = TreeBuilder(regulation, "TOY")
    for sec, title in TOY_SECTIONS.items():
        b.add(sec, "TOY", f"§ {sec} {title}.", NodeKind.SECTION, title=title)
        for leaf, text in texts.items():
            if leaf.startswith(f"{sec}("):
                b.add(leaf, sec, text, NodeKind.PARAGRAPH)
    b.refer("1(a)", ["2"])
    tree = b.build()

    def norm(node_id: str, **fields: object) -> Norm:
        return Norm(
            id=node_id,
            regulation=regulation,
            norm_type=NormType.POSITIVE,
            text=texts[node_id],
            **fields,  # type: ignore[arg-type]
        )

    norms = [
        norm(
            "1(a)",
            sender_role="health care provider",
            recipient_role="court",
            subject_role="patient",
            information_type="health information",
            purpose="judicial proceedings",
            references=(Reference("2(a)", ReferenceKind.SUPPORT),),
        ),
        norm(
            "1(b)",
            sender_role="health care provider",
            recipient_role="law enforcement",
            subject_role="suspect",
            information_type="health information",
            purpose="identifying a suspect",
        ),
        norm(
            "2(a)",
            sender_role="health care provider",
            recipient_role="marketing company",
            subject_role="patient",
            information_type="health information",
            purpose="marketing",
            consent_form="authorization",
        ),
        norm(
            "3(a)",
            sender_role="health care provider",
            recipient_role="employer",
            subject_role="employee",
            information_type="workplace injury",
            purpose="workplace medical surveillance",
        ),
    ]
    definitions = Definitions(
        regulation,
        [Definition("Covered entity", "a health plan, a health care clearinghouse or a provider")],
    )
    return KnowledgeBase(regulation, tree, {n.id: n for n in norms}, definitions=definitions)
