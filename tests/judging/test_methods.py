"""The six methods as step chains: prompt order and filling, with a scripted test backend."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from privacy_ci.ci import Flow, Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging import (
    CI_JSON_FIELDS,
    METHODS,
    Event,
    JudgeConfig,
    Judgment,
    Method,
    build_method,
    event_from_case,
    load_prompt,
)
from privacy_ci.llm import GenerationSettings, LLMClient, LLMError, Message
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.retrieval import RetrievalQuery
from tests.judging.test_steps import EVENT, StubRetriever, small_kb

# distinctive openings of each prompt, to name the prompt a call used
PROMPTS = [
    "dp",
    "cot_auto",
    "cot_manual",
    "agent_id_generate",
    "law_filter",
    "agent_id_decide",
    "explain",
    "content_decide",
    "ci_extract",
]


def prompt_name(prompt: str) -> str:
    """The template a rendered prompt came from: the one whose fixed parts all occur in it."""
    matches = []
    for name in PROMPTS:
        template = load_prompt(name).text
        pieces = [p for p in _split_variables(template) if p.strip()]
        if all(p in prompt for p in pieces):
            matches.append((sum(len(p) for p in pieces), name))
    assert matches, prompt[:200]
    return max(matches)[1]


def _split_variables(template: str) -> list[str]:
    import re

    return re.split(r"<[a-z_]+>", template)


class Recorder:
    """A scripted model answering per prompt kind; records (prompt name, prompt)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str]] = []

    def __call__(self, messages: Sequence[Message], settings: GenerationSettings) -> str | LLMError:
        prompt = messages[-1].content
        name = prompt_name(prompt)
        self.seen.append((name, prompt))
        answer = self.answers[name]
        return answer(prompt) if callable(answer) else answer

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.seen]

    def prompts(self, name: str) -> list[str]:
        return [p for n, p in self.seen if n == name]


def make(
    method: str, answers: dict[str, Any], retriever: Any = None, **config: Any
) -> tuple[Method, Recorder]:
    recorder = Recorder(answers)
    client = LLMClient(ScriptedTestBackend(recorder), cache=None)
    pipeline = build_method(
        method, client, kb=small_kb(), config=JudgeConfig(**config), retriever=retriever
    )
    return pipeline, recorder


def judge(method: Method, event: Event = EVENT) -> Judgment:
    result: Judgment = asyncio.run(method.judge(event))
    return result


def test_method_names_and_specs() -> None:
    assert list(METHODS) == [
        "dp",
        "cot-auto",
        "cot-manual",
        "agent-id",
        "bm25-content",
        "ci-es-content",
        "ci-reasoner",  # model-free (tests/reasoning/)
        "checklist-qa",  # the facts read by a model, then the law (test_facts_qa.py)
        "flow-judge",  # Privacy Conductor V-G (tests/judging/test_flow_judge.py)
    ]
    assert [m for m in METHODS if not METHODS[m].needs_model] == ["ci-reasoner"]
    for spec in METHODS.values():
        for prompt in spec.prompts:
            load_prompt(prompt)
    with pytest.raises(PrivacyCIError, match="unknown method"):
        build_method("rag", LLMClient(ScriptedTestBackend(["x"])))


@pytest.mark.parametrize(
    ("method", "prompt"), [("dp", "dp"), ("cot-auto", "cot_auto"), ("cot-manual", "cot_manual")]
)
def test_single_prompt_methods(method: str, prompt: str) -> None:
    pipeline, rec = make(method, {prompt: "Plans: ...\nChoice: B. Permitted"})
    judgment = judge(pipeline)
    assert rec.names == [prompt]
    assert rec.seen[0][1] == load_prompt(prompt).render(event=EVENT.text)
    assert judgment.method == method and judgment.verdict is Verdict.PERMIT
    assert [s.name for s in judgment.steps] == list(METHODS[method].steps) == ["decide"]
    assert judgment.cited_ids == [] and judgment.error is None
    assert judgment.rationale == "Plans: ...\nChoice: B. Permitted"
    assert judgment.backend == "scripted-test-double:scripted"


