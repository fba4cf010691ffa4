"""The store's access index: the gated path's scope and ranking, kept incrementally.

* ranking equals today's reference ranker (`BM25Ranker` over the authorized set)
  on Riverside: same ids, same scores, bit for bit;
* after every kind of write, the incrementally refreshed index answers exactly as
  one built from scratch, on both backends, in this store handle and in another
  one opened on the same database (another process's view);
* the path's work (postings and partitions read) is the same with and without ten
  times more documents the requester may not see;
* the `Postings` segment and delta agree with a plain model through random changes.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np

from privacy_ci.conductor import Corpus, Gate, Label, Requester, Rule, SubjectType
from privacy_ci.store import DocumentStore, load_corpus_into, retrieve_for
from privacy_ci.store._index import MERGE_FROM, AccessIndex
from privacy_ci.store._postings import Postings
from privacy_ci.store._ranking import BM25Ranker
from privacy_ci.store._snapshot import load_snapshot

QUERIES = [
    "lipid panel cholesterol",
    "patient record lab results",
    "salary review performance",
    "psychotherapy session notes",
    "billing statement balance insurance",
    "the",
    "",
    "hiv hiv test result result",
]


def _answers(index: AccessIndex, requester: Requester) -> dict[str, Any]:
    with index.lock:
        scope = index.scope(requester)
        return {
            "authorized": index.authorized(scope),
            "counts": (scope.authorized, scope.ranked, scope.length),
            "withheld": dict(scope.withheld),
            "listed": index.listed(scope),
            "top": [index.top_k(scope, q, 10) for q in QUERIES],
        }


def _requesters(store: DocumentStore) -> list[Requester]:
    snap = store.snapshot()
    out = [snap.requester(a, role) for a, rec in snap.agents.items() for role in rec.roles]
    # acting outside the context, and with a role not held: checks 1 and 2
    d01 = snap.requester("D01")
    out.append(d01.model_copy(update={"active_context": "HR"}))
    out.append(d01.model_copy(update={"active_role": "Nurse"}))
    return out


def _same_as_rebuilt(store: DocumentStore) -> int:
    """Every requester's answers from the live index equal a freshly built one's."""
    live = store.snapshot()
    fresh = load_snapshot(store.db)
    assert fresh.version == live.version
    for requester in _requesters(store):
        assert _answers(live.index, requester) == _answers(fresh.index, requester), requester.id
    return live.version


def test_ranking_equals_the_reference_ranker(riverside: DocumentStore, gate: Gate) -> None:
    snap = riverside.snapshot()
    terms = {
        d: tuple(json.loads(t))
        for d, t in riverside.db.query("SELECT doc_id, terms FROM doc_terms")
    }
    labels = {r.doc_id: r.label for r in riverside.labels() if r.label is not None}
    queries = [*QUERIES, *(label.title for label in labels.values())]
    compared = nonempty = 0
    for requester in _requesters(riverside):
        authorized = sorted(d for d, lb in labels.items() if gate.decide(requester, lb).permitted)
        reference = BM25Ranker([d for d in authorized if d in terms], terms)
        with snap.index.lock:
            scope = snap.index.scope(requester)
            assert snap.index.authorized(scope) == authorized
            for query in queries:
                got = snap.index.top_k(scope, query, 10)
                assert got == reference.top_k(query, 10), (requester.id, query)
                compared += 1
                nonempty += bool(got)
    assert compared > 2000 and nonempty > 1000


def test_withheld_counts_equal_the_gate(riverside: DocumentStore, gate: Gate) -> None:
    records = riverside.labels()
    for requester in _requesters(riverside):
        expected: dict[Rule, int] = {}
        for record in records:
            if record.state.value != "approved" or record.label is None:
                rule = Rule.INVALID_LABEL
            else:
                rule = gate.decide(requester, record.label).rule
            if rule is not Rule.PERMIT:
                expected[rule] = expected.get(rule, 0) + 1
        result = retrieve_for(riverside, requester, "lab", k=100)
        counted = {Rule.from_key(k): v for k, v in result.withheld_rules().items()}
        assert counted == expected, requester.id
        listed = [w.doc_id for w in result.withheld]
        assert len(listed) == sum(expected.values()) == result.withheld_count


def _writes(store: DocumentStore, corpus: Corpus) -> list[tuple[str, Any]]:
    lab = corpus.label("RMC-LAB-001")
    sal = corpus.label("RMC-SAL-001")
    h01 = sorted(corpus.assignments["H01"])
    assert len(h01) >= MERGE_FROM
    h01_first = h01[0]
    h01_doc = next(
        label.doc_id
        for label in corpus.labels
        if label.subject in h01[1:] and "HR Manager" in label.permitted_receiver_roles
    )
    return [
        ("revoke", lambda: store.revoke_label("RMC-LAB-001", "test")),
        (
            "propose edited",
            lambda: store.propose_label(
                lab.model_copy(update={"permitted_receiver_roles": frozenset({"Nurse"})}), "test"
            ),
        ),
        ("approve", lambda: store.approve_label("RMC-LAB-001", "test")),
        (
            "new document",
            lambda: (
                store.propose_label(
                    lab.model_copy(update={"doc_id": "NEW-1", "subject": "P99"}), "t"
                ),
                store.approve_label("NEW-1", "t"),
                store.put_document("NEW-1", "lipid panel cholesterol for a new patient", "t"),
            ),
        ),
        ("content", lambda: store.put_document("RMC-SAL-001", "salary salary review", "test")),
        (
            "relabel open",
            lambda: (
                store.propose_label(
                    sal.model_copy(
                        update={"subject": None, "subject_type": SubjectType.ORGANIZATION}
                    ),
                    "t",
                ),
                store.approve_label("RMC-SAL-001", "t"),
            ),
        ),
        ("assign", lambda: store.assign("D01", "P99", "test")),
        # H01 holds enough subjects for merged partitions: change them, and their documents
        ("assign merged", lambda: store.assign("H01", "P99", "test")),
        ("unassign merged", lambda: store.unassign("H01", h01_first, "test")),
        ("document of a merged subject", lambda: store.revoke_label(h01_doc, "test")),
        ("reassign merged", lambda: store.assign("H01", h01_first, "test")),
        ("unassign", lambda: store.unassign("D01", "P01", "test")),
        (
            "agent role",
            lambda: store.put_agent(
                "N01", "N01", {"Nurse": "Medical", "Doctor": "Medical"}, "test"
            ),
        ),
        (
            "label without content",
            lambda: (
                store.propose_label(lab.model_copy(update={"doc_id": "EMPTY-1"}), "t"),
                store.approve_label("EMPTY-1", "t"),
            ),
        ),
    ]


def test_every_write_kind_is_seen_by_the_next_request(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    other = DocumentStore(riverside.url)  # another process's handle on the same database
    try:
        other.snapshot()
        seen = _same_as_rebuilt(riverside)
        for name, write in _writes(riverside, corpus):
            write()
            version = _same_as_rebuilt(riverside)
            assert version > seen, name
            assert _same_as_rebuilt(other) == version, name
            seen = version
    finally:
        other.close()


def test_compaction_keeps_answers(riverside: DocumentStore, corpus: Corpus) -> None:
    """Many writes to one partition: its delta is folded into its segment on the way."""
    lab = corpus.label("RMC-LAB-001")
    for i in range(150):
        label = lab.model_copy(update={"doc_id": f"MANY-{i:03d}"})
        riverside.propose_label(label, "t")
        riverside.approve_label(label.doc_id, "t")
        riverside.put_document(label.doc_id, f"lipid panel {i} cholesterol", "t")
        if i % 3 == 0:
            riverside.revoke_label(f"MANY-{i // 2:03d}", "t")
    _same_as_rebuilt(riverside)


def _unseen_documents(corpus: Corpus, times: int) -> list[tuple[Label, str]]:
    """Documents the tested requesters may not see: other subjects (under tiers that
    need an assignment), other roles' documents (the IT contractor's), not approved."""
    gate = Gate(corpus.policy)
    out = []
    for label in corpus.labels:
        for i in range(times):
            doc_id = f"{label.doc_id}-UNSEEN-{i}"
            subject = None if label.subject is None else f"{label.subject}-other-{i}"
            update: dict[str, Any] = {"doc_id": doc_id, "subject": subject}
            if label.subject is None or not gate.tier_requires[label.sensitivity_tier]:
                update["permitted_receiver_roles"] = frozenset({"IT Contractor"})
            out.append((label.model_copy(update=update), f"lipid panel cholesterol patient {i}"))
    return out


def test_work_does_not_grow_with_unseen_documents(corpus: Corpus, tmp_path: Any) -> None:
    small = DocumentStore(f"sqlite:///{tmp_path / 'small.db'}")
    large = DocumentStore(f"sqlite:///{tmp_path / 'large.db'}")
    try:
        load_corpus_into(small, corpus)
        load_corpus_into(large, corpus)
        unseen = _unseen_documents(corpus, 10)
        for label, text in unseen:
            large.propose_label(label, "t")
            if not label.doc_id.startswith("RMC-PUB"):
                large.approve_label(label.doc_id, "t")
            large.put_document(label.doc_id, text, "t")
        assert large.counts()["labels"] == 11 * small.counts()["labels"]
        work: dict[str, list[int]] = {"small": [], "large": []}
        for name, store in (("small", small), ("large", large)):
            snap = store.snapshot()
            for agent in ("N01", "D01", "B01", "H01"):
                requester = snap.requester(agent)
                for query in QUERIES:
                    before = snap.index.work
                    retrieve_for(store, requester, query, k=5)
                    work[name].append(snap.index.work - before)
        assert work["small"] == work["large"]
        assert sum(work["small"]) > 0
        for agent in ("N01", "D01", "B01", "H01"):
            for query in QUERIES:
                a = retrieve_for(small, small.snapshot().requester(agent), query, k=5)
                b = retrieve_for(large, large.snapshot().requester(agent), query, k=5)
                assert [(d.doc_id, d.score) for d in a.admitted] == [
                    (d.doc_id, d.score) for d in b.admitted
                ]
                assert b.withheld_count == a.withheld_count + len(unseen)
    finally:
        small.close()
        large.close()


def test_postings_agree_with_a_plain_model() -> None:
    rng = random.Random(7)
    postings = Postings()
    model: dict[int, dict[int, int]] = {}
    for step in range(3000):
        if model and rng.random() < 0.4:
            o = rng.choice(sorted(model))
            postings.discard(o)
            del model[o]
        else:
            o = rng.randrange(400)
            if o in model:
                postings.discard(o)
            counts = {rng.randrange(30): rng.randint(1, 4) for _ in range(rng.randint(0, 6))}
            postings.add(o, counts)
            model[o] = counts
        if step % 97 == 0 or step > 2990:
            assert sorted(postings.documents().tolist()) == sorted(model)
            assert len(postings) == len(model)
            for term in range(30):
                docs, tfs = postings.postings(term)
                got = sorted(zip(docs.tolist(), tfs.tolist(), strict=True))
                want = sorted((o, c[term]) for o, c in model.items() if term in c)
                assert got == want, (step, term)
    postings.compact()
    assert not postings.delta and not postings.removed
    assert np.all(np.diff(postings.terms) > 0)


def test_vector_ranking_equals_the_reference_and_sees_new_vectors(
    riverside: DocumentStore, gate: Gate
) -> None:
    from privacy_ci.store import EmbeddingRanker, HashingEmbedder

    embedder = HashingEmbedder(64)
    riverside.embed_documents(embedder)
    other = DocumentStore(riverside.url)
    try:
        labels = {r.doc_id: r.label for r in riverside.labels() if r.label is not None}

        def reference(store: DocumentStore, requester: Requester, query: str) -> list[Any]:
            authorized = sorted(
                d for d, lb in labels.items() if gate.decide(requester, lb).permitted
            )
            return EmbeddingRanker(
                authorized, store.embeddings(embedder.model, authorized), embedder
            ).top_k(query, 5)

        for store in (riverside, other):
            for requester in _requesters(store):
                for query in QUERIES[:5]:
                    got = retrieve_for(store, requester, query, k=5, embedder=embedder)
                    assert [(d.doc_id, d.score) for d in got.admitted] == reference(
                        store, requester, query
                    ), (requester.id, query)
        # a vector written through one handle is ranked by the other's next request
        requester = riverside.snapshot().requester("D01")
        target = retrieve_for(other, requester, "lipid panel", k=5, embedder=embedder)
        last = target.admitted[-1].doc_id
        riverside.put_embedding(last, embedder.model, embedder.embed(["lipid panel"])[0])
        again = retrieve_for(other, requester, "lipid panel", k=5, embedder=embedder)
        assert again.admitted[0].doc_id == last
        assert again.admitted[0].score > 0.999
    finally:
        other.close()


def test_concurrent_writers_and_readers_end_consistent(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    """Writers on their own connections change labels and assignments while readers
    retrieve through another; afterwards every handle's index equals a rebuilt one,
    and the audit chain verifies."""
    import threading

    readers = DocumentStore(riverside.url)
    writers = [DocumentStore(riverside.url) for _ in range(2)]
    ids = sorted(corpus.labels.ids)
    subjects = sorted({s for held in corpus.assignments.values() for s in held})
    errors: list[BaseException] = []
    stop = threading.Event()

    def write(store: DocumentStore, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(40):
                doc_id = rng.choice(ids)
                if rng.random() < 0.5:
                    store.revoke_label(doc_id, "test")
                else:
                    store.approve_label(doc_id, "test")
                agent = rng.choice([("D01", "N01"), ("H01", "B01")][seed])  # each its own
                subject = rng.choice(subjects)
                if subject in store.assignments().get(agent, frozenset()):
                    store.unassign(agent, subject, "test")
                else:
                    store.assign(agent, subject, "test")
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            while not stop.is_set():
                for agent in ("D01", "N01", "H01", "B01"):
                    requester = readers.snapshot().requester(agent)
                    retrieve_for(readers, requester, "patient record lab salary", k=5)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w, i)) for i, w in enumerate(writers)]
    reading = [threading.Thread(target=read) for _ in range(2)]
    try:
        for t in threads + reading:
            t.start()
        for t in threads:
            t.join(120)
        stop.set()
        for t in reading:
            t.join(120)
        assert not errors, errors
        for store in (readers, riverside, *writers):
            _same_as_rebuilt(store)
        assert riverside.audit.verify().ok
    finally:
        stop.set()
        for store in (readers, *writers):
            store.close()


def test_rows_edited_outside_the_store_are_denied_not_fatal(riverside: DocumentStore) -> None:
    """A label body that is not JSON (or not a label), and index terms that are not a
    list of words, written straight into the database: the index still builds, those
    labels are denied as invalid, that document is not ranked, every request works."""
    from privacy_ci.store import decide_for

    with riverside.db.write() as db:
        # the label in force is what the gate reads
        for column in ("body", "in_force"):
            db.execute(
                f"UPDATE labels SET {column} = ? WHERE doc_id = 'RMC-LAB-001'", ("{not json",)
            )
            db.execute(f"UPDATE labels SET {column} = ? WHERE doc_id = 'RMC-LAB-002'", ("[1, 2]",))
        db.execute("UPDATE doc_terms SET terms = ? WHERE doc_id = 'RMC-LAB-003'", ('{"a": 1}',))
        db.bump_version()
    fresh = DocumentStore(riverside.url)  # builds its index from these rows
    try:
        for store in (riverside, fresh):
            requester = store.snapshot().requester("D01")
            result = retrieve_for(store, requester, "lipid panel cholesterol lab", k=20)
            ids = [d.doc_id for d in result.admitted]
            assert not {"RMC-LAB-001", "RMC-LAB-002", "RMC-LAB-003"} & set(ids)
            rules = {w.doc_id: w.rule for w in result.withheld}
            assert rules["RMC-LAB-001"] is rules["RMC-LAB-002"] is Rule.INVALID_LABEL
            for doc_id in ("RMC-LAB-001", "RMC-LAB-002"):
                flow = decide_for(store, requester, doc_id)
                assert flow.decision.rule is Rule.INVALID_LABEL and flow.decision.errors
    finally:
        fresh.close()
