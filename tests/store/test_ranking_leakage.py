"""(a) Ranking leakage: a secret document the requester may not see changes nothing.

For 100 generated queries and several requesters, the admitted documents (ids,
order, scores, count) and the candidate decisions are identical whether or not
the store also holds secret unauthorized documents, written to match the queries
as well as possible. Both backends. A control shows the test has teeth: a BM25
index over the whole store (the wrong order of operations) does move the scores.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from privacy_ci.conductor import Corpus, Label, SensitivityTier
from privacy_ci.store import (
    BM25Ranker,
    DocumentStore,
    GatedRetrieval,
    load_corpus_into,
    retrieve_for,
    tokenize,
)

REQUESTERS = ["D01", "N01", "B02", "H01", "P03", "T01"]
WORDS = [
    "lipid",
    "panel",
    "cholesterol",
    "blood",
    "count",
    "prescription",
    "insurance",
    "claim",
    "salary",
    "contract",
    "review",
    "schedule",
    "agenda",
    "memo",
    "discharge",
    "radiology",
    "knee",
    "diabetes",
    "depression",
    "hiv",
    "billing",
    "statement",
    "referral",
    "hemoglobin",
    "mri",
    "patient",
    "clinic",
    "nurse",
    "doctor",
    "payment",
    "policy",
    "privacy",
    "metformin",
]


def _queries(corpus: Corpus, n: int = 100) -> list[str]:
    rng = random.Random(7)
    titles = [label.title for label in corpus.labels]
    out = []
    for i in range(n):
        if i % 3 == 0:
            out.append(rng.choice(titles))
        else:
            out.append(" ".join(rng.sample(WORDS, rng.randint(1, 5))))
    return out


def _secret_documents(corpus: Corpus, queries: list[str]) -> list[tuple[Label, str]]:
    """Secrets that match every query: extra-sensitive, Doctor-only, about a patient none of
    the requesters (bar their own doctor D04, not among them) is assigned to."""
    template = corpus.label("RMC-MHA-001")
    words = " ".join(queries)
    secrets = []
    for i in range(3):
        label = template.model_copy(
            update={"doc_id": f"SECRET-{i}", "title": f"Secret {i}", "subject": "P09"}
        )
        secrets.append((label, f"SECRET {i}. {words} {words if i else ''}"))
    return secrets


def _fingerprint(result: GatedRetrieval) -> list[Any]:
    return [
        [(d.doc_id, d.score, d.label_version, d.content) for d in result.admitted],
        [(f.doc_id, f.score, f.decision) for f in result.decisions],
        result.authorized_count,
        result.policy_version,
    ]


@pytest.fixture
def pair(backend: str, tmp_path: Any, corpus: Corpus) -> Any:
    from tests.store.backends import store_url

    with store_url(backend, tmp_path) as plain_url, store_url(backend, tmp_path) as secret_url:
        plain, with_secret = DocumentStore(plain_url), DocumentStore(secret_url)
        try:
            load_corpus_into(plain, corpus)
            load_corpus_into(with_secret, corpus)
            yield plain, with_secret
        finally:
            plain.close()
            with_secret.close()


def test_unauthorized_documents_do_not_move_rankings(pair: Any, corpus: Corpus) -> None:
    plain, with_secret = pair
    queries = _queries(corpus)
    for label, text in _secret_documents(corpus, queries):
        with_secret.propose_label(label, "test")
        with_secret.approve_label(label.doc_id, "test")
        with_secret.put_document(label.doc_id, text, "test")
    # a document with content but only a proposed label must not count either
    draft = corpus.label("RMC-LAB-001").model_copy(update={"doc_id": "DRAFT-1"})
    with_secret.propose_label(draft, "model:draft")
    with_secret.put_document("DRAFT-1", " ".join(queries), "test")

    compared = nonempty = 0
    for agent_id in REQUESTERS:
        requester = plain.snapshot().requester(agent_id)
        for query in queries:
            a = retrieve_for(plain, requester, query, k=5)
            b = retrieve_for(with_secret, requester, query, k=5)
            assert _fingerprint(a) == _fingerprint(b), (agent_id, query)
            assert all(not d.doc_id.startswith(("SECRET", "DRAFT")) for d in b.admitted)
            assert len(b.withheld) == len(a.withheld) + 4
            compared += 1
            nonempty += bool(a.admitted)
    assert compared == 600 and nonempty > 300


def test_control_a_global_index_would_leak(corpus: Corpus) -> None:
    """The same query scored with the secret in the index statistics: scores change."""
    from privacy_ci.conductor import render_document

    terms = {
        label.doc_id: tuple(tokenize(render_document(label, corpus))) for label in corpus.labels
    }
    authorized = sorted(d for d in terms if d.startswith("RMC-LAB"))
    query = "lipid panel cholesterol"
    scoped = BM25Ranker(authorized, terms).top_k(query, 5)
    terms["SECRET-0"] = tuple(tokenize(query * 20))
    leaky = BM25Ranker(sorted([*authorized, "SECRET-0"]), terms).top_k(query, 6)
    leaky_authorized = [(d, s) for d, s in leaky if d != "SECRET-0"][:5]
    assert [d for d, _ in scoped] == [d for d, _ in leaky_authorized]
    assert [s for _, s in scoped] != [s for _, s in leaky_authorized]


def _add_unseen_in_bulk(store: DocumentStore, corpus: Corpus, n: int, words: str) -> None:
    """`n` documents none of REQUESTERS_100K may see, matching every query, in one write.

    Written as rows (labels, index terms) in one transaction with one version bump,
    so that the test spends its time on the path under test, not on tokenizing.
    """
    from privacy_ci.store._sql import canonical_json, utc_now

    terms = canonical_json(tokenize(words))
    templates = [label for label in corpus.labels if label.subject is not None]
    labels, rows = [], []
    for i in range(n):
        base = templates[i % len(templates)]
        update: dict[str, Any] = {"doc_id": f"UNSEEN-{i:06d}", "subject": f"X{i % 5000:04d}"}
        if i % 4 == 0:  # another role's document, needing no assignment
            update["permitted_receiver_roles"] = frozenset({"IT Contractor"})
            update["sensitivity_tier"] = SensitivityTier.INTERNAL
        label = base.model_copy(update=update)
        state = "proposed" if i % 10 == 9 else "approved"
        body = canonical_json(label.model_dump(mode="json"))
        labels.append((label.doc_id, body, state, 1, "test", utc_now()))
        rows.append((label.doc_id, terms))
    with store.db.write() as db:
        db.bulk_write(
            "labels", ("doc_id", "body", "state", "version", "updated_by", "updated_at"), labels
        )
        db.bulk_write("doc_terms", ("doc_id", "terms"), rows)
        db.bump_version()


REQUESTERS_100K = ["D01", "N01", "B02", "H01", "P03"]


def test_100k_unauthorized_documents_move_nothing(corpus: Corpus, tmp_path: Any) -> None:
    """The leakage test on a store of 100,000 documents the requesters may not see:
    same ids, scores and decisions, the same work on the path, 100k more withheld."""
    queries = _queries(corpus, 30)
    plain = DocumentStore(f"sqlite:///{tmp_path / 'plain.db'}")
    large = DocumentStore(f"sqlite:///{tmp_path / 'large.db'}")
    try:
        load_corpus_into(plain, corpus)
        load_corpus_into(large, corpus)
        _add_unseen_in_bulk(large, corpus, 100_000, " ".join(queries))
        small_index, index = plain.snapshot().index, large.snapshot().index
        assert len(index.ids) == len(corpus.labels) + 100_000
        for agent_id in REQUESTERS_100K:
            requester = plain.snapshot().requester(agent_id)
            for query in queries:
                before = small_index.work, index.work
                a = retrieve_for(plain, requester, query, k=5)
                b = retrieve_for(large, requester, query, k=5)
                spent = small_index.work - before[0], index.work - before[1]
                assert spent[0] == spent[1], (agent_id, query)
                assert _fingerprint(a) == _fingerprint(b), (agent_id, query)
                assert b.withheld_count == a.withheld_count + 100_000
    finally:
        plain.close()
        large.close()
