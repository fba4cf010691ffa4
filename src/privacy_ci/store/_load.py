"""Load a Conductor corpus (policy, agents, labels, assignments, content) into a store."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from privacy_ci.conductor import POLICY_AUTHORITY_ROLE, Corpus
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.store._history import require_actor
from privacy_ci.store._ranking import tokenize
from privacy_ci.store._sql import canonical_json, utc_now
from privacy_ci.store._store import DocumentStore, LabelState


def load_directory(store: DocumentStore, corpus: Corpus, source: str, authority: str) -> None:
    """The policy, the agents (with the Policy Authority's members) and the assignments,
    one at a time (they are few); call inside a write transaction."""
    store.set_policy(corpus.policy, authority)
    for agent in corpus.agents:
        store.put_agent(
            agent.id, agent.name, {agent.role: agent.context}, source, agent.description
        )
    for member in corpus.directory.policy_authority:
        store.put_agent(
            member.id,
            member.name,
            {POLICY_AUTHORITY_ROLE: member.context},
            source,
            member.description,
        )
    for agent_id, subjects in sorted(corpus.assignments.items()):
        for subject in sorted(subjects):
            store.assign(agent_id, subject, source)


def load_corpus_into(
    store: DocumentStore,
    corpus: Corpus,
    *,
    state: LabelState | str = LabelState.APPROVED,
    by: str | None = None,
    content: bool = True,
) -> int:
    """Write a corpus into a store, in one transaction, labels and documents in bulk.

    The rows and the history are those the one-at-a-time methods would write
    (`DocumentStore.propose_label`, then `approve_label` or `revoke_label`, and
    `put_document`), in the same order, but written in bulk (one prepared
    statement for all rows on SQLite, ``COPY`` on PostgreSQL) with one store
    version bump. The texts are read, hashed and tokenized before the transaction.

    The policy, every agent with its role and context, the members of the Policy
    Authority (role ``Policy Authority``), the assignment relation,
    every label (proposed by ``corpus-file``, then approved by `by` unless `state`
    is ``proposed``) and, with `content`, each document's text from the corpus's
    content source (`Corpus.content`), tokenized for the ranking index. Documents
    without a label (`Corpus.unlabelled`) are stored too: with no label the gate
    grants them to nobody until one is proposed and approved.

    Args:
        store: the target store (existing rows with the same keys are replaced).
        corpus: e.g. `load_corpus()`, the Riverside Medical Clinic.
        state: the lifecycle state the labels end in (``approved`` or ``proposed``).
        by: who approves (default: the policy's authority).
        content: also store the documents' text.

    Returns:
        The number of labels loaded.

    Raises:
        PrivacyCIError: with `content`, a corpus without content, or documents whose
            text is missing or unreadable (`ValidationFailed`, naming each); nothing
            is written then.
    """
    target = LabelState(state)
    authority = by or corpus.policy.authority
    source = f"corpus-file:{corpus.source.name if corpus.source else 'memory'}"
    proposer, approver = require_actor(source), require_actor(authority)
    # Every text is read, and everything derived from it (digest, index terms)
    # computed, before the transaction: a missing text fails with nothing written.
    documents = _read_documents(corpus) if content else []
    documents_of = {row[0]: row for row in documents}
    documents = list(documents_of.values())  # an id listed twice is stored once
    with store.db.write() as db:
        load_directory(store, corpus, source, authority)
        # Labels and documents in bulk, with the rows and history the one-at-a-time
        # methods (propose_label, approve_label / revoke_label, put_document) would
        # write, in the same order. Rows whose keys are not stored yet are plain
        # appends (COPY straight into the table on PostgreSQL); otherwise they replace.
        stored: dict[str, int] = {}
        # a load that only proposes leaves a label in force as it is (a proposal
        # changes no access)
        kept_in_force: dict[str, tuple[str | None, int | None]] = {}
        for doc_id, version, force_body, force_version in db.query(
            "SELECT doc_id, version, in_force, in_force_version FROM labels"
        ):
            stored[doc_id] = version
            kept_in_force[doc_id] = (force_body, force_version)
        stored_documents = {
            row[0]
            for row in db.query("SELECT doc_id FROM documents UNION SELECT doc_id FROM doc_terms")
        }
        label_rows: list[tuple[Any, ...]] = []
        history: list[tuple[str, ...]] = []
        # the approval's history detail, as canonical_json writes it (keys sorted), with
        # only the version left to fill in: one JSON encoding per load, not per label
        decided = "approve" if target is LabelState.APPROVED else "revoke"
        note = _APPROVAL_NOTE if target is LabelState.APPROVED else ""
        decision_head = canonical_json(
            {"from": "proposed", "note": note, "state": target.value, "version": 0}
        ).removesuffix("0}")
        for label in corpus.labels:
            doc_id = label.doc_id
            body = canonical_json(label.model_dump(mode="json"))
            prior = stored.get(doc_id)
            version = 1 if prior is None else int(prior) + 1
            now = utc_now()
            action = "propose" if prior is None else "edit"
            history.append(
                (now, proposer, action, "label", doc_id, _proposal_detail(body, version))
            )
            actor = proposer
            if target is not LabelState.PROPOSED:
                version += 1
                actor = approver
                history.append(
                    (now, approver, decided, "label", doc_id, f"{decision_head}{version}}}")
                )
            in_force = (
                (body, version)
                if target is LabelState.APPROVED
                else kept_in_force.get(doc_id, (None, None))
            )
            label_rows.append((doc_id, body, target.value, version, actor, now, *in_force))
            if doc_id in documents_of:
                history.append(_document_change(proposer, documents_of[doc_id]))
        for doc_id in corpus.unlabelled if content else ():
            history.append(_document_change(proposer, documents_of[doc_id]))
        if label_rows or documents:
            db.bump_version()
        db.bulk_write(
            "labels",
            (
                "doc_id",
                "body",
                "state",
                "version",
                "updated_by",
                "updated_at",
                "in_force",
                "in_force_version",
            ),
            label_rows,
            key=("doc_id",) if any(row[0] in stored for row in label_rows) else (),
        )
        replace = ("doc_id",) if stored_documents & documents_of.keys() else ()
        db.bulk_write(
            "documents",
            ("doc_id", "content", "content_sha256"),
            [row[:3] for row in documents],
            key=replace,
        )
        db.bulk_write(
            "doc_terms", ("doc_id", "terms"), [(row[0], row[3]) for row in documents], key=replace
        )
        db.bulk_write(
            "history", ("at", "actor", "action", "target_kind", "target", "detail"), history
        )
    return len(corpus.labels)


_NOTE = "hand-authored label from the corpus files"
_APPROVAL_NOTE = "hand-authored by the authority"


def _document_row(doc_id: str, content: str) -> tuple[str, str, str, str]:
    """A document's (id, content, sha256, index terms), as `put_document` stores them."""
    ((digest, terms),) = _digest_and_terms([content])
    return doc_id, content, digest, terms


PARALLEL_FROM = 4000
"""From this many documents on, a load tokenizes them in worker processes."""
_CHUNK = 500


def _digest_and_terms(texts: list[str]) -> list[tuple[str, str]]:
    """Each text's sha256 and index terms (JSON): a worker process's share of a load."""
    return [
        (hashlib.sha256(t.encode("utf-8")).hexdigest(), canonical_json(tokenize(t))) for t in texts
    ]


def _proposal_detail(body: str, version: int) -> str:
    """`propose_label`'s history detail, around the label's JSON already written
    (``canonical_json`` of the same dict: keys sorted, no spaces)."""
    return (
        f'{{"label":{body},"note":{canonical_json(_NOTE)},"state":"proposed","version":{version}}}'
    )


def _document_change(actor: str, row: tuple[str, str, str, str]) -> tuple[str, ...]:
    # canonical_json({"sha256": digest}), written out: a hex digest needs no escaping
    return utc_now(), actor, "put_document", "document", row[0], f'{{"sha256":"{row[2]}"}}'


def _read_documents(corpus: Corpus) -> list[tuple[str, str, str, str]]:
    """Every document's (id, text, sha256, index terms), labelled or not, in order.

    Every unreadable text is named in one error. A large load tokenizes in forked
    worker processes while the texts are still being read; that is safe only while
    this process runs one thread (a fork copies no other thread, but it would copy
    the locks they hold), so a process with other threads, a machine with one core,
    or a small load does the work here. (Spawned workers would re-run a caller's
    script that has no main guard.)
    """
    corpus.content_source  # noqa: B018  (a corpus without content: one error, not one per label)
    doc_ids = [*corpus.labels.ids, *corpus.unlabelled]
    workers = min(os.cpu_count() or 1, 8)
    parallel = (
        len(doc_ids) >= PARALLEL_FROM
        and workers >= 2
        and threading.active_count() == 1
        and "fork" in multiprocessing.get_all_start_methods()
    )
    texts: dict[str, str] = {}
    problems: list[str] = []
    pool = (
        ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
        if parallel
        else None
    )
    try:
        pending: list[Future[list[tuple[str, str]]]] = []
        chunk: list[str] = []
        for doc_id in doc_ids:
            try:
                text = texts[doc_id] = corpus.document_text(doc_id)
            except ValidationFailed as exc:
                problems.extend(exc.problems)
                continue
            except PrivacyCIError as exc:
                problems.append(str(exc))
                continue
            if pool is not None and not problems:
                chunk.append(text)
                if len(chunk) == _CHUNK:
                    pending.append(pool.submit(_digest_and_terms, chunk))
                    chunk = []
        if problems:
            raise ValidationFailed(problems)
        if pool is None:
            return [_document_row(d, texts[d]) for d in doc_ids]
        if chunk:
            pending.append(pool.submit(_digest_and_terms, chunk))
        derived = [row for future in pending for row in future.result()]
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return [
        (d, texts[d], digest, terms) for d, (digest, terms) in zip(doc_ids, derived, strict=True)
    ]
