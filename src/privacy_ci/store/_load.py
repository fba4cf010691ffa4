"""Load a Conductor corpus (policy, agents, labels, assignments, content) into a store."""

from __future__ import annotations

from privacy_ci.conductor import POLICY_AUTHORITY_ROLE, Corpus
from privacy_ci.errors import PrivacyCIError, ValidationFailed
from privacy_ci.store._store import DocumentStore, LabelState


def load_corpus_into(
    store: DocumentStore,
    corpus: Corpus,
    *,
    state: LabelState | str = LabelState.APPROVED,
    by: str | None = None,
    content: bool = True,
) -> int:
    """Write a corpus into a store, in one transaction.

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
    # Read every text before the transaction: a missing one fails with nothing written.
    texts = _read_texts(corpus) if content else {}
    authority = by or corpus.policy.authority
    source = f"corpus-file:{corpus.source.name if corpus.source else 'memory'}"
    with store.db.write():
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
        for label in corpus.labels:
            store.propose_label(label, source, "hand-authored label from the corpus files")
            if target is LabelState.APPROVED:
                store.approve_label(label.doc_id, authority, "hand-authored by the authority")
            elif target is LabelState.REVOKED:
                store.revoke_label(label.doc_id, authority)
            if content:
                store.put_document(label.doc_id, texts[label.doc_id], source)
        if content:
            for doc_id in corpus.unlabelled:
                store.put_document(doc_id, texts[doc_id], source)
    return len(corpus.labels)


def _read_texts(corpus: Corpus) -> dict[str, str]:
    """Every document's text, labelled or not; every unreadable one named in one error."""
    corpus.content_source  # noqa: B018  (a corpus without content: one error, not one per label)
    texts: dict[str, str] = {}
    problems: list[str] = []
    for doc_id in [*corpus.labels.ids, *corpus.unlabelled]:
        try:
            texts[doc_id] = corpus.document_text(doc_id)
        except ValidationFailed as exc:
            problems.extend(exc.problems)
        except PrivacyCIError as exc:
            problems.append(str(exc))
    if problems:
        raise ValidationFailed(problems)
    return texts