def test_agent_id_pipeline() -> None:
    generated = (
        "Execution:\n1. - ...\nGenerated Related HIPAA Regulations:\n"
        "1. 164.502(a) - uses and disclosures\n"
        "2. 164.777(q) - invented section\n"
        "3. Section 164.512(f) - law enforcement\n"
        "4. 42 U.S.C. 1320d - not a tree id\n"
    )

    def law_filter(prompt: str) -> str:
        return "yes" if "HIPAA Regulation: 164.512(f):" in prompt else "no"

    pipeline, rec = make(
        "agent-id",
        {"agent_id_generate": generated, "law_filter": law_filter, "agent_id_decide": "Choice: B"},
    )
    judgment = judge(pipeline)
    assert rec.names == ["agent_id_generate", "law_filter", "law_filter", "agent_id_decide"]
    assert [s.name for s in judgment.steps] == ["propose_ids", "filter", "filter", "decide"]
    assert rec.seen[0][1] == load_prompt("agent_id_generate").render(
        event=EVENT.text, generated_num="5"
    )
    propose = judgment.steps[0]
    assert propose.parsed["valid"] == ["164.502(a)", "164.512(f)"]
    rejected = [r["id"] for r in propose.parsed["rejected"]]
    assert "164.777(q)" in rejected
    # one filter call per verified id, never for a rejected one
    filters = rec.prompts("law_filter")
    assert [p.split("HIPAA Regulation: ")[1].split(":")[0] for p in filters] == [
        "164.502(a)",
        "164.512(f)",
    ]
    assert not any("164.777" in p for p in filters)
    decision = rec.prompts("agent_id_decide")[0]
    assert f"Event: {EVENT.text}" in decision
    assert "HIPAA Regulations Reference: 164.512(f): PART 164" in decision
    assert "(f) Disclosures for law enforcement purposes." in decision
    assert "164.777" not in decision and "164.502(a)" not in decision
    assert judgment.cited_ids == ["164.512(f)"] and judgment.verdict is Verdict.PERMIT


def test_agent_id_all_rejected_gives_none_reference() -> None:
    pipeline, rec = make(
        "agent-id",
        {"agent_id_generate": "1. 164.999 - made up", "agent_id_decide": "Choice: C"},
    )
    judgment = judge(pipeline)
    assert rec.names == ["agent_id_generate", "agent_id_decide"]
    assert "HIPAA Regulations Reference: None\n" in rec.prompts("agent_id_decide")[0]
    assert judgment.cited_ids == [] and judgment.verdict is Verdict.NOT_APPLICABLE
    assert [s.name for s in judgment.steps] == ["propose_ids", "decide"]


def test_bm25_content_pipeline() -> None:
    stub = StubRetriever(["164.502(a)", "164.502(b)", "164.512(f)", "164.512"])
    kept = {"164.502(a)", "164.512(f)"}

    def law_filter(prompt: str) -> str:
        node = prompt.split("HIPAA Regulation: ")[1].split(":")[0]
        return "Yes, relevant." if node in kept else "No."

    pipeline, rec = make(
        "bm25-content",
        {
            "explain": "The covered entity disclosed protected health information.",
            "law_filter": law_filter,
            "content_decide": "Execution: ...\nChoice: A. Prohibited",
        },
        retriever=stub,
        k=3,
    )
    judgment = judge(pipeline)
    assert rec.names == ["explain", "law_filter", "law_filter", "law_filter", "content_decide"]
    assert [s.name for s in judgment.steps] == [
        "explain",
        "retrieve",
        "filter",
        "filter",
        "filter",
        "decide",
    ]
    assert rec.seen[0][1] == load_prompt("explain").render(event=EVENT.text)
    # the explanation is the BM25 query (section 4.2), k = 3
    assert stub.queries == [("The covered entity disclosed protected health information.", 3)]
    assert judgment.steps[1].retrieved_ids == ["164.502(a)", "164.502(b)", "164.512(f)"]
    for prompt in rec.prompts("law_filter"):
        assert f"Event: {EVENT.text}\nHIPAA Regulation: 164." in prompt
    decision = rec.prompts("content_decide")[0]
    reference = decision.split("HIPAA Regulations Reference: ")[1].split("\nLet’s complete")[0]
    lines = reference.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["164.502(a)", "164.512(f)"]
    assert lines[0].startswith("164.502(a): PART 164—SECURITY AND PRIVACY")
    assert lines[0].endswith("may not use or disclose PHI.")
    assert judgment.cited_ids == ["164.502(a)", "164.512(f)"]
    assert judgment.verdict is Verdict.PROHIBIT
    assert judgment.steps[-1].retrieved_ids == judgment.cited_ids


def test_ci_es_content_pipeline() -> None:
    stub = StubRetriever(["164.502(b)", "164.512(f)"])
    extracted = {name: "None" for name in CI_JSON_FIELDS}
    extracted.update({"Sender Role": "covered entity", "Recipient Role": "employer"})
    pipeline, rec = make(
        "ci-es-content",
        {
            "ci_extract": json.dumps(extracted),
            "law_filter": "yes",
            "content_decide": "Choice: A",
        },
        retriever=stub,
    )
    judgment = judge(pipeline, Event(text=EVENT.text))
    assert rec.names == ["ci_extract", "law_filter", "law_filter", "content_decide"]
    assert [s.name for s in judgment.steps] == [
        "extract_ci",
        "retrieve",
        "filter",
        "filter",
        "decide",
    ]
    assert rec.seen[0][1] == load_prompt("ci_extract").render(event=EVENT.text)
    query, k = stub.queries[0]
    assert isinstance(query, RetrievalQuery) and k == 5
    assert query.flow.sender.role == "covered entity" and query.flow.recipient.role == "employer"
    assert query.flow.subject.role is None
    assert judgment.cited_ids == ["164.502(b)", "164.512(f)"]
    assert "164.512(f): PART 164" in rec.prompts("content_decide")[0]


