"""`Labeler.label`: one draw of one document, re-asked twice on output that does not
parse (Appendix C), every attempt kept, a failure recorded as a value."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from privacy_ci.conductor import Corpus
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling import (
    PARSE_RETRIES,
    Labeler,
    LabelerPrompt,
    LabelRecord,
    ProposedLabel,
    label_schema,
    load_labeler_prompt,
)
from privacy_ci.llm import GenerationSettings, LLMClient, LLMError, ResponseCache
from privacy_ci.llm.testing import ScriptedTestBackend

from . import authored_answers, by_document, label_json, scripted

DOC = "RMC-LAB-001"
NOT_JSON = "The label is clinical_standard for Doctor and Nurse."
BAD_ROLE = json.dumps(
    {
        "sensitivity_tier": "clinical_standard",
        "permitted_receiver_roles": ["Doctor", "Surgeon"],
        "extra_sensitive": False,
        "governing_principle": "treatment",
    }
)
MISSING = json.dumps({"sensitivity_tier": "clinical_standard"})


def label(labeler: Labeler, doc_id: str = DOC, draw: int = 1) -> LabelRecord:
    return asyncio.run(labeler.label(doc_id, draw))


def test_records_the_models_label(corpus: Corpus) -> None:
    client, backend = scripted(authored_answers(corpus))
    labeler = Labeler(client, corpus)
    record = label(labeler)
    assert record.ok and record.failure is None
    assert record.proposed == ProposedLabel.of(corpus.label(DOC))
    assert (record.doc_id, record.draw) == (DOC, 1)
    assert record.backend == "scripted-test-double:scripted"
    assert len(record.attempts) == 1
    attempt = record.attempts[0]
    assert attempt["text"] == label_json(corpus.label(DOC))
    assert attempt["parse_error"] is None and attempt["error"] is None
    assert attempt["cached"] is False
    # what was sent: the paper's system prompt, the rendered user prompt, the schema
    ((messages, settings),) = backend.calls
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content == load_labeler_prompt("labeler_system").text
    assert messages[1].content == labeler.prompt_for(DOC)
    assert settings.json_schema == label_schema(corpus.policy)
    assert settings.schema_name == "document_label"
    assert settings.temperature == 0.0 and settings.seed == 0
    as_dict = record.as_dict()
    assert as_dict["key"] == f"{DOC}#1" and as_dict["label"] == record.proposed.as_dict()


def test_malformed_output_is_asked_again_twice_then_a_failure(corpus: Corpus) -> None:
    answers = [NOT_JSON, BAD_ROLE, MISSING, label_json(corpus.label(DOC))]
    client, backend = scripted(answers)
    record = label(Labeler(client, corpus))
    assert PARSE_RETRIES == 2
    assert len(backend.calls) == 3  # the fourth (good) answer is never asked for
    assert not record.ok and record.proposed is None
    assert record.failure is not None
    assert record.failure.startswith("output does not fit the label schema: ")
    assert "missing field(s)" in record.failure  # the last attempt's reason
    assert [a["text"] for a in record.attempts] == answers[:3]  # every raw output kept
    assert "not JSON" in record.attempts[0]["parse_error"]
    assert "'Surgeon' is not a role of the policy" in record.attempts[1]["parse_error"]
    assert record.attempts[2]["parse_error"] == (
        "missing field(s): permitted_receiver_roles, extra_sensitive, governing_principle"
    )
    as_dict = record.as_dict()
    assert as_dict["label"] is None and len(as_dict["attempts"]) == 3


def test_a_success_on_the_second_attempt_is_kept(corpus: Corpus) -> None:
    good = label_json(corpus.label(DOC))
    client, backend = scripted([BAD_ROLE, good, NOT_JSON])
    record = label(Labeler(client, corpus))
    assert len(backend.calls) == 2
    assert record.ok and record.proposed == ProposedLabel.of(corpus.label(DOC))
    assert [a["text"] for a in record.attempts] == [BAD_ROLE, good]
    assert record.attempts[0]["parse_error"] and record.attempts[1]["parse_error"] is None


def test_a_fenced_json_answer_parses(corpus: Corpus) -> None:
    fenced = "```json\n" + label_json(corpus.label(DOC)) + "\n```"
    client, _ = scripted([fenced])
    assert label(Labeler(client, corpus)).ok


@pytest.mark.parametrize("retries", [0, 1, 4])
def test_parse_retries_is_the_number_of_re_asks(retries: int, corpus: Corpus) -> None:
    client, backend = scripted([NOT_JSON], cycle=True)
    record = label(Labeler(client, corpus, parse_retries=retries))
    assert len(backend.calls) == retries + 1 == len(record.attempts)
    assert not record.ok


def test_a_failed_call_is_a_failure_record_not_an_exception(corpus: Corpus) -> None:
    good = label_json(corpus.label(DOC))
    client, backend = scripted(
        [LLMError("400 bad request: context too long", retryable=False), good]
    )
    record = label(Labeler(client, corpus))
    assert len(backend.calls) == 1  # a failed call is not a malformed answer: no re-ask
    assert not record.ok
    assert record.failure is not None and record.failure.startswith("model call failed: ")
    assert "context too long" in record.failure and "not retryable" in record.failure
    (attempt,) = record.attempts
    assert attempt["error"] and attempt["finish_reason"] == "error" and attempt["text"] == ""


def test_a_retryable_error_is_retried_by_the_client(corpus: Corpus) -> None:
    good = label_json(corpus.label(DOC))
    client, backend = scripted([LLMError("503", retryable=True), good])
    record = label(Labeler(client, corpus))
    assert len(backend.calls) == 2 and record.ok
    assert len(record.attempts) == 1 and record.attempts[0]["retries"] == 1


def test_every_draw_and_attempt_is_its_own_sample(corpus: Corpus, tmp_path: Path) -> None:
    """Draws and re-asks get distinct seeds and distinct cache entries: no draw can
    be a cached copy of another."""
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backend = ScriptedTestBackend([NOT_JSON], cycle=True)
    labeler = Labeler(LLMClient(backend, cache=cache), corpus, settings=GenerationSettings(seed=10))
    records = [label(labeler, DOC, draw) for draw in (1, 2, 3)]
    assert all(len(r.attempts) == 3 for r in records)
    seeds = [settings.seed for _, settings in backend.calls]
    assert seeds == list(range(10, 19))  # draw d, attempt a -> seed 10 + 3(d-1) + a
    with sqlite3.connect(cache.path) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM completions").fetchone()
    assert rows == 9
    # the same draw again is answered from the cache, attempt by attempt
    again = label(labeler, DOC, 2)
    assert len(backend.calls) == 9
    assert [a["cached"] for a in again.attempts] == [True, True, True]


def test_draws_of_a_good_label_differ_only_by_sample(corpus: Corpus) -> None:
    client, backend = scripted(authored_answers(corpus))
    labeler = Labeler(client, corpus)
    for draw in (1, 2):
        assert label(labeler, DOC, draw).ok
    (m1, s1), (m2, s2) = backend.calls
    assert m1 == m2 and s1.seed != s2.seed and (s1.seed, s2.seed) == (0, 3)


def test_draws_are_numbered_from_one(corpus: Corpus) -> None:
    client, _ = scripted(authored_answers(corpus))
    with pytest.raises(ValueError, match="numbered from 1"):
        label(Labeler(client, corpus), DOC, 0)
    with pytest.raises(ValueError, match="parse_retries"):
        Labeler(client, corpus, parse_retries=-1)


def test_a_system_prompt_with_variables_is_refused(corpus: Corpus) -> None:
    client, _ = scripted(authored_answers(corpus))
    with pytest.raises(PrivacyCIError, match="has variables"):
        Labeler(client, corpus, system_prompt=LabelerPrompt("s", "Label {org} documents."))


def test_a_custom_system_prompt_is_sent_as_is(corpus: Corpus) -> None:
    backend = ScriptedTestBackend(by_document(authored_answers(corpus)))
    labeler = Labeler(
        LLMClient(backend), corpus, system_prompt=LabelerPrompt("mine", "Label documents.")
    )
    assert label(labeler).ok
    assert backend.calls[0][0][0].content == "Label documents."


def test_an_unknown_document_is_a_clear_error(corpus: Corpus) -> None:
    client, backend = scripted(authored_answers(corpus))
    with pytest.raises(PrivacyCIError, match="unknown document 'RMC-NOPE-001'"):
        label(Labeler(client, corpus), "RMC-NOPE-001")
    assert backend.calls == []
