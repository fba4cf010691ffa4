"""CI-ES role-keyword retrieval on the real HIPAA KB with the packaged MiniLM."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")

from privacy_ci.ci import Flow
from privacy_ci.knowledge import KnowledgeBase
from privacy_ci.retrieval import (
    EmptyQueryError,
    RetrievalQuery,
    RoleKeywordRetriever,
    RolesConfig,
    split_role,
)
from tests.retrieval import toy_kb


@pytest.fixture(scope="module")
def roles(hipaa_kb: KnowledgeBase) -> RoleKeywordRetriever:
    return RoleKeywordRetriever(hipaa_kb)


def test_split_role() -> None:
    assert split_role("Law Enforcement/Judicial Authority") == [
        "law enforcement",
        "judicial authority",
    ]
    assert split_role("health care provider or health plan") == [
        "health care provider",
        "health plan",
    ]
    assert split_role("Patient") == ["patient"]


def test_role_graph_links_surgeon_to_health_care_provider(roles: RoleKeywordRetriever) -> None:
    matched = dict(roles.matched_roles("surgeon", 5))
    # the paper's example: statistics and embeddings alone fail to link "surgeon" to
    # "covered entity"; the role graph does (surgeon < doctor < health care provider)
    assert matched["health care provider"] == 1.0 and matched["covered entity"] == 1.0
    assert "person" not in matched  # WordNet generalities give no credit


def test_roles_select_norms_by_recipient(
    roles: RoleKeywordRetriever, hipaa_kb: KnowledgeBase
) -> None:
    q = RetrievalQuery(
        "The clinic gave the police the results of a blood test.",
        flow=Flow.of(
            sender_role="hospital", recipient_role="law enforcement officer", subject_role="patient"
        ),
    )
    hits = roles.retrieve(q, 10)
    assert len(hits) == 10 and all(h.node_id in hipaa_kb.norms for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    in_512f = sum("164.512(f)" in hipaa_kb.tree.path(h.node_id) for h in hits)
    assert in_512f >= 3  # disclosures for law enforcement purposes


def test_text_only_queries_use_role_mentions(roles: RoleKeywordRetriever) -> None:
    text = "a surgeon sends the operative report to the patient's employer"
    assert {"surgeon", "employer", "patient"} <= set(roles.mentioned_roles(text))
    assert roles.retrieve(text, 5)
    assert roles.retrieve("zzz qqq", 5) == []
    assert roles.retrieve(RetrievalQuery(flow=Flow.of(sender_role="xyzzy qwerty")), 5) == []
    with pytest.raises(EmptyQueryError):
        roles.retrieve("", 5)


def test_kb_without_role_graph() -> None:
    kb = toy_kb()
    r = RoleKeywordRetriever(kb, RolesConfig(attribute_weight=0.0))
    top = r.retrieve(RetrievalQuery(flow=Flow.of(recipient_role="judge in a court")), 2)
    assert top[0].node_id == "1(a)"
    assert (
        r.retrieve(
            RetrievalQuery(flow=Flow.of(recipient_role="company boss", subject_role="worker")), 1
        )[0].node_id
        == "3(a)"
    )