def test_ci_es_malformed_extraction_uses_case_fields() -> None:
    stub = StubRetriever(["164.502(b)"])
    pipeline, rec = make(
        "ci-es-content",
        {"ci_extract": "Sender: a doctor", "law_filter": "no", "content_decide": "Choice: B"},
        retriever=stub,
    )
    judgment = judge(pipeline)
    assert "malformed" in (judgment.steps[0].error or "")
    assert judgment.steps[0].parsed["source"] == "case"
    query = stub.queries[0][0]
    assert query.flow.sender.role == "Doctor" and query.flow.recipient.role == "Employer"
    # nothing kept: the decision sees "None"
    assert "HIPAA Regulations Reference: None\n" in rec.prompts("content_decide")[0]
    assert judgment.cited_ids == [] and judgment.verdict is Verdict.PERMIT


def test_parse_failure_of_the_decision_is_none() -> None:
    stub = StubRetriever(["164.502(a)"])
    pipeline, rec = make(
        "bm25-content",
        {"explain": "e", "law_filter": "yes", "content_decide": "It depends on the facts."},
        retriever=stub,
    )
    judgment = judge(pipeline)
    assert judgment.verdict is None and judgment.error is None
    assert judgment.steps[-1].parsed["method"] == "unparsed"
    assert rec.names.count("content_decide") == 1  # never resampled


def test_failed_call_keeps_earlier_steps() -> None:
    stub = StubRetriever(["164.502(a)", "164.502(b)"])

    def law_filter(prompt: str) -> str | LLMError:
        if "164.502(b):" in prompt:
            return LLMError("HTTP 400: context length exceeded", retryable=False)
        return "yes"

    pipeline, rec = make(
        "bm25-content",
        {"explain": "e", "law_filter": law_filter, "content_decide": "Choice: A"},
        retriever=stub,
    )
    judgment = judge(pipeline)
    assert judgment.verdict is None
    assert judgment.error is not None and "context length" in judgment.error
    assert [s.name for s in judgment.steps] == ["explain", "retrieve", "filter", "filter"]
    assert judgment.steps[0].raw_output == "e"
    assert "content_decide" not in rec.names
    assert judgment.as_dict()["error"] == judgment.error


def test_failed_first_call() -> None:
    pipeline, _ = make("cot-auto", {"cot_auto": LLMError("unauthorized", retryable=False)})
    judgment = judge(pipeline)
    assert judgment.verdict is None and "unauthorized" in (judgment.error or "")
    assert len(judgment.steps) == 1 and judgment.steps[0].error == judgment.error


def test_constrained_pipeline_settings() -> None:
    stub = StubRetriever(["164.502(a)"])
    recorder = Recorder(
        {"explain": "e", "law_filter": "yes", "content_decide": "Choice: B. Permitted"}
    )
    backend = ScriptedTestBackend(recorder)
    pipeline = build_method(
        "bm25-content",
        LLMClient(backend, cache=None),
        kb=small_kb(),
        config=JudgeConfig(constrain=True, short_max_tokens=32),
        retriever=stub,
        settings=GenerationSettings(max_tokens=400, seed=7),
    )
    judgment = judge(pipeline)
    assert judgment.verdict is Verdict.PERMIT
    explain_s, filter_s, decide_s = (s for _, s in backend.calls)
    assert explain_s.max_tokens == 32 and explain_s.grammar is None and explain_s.seed == 7
    assert filter_s.grammar is not None and '"yes"' in filter_s.grammar
    assert decide_s.grammar is not None and "Choice: " in decide_s.grammar


def test_event_from_case() -> None:
    from privacy_ci.cases import Case

    case = Case(
        id="goldcoin-real-0001",
        dataset="real",
        regulation="hipaa",
        text="A hospital sent records.",
        flow=Flow.of(sender_role="Hospital", subject_role="Patient", information_type="records"),
        label=Verdict.PERMIT,
        gold_ids=("164.506",),
    )

    event = event_from_case(case)
    assert event == Event(
        text="A hospital sent records.",
        id="goldcoin-real-0001",
        flow=Flow.of(sender_role="Hospital", subject_role="Patient", information_type="records"),
    )
