"""(g) The assistant: wiring with the scripted test backend (only admitted ids can be
cited; withhold vs explain prompts carry no withheld titles or content), one call
with the embedded model when it is installed, and the demo."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console

from privacy_ci.assistant import (
    NO_CITATION_NOTE,
    NO_DOCUMENTS_ANSWER,
    Assistant,
    DenialMode,
    ask,
    parse_citations,
)
from privacy_ci.conductor import Corpus
from privacy_ci.llm import GenerationSettings, LLMClient, LLMError, Message
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.store import DocumentStore, GatedRetrieval, load_corpus_into, retrieve_for

QUESTION = "What did Aiko Tanaka's lipid panel show?"


def _client(answers: Sequence[str | LLMError]) -> tuple[LLMClient, ScriptedTestBackend]:
    backend = ScriptedTestBackend(answers)
    return LLMClient(backend, retry=None), backend


def _retrieval(store: DocumentStore, agent: str = "D01", k: int = 3) -> GatedRetrieval:
    return retrieve_for(store, store.snapshot().requester(agent), QUESTION, k)


def test_parse_citations() -> None:
    admitted = ["RMC-LAB-003", "RMC-LAB-0031", "RMC-CN-007"]
    cited, rejected = parse_citations(
        "See [RMC-CN-007] and RMC-LAB-003; also [RMC-MHA-001], [RMC-MHA-001] and [ref]", admitted
    )
    assert cited == ("RMC-CN-007", "RMC-LAB-003")
    assert rejected == ("RMC-MHA-001", "ref")
    assert parse_citations("nothing cited", admitted) == ((), ())


def test_only_admitted_ids_are_cited(riverside: DocumentStore) -> None:
    retrieval = _retrieval(riverside)
    admitted = retrieval.admitted_ids
    assert "RMC-LAB-003" in admitted
    client, backend = _client(
        ["Total cholesterol was 199 [RMC-LAB-003]; the therapy note [RMC-MHA-001] says more."]
    )
    answer = Assistant(client).answer_sync(QUESTION, retrieval)
    assert answer.cited == ("RMC-LAB-003",)
    assert answer.rejected_citations == ("RMC-MHA-001",)
    assert answer.admitted == tuple(admitted) and answer.ok and answer.note is None
    # the prompt holds the admitted documents, labelled by id, and nothing else
    ((messages, settings),) = backend.calls
    prompt = "\n".join(m.content for m in messages)
    for doc in retrieval.admitted:
        assert f"[{doc.doc_id}] {doc.title}" in prompt
    withheld_ids = {w.doc_id for w in retrieval.withheld}
    assert not any(d in prompt for d in withheld_ids)
    assert settings.max_tokens == 256


def test_no_citation_is_said(riverside: DocumentStore) -> None:
    client, _ = _client(["The cholesterol was fine."])
    answer = Assistant(client).answer_sync(QUESTION, _retrieval(riverside))
    assert answer.cited == () and answer.note == NO_CITATION_NOTE


def _prompt(store: DocumentStore, corpus: Corpus, mode: DenialMode) -> tuple[str, GatedRetrieval]:
    retrieval = _retrieval(store)
    client, backend = _client(["ok [RMC-LAB-003]"])
    Assistant(client, denial_mode=mode).answer_sync(QUESTION, retrieval)
    messages: list[Message] = backend.calls[0][0]
    return "\n".join(m.content for m in messages), retrieval


def test_withhold_prompt_says_nothing_about_withheld(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    prompt, retrieval = _prompt(riverside, corpus, DenialMode.WITHHOLD)
    assert retrieval.withheld
    assert "withheld" not in prompt and "role_not_permitted" not in prompt


def test_explain_prompt_gives_count_and_rules_only(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    prompt, retrieval = _prompt(riverside, corpus, DenialMode.EXPLAIN)
    assert f"withheld {len(retrieval.withheld)} other document(s)" in prompt
    for rule in retrieval.withheld_rules():
        assert rule in prompt
    admitted = set(retrieval.admitted_ids)
    for w in retrieval.withheld:
        label = corpus.label(w.doc_id)
        assert w.doc_id not in prompt and label.title not in prompt
    # no line of any withheld document's content reaches the prompt
    withheld_text = riverside.fetch_content([w.doc_id for w in retrieval.withheld])
    admitted_text = "\n".join(d.content for d in retrieval.admitted)
    for text in withheld_text.values():
        for line in text.splitlines():
            if len(line) > 30 and line not in admitted_text:
                assert line not in prompt
    assert admitted


def test_nothing_admitted_means_no_model_call(riverside: DocumentStore) -> None:
    client, backend = _client([])
    # the Policy Authority's role is on no document's ACL: nothing is authorized
    requester = riverside.snapshot().requester("PA1")
    answer = ask(riverside, requester, QUESTION, k=3, assistant=Assistant(client))
    assert answer.text == NO_DOCUMENTS_ANSWER and backend.calls == []
    assert answer.cited == () and answer.withheld_count > 0
    assert {r.action for r in riverside.audit.records()} == {"ask"}


def test_model_failure_is_reported(riverside: DocumentStore) -> None:
    client, _ = _client([LLMError("server down", retryable=False)])
    answer = Assistant(client).answer_sync(QUESTION, _retrieval(riverside))
    assert not answer.ok and "server down" in (answer.error or "") and answer.text == ""
    assert answer.as_dict()["ok"] is False


def test_document_cut_to_max_chars(riverside: DocumentStore) -> None:
    client, backend = _client(["x"])
    Assistant(client, max_doc_chars=100).answer_sync(QUESTION, _retrieval(riverside, k=1))
    prompt = backend.calls[0][0][1].content
    assert "[... document truncated ...]" in prompt and len(prompt) < 1200


def _embedded_available() -> str | None:
    from privacy_ci.errors import PrivacyCIError
    from privacy_ci.llm._embedded import default_model_path, llama_cpp_available

    if not llama_cpp_available():
        return "llama-cpp-python is not installed"
    try:
        default_model_path()
    except PrivacyCIError as exc:
        return str(exc)
    return None


def test_end_to_end_with_the_embedded_model(tmp_path: Path, corpus: Corpus) -> None:
    """One real call (SQLite only: the backend does not matter to the model)."""
    reason = _embedded_available()
    if reason:
        pytest.skip(reason)
    from privacy_ci.llm import load_llm_config, make_client

    store = DocumentStore(tmp_path / "store.db")
    load_corpus_into(store, corpus)
    client = make_client(load_llm_config().model_copy(update={"cache": False}))
    assistant = Assistant(client, settings=GenerationSettings(max_tokens=48), max_doc_chars=400)
    requester = store.snapshot().requester("D01")
    answer = ask(store, requester, QUESTION, k=1, assistant=assistant)
    store.close()
    assert answer.ok, answer.error
    assert answer.provider == "embedded" and answer.text.strip()
    assert set(answer.cited) <= set(answer.admitted) == {"RMC-LAB-003"}
    assert answer.note is None or answer.note == NO_CITATION_NOTE


def test_demo_with_a_scripted_model() -> None:
    from privacy_ci.service import demo_assistant

    client, _ = _client(["Total cholesterol was 199 mg/dL [RMC-LAB-003]."])
    buffer = io.StringIO()
    shown = demo_assistant(Console(file=buffer, width=120), client=client)
    text = buffer.getvalue()
    assert "Cited admitted documents: RMC-LAB-003" in text
    assert "Withheld: 80 documents" in text and "assignment_required" in text
    assert "Audit chain:" in text and "verified" in text
    assert shown["audit_ok"] and shown["answer"]["cited"] == ["RMC-LAB-003"]
    assert all(r["requester"] == "D01" for r in shown["audit"])
