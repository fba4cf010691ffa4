"""The judging steps, one at a time, with a scripted test backend and a small tree."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from privacy_ci.ci import Flow, Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging import (
    CI_JSON_FIELDS,
    Event,
    JudgeConfig,
    PipelineContext,
    PipelineState,
    ci_schema,
    decide,
    explain,
    extract_ci,
    filter_rules,
    format_reference,
    format_references,
    id_list_grammar,
    load_prompt,
    propose_ids,
    retrieve,
    run_steps,
    truncate_text,
)
from privacy_ci.knowledge import KnowledgeBase
from privacy_ci.llm import Capabilities, GenerationSettings, LLMClient, LLMError, Message
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.regulations import NodeKind, RegulationTree, TreeBuilder
from privacy_ci.retrieval import Hit, RetrievalError, RetrievalQuery

EVENT = Event(
    text="Dr. Reed emailed Ann's lab results to Ann's employer without asking her.",
    id="ev-1",
    flow=Flow.of(sender_role="Doctor", recipient_role="Employer", subject_role="Patient"),
)


def small_kb() -> KnowledgeBase:
    """HIPAA -> Part 164 -> 164.502 -> (a), (b); 164.512 -> (f)."""
    b = TreeBuilder("hipaa", "HIPAA", "small")
    b.add("164", "HIPAA", "PART 164—SECURITY AND PRIVACY", NodeKind.PART)
    b.add(
        "164.502",
        "164",
        "§ 164.502 Uses and disclosures of protected health information.",
        NodeKind.SECTION,
    )
    b.add("164.502(a)", "164.502", "(a) Standard. A covered entity may not use or disclose PHI.")
    b.add("164.502(b)", "164.502", "(b) Minimum necessary. Limit PHI to the minimum necessary.")
    b.add(
        "164.512",
        "164",
        "§ 164.512 Uses and disclosures for which no authorization is needed.",
        NodeKind.SECTION,
    )
    b.add("164.512(f)", "164.512", "(f) Disclosures for law enforcement purposes.")
    tree: RegulationTree = b.build()
    return KnowledgeBase(regulation="hipaa", tree=tree, norms={})


Answer = Callable[[str, GenerationSettings], "str | LLMError"]


def scripted(answer: Answer) -> tuple[LLMClient, ScriptedTestBackend]:
    def script(messages: Sequence[Message], settings: GenerationSettings) -> str | LLMError:
        return answer(messages[-1].content, settings)

    backend = ScriptedTestBackend(script)
    return LLMClient(backend, cache=None, concurrency=3), backend


def ctx_for(answer: Answer, **config: Any) -> tuple[PipelineContext, ScriptedTestBackend]:
    client, backend = scripted(answer)
    return PipelineContext(client=client, config=JudgeConfig(**config), kb=small_kb()), backend


def run(step: Any, state: PipelineState, ctx: PipelineContext) -> PipelineState:
    result: PipelineState = asyncio.run(step(state, ctx))
    return result


def prompt_name_of(prompt: str) -> str:
    """Which template a rendered prompt came from (by its distinctive opening)."""
    for name in ("law_filter", "explain", "ci_extract", "agent_id_generate", "content_decide"):
        head = load_prompt(name).text.split("<")[0][:60]
        if prompt.startswith(head):
            return name
    return "other"


class StubRetriever:
    """Returns fixed hits and records the queries it saw."""

    name = "stub"

    def __init__(self, ids: Sequence[str], fail: Exception | None = None) -> None:
        self.ids = list(ids)
        self.fail = fail
        self.queries: list[tuple[Any, int]] = []

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        self.queries.append((query, k))
        if self.fail is not None:
            raise self.fail
        return [Hit(i, 10.0 - n) for n, i in enumerate(self.ids[:k])]


# ---------------------------------------------------------------------------------
# formatting and configuration
# ---------------------------------------------------------------------------------
def test_truncate_keeps_head_and_tail() -> None:
    text = "HEAD " + "x" * 500 + " TAIL"
    cut = truncate_text(text, 100)
    assert len(cut) <= 100
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and "[…]" in cut
    assert truncate_text("short", 100) == "short"


def test_references_are_id_colon_full_specification() -> None:
    kb = small_kb()
    line = format_reference(kb, "164.502(b)", 1000)
    assert line.startswith("164.502(b): PART 164")
    assert "§ 164.502 Uses" in line and line.endswith("minimum necessary.")
    config = JudgeConfig(reference_chars=60)
    both = format_references(kb, ["164.502(a)", "164.512(f)"], config)
    lines = both.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["164.502(a)", "164.512(f)"]
    assert all(len(ln) <= len("164.502(a): ") + 60 for ln in lines)
    assert format_references(kb, [], config) == "None"


def test_config_validation() -> None:
    with pytest.raises(PrivacyCIError, match="k must be"):
        JudgeConfig(k=0)
    with pytest.raises(PrivacyCIError, match="unknown retriever"):
        JudgeConfig(retriever="tfidf")
    with pytest.raises(PrivacyCIError, match="reference_chars"):
        JudgeConfig(reference_chars=10)


def test_constraining_is_automatic_for_the_embedded_provider() -> None:
    ctx, backend = ctx_for(lambda p, s: "x")
    assert not ctx.constrained  # the scripted backend does not ask for it
    backend.capabilities = Capabilities(backend.capabilities.features, constrain_by_default=True)
    assert ctx.constrained  # a backend that does (the embedded model)
    ctx.config = JudgeConfig(constrain=False)
    assert not ctx.constrained


# ---------------------------------------------------------------------------------
# decide
# ---------------------------------------------------------------------------------
def test_decide_fills_event_and_parses() -> None:
    ctx, backend = ctx_for(lambda p, s: "Execution: ...\nChoice: A. Prohibited")
    state = run(decide("dp"), PipelineState(EVENT), ctx)
    assert state.decision is not None and state.decision.verdict is Verdict.PROHIBIT
    (record,) = state.steps
    assert record.name == "decide" and record.prompt_name == "dp"
    assert record.prompt == load_prompt("dp").render(event=EVENT.text)
    assert record.parsed == {
        "verdict": "prohibit",
        "method": "choice",
        "evidence": "Choice: A. Prohibited",
    }
    assert record.prompt_tokens > 0 and record.completion_tokens > 0 and record.error is None
    assert backend.calls[0][1].grammar is None  # not constrained


def test_decide_with_references_and_with_none() -> None:
    ctx, _ = ctx_for(lambda p, s: "Choice: B")
    state = PipelineState(EVENT, kept=["164.512(f)"])
    state = run(decide("content_decide"), state, ctx)
    prompt = state.steps[0].prompt
    assert f"Event: {EVENT.text}" in prompt
    assert "HIPAA Regulations Reference: 164.512(f): PART 164" in prompt
    assert state.steps[0].retrieved_ids == ["164.512(f)"]
    state = run(decide("content_decide"), PipelineState(EVENT), ctx)
    assert "HIPAA Regulations Reference: None\n" in state.steps[0].prompt


def test_decide_parse_failure_is_recorded_not_resampled() -> None:
    ctx, backend = ctx_for(lambda p, s: "I cannot tell.")
    state = run(decide("cot_manual"), PipelineState(EVENT), ctx)
    assert state.decision is not None and state.decision.verdict is None
    assert state.error is None
    assert "parse failure" in (state.steps[0].error or "")
    assert len(backend.calls) == 1
    judgment = state.to_judgment("cot-manual", ctx.backend)
    assert (
        judgment.verdict is None
        and judgment.error is None
        and judgment.rationale == "I cannot tell."
    )


def test_decide_constrained_uses_the_choice_grammar() -> None:
    ctx, backend = ctx_for(lambda p, s: "Choice: C. Not related", constrain=True)
    state = run(decide("dp"), PipelineState(EVENT), ctx)
    settings = backend.calls[0][1]
    assert settings.grammar is not None and settings.max_tokens == 16
    for option in ("Choice: ", "A. Prohibited", "B. Permitted", "C. Not related"):
        assert json.dumps(option)[1:-1] in settings.grammar
    assert state.decision is not None and state.decision.verdict is Verdict.NOT_APPLICABLE


def test_decide_failed_call_sets_error() -> None:
    ctx, _ = ctx_for(lambda p, s: LLMError("boom", retryable=False))
    state = run(decide("dp"), PipelineState(EVENT), ctx)
    assert state.error is not None and "boom" in state.error
    assert state.steps[0].error == state.error
    assert state.to_judgment("dp", ctx.backend).verdict is None


def test_unknown_prompt_fails_early() -> None:
    with pytest.raises(PrivacyCIError, match="no prompt"):
        decide("nope")


# ---------------------------------------------------------------------------------
# explain and retrieve
# ---------------------------------------------------------------------------------
def test_explain_sets_explanation_and_is_short_when_constrained() -> None:
    ctx, backend = ctx_for(lambda p, s: "  The covered entity disclosed PHI.  ", constrain=True)
    state = run(explain, PipelineState(EVENT), ctx)
    assert state.explanation == "The covered entity disclosed PHI."
    assert state.steps[0].prompt == load_prompt("explain").render(event=EVENT.text)
    assert backend.calls[0][1].max_tokens == 64 and backend.calls[0][1].grammar is None


def test_retrieve_from_explanation_event_and_ci() -> None:
    ctx, _ = ctx_for(lambda p, s: "")
    stub = StubRetriever(["164.502(a)", "164.512(f)", "164.502(b)"])
    state = PipelineState(EVENT, explanation="covered entity disclosure")
    state = run(retrieve(stub, 2, query_from="explanation"), state, ctx)
    assert stub.queries[-1] == ("covered entity disclosure", 2)
    assert state.candidates == ["164.502(a)", "164.512(f)"]
    record = state.steps[-1]
    assert record.name == "retrieve" and record.retrieved_ids == state.candidates
    assert record.parsed["retriever"] == "stub" and record.parsed["k"] == 2
    # an empty explanation falls back to the event text, noted
    state = run(retrieve(stub, 1, query_from="explanation"), PipelineState(EVENT), ctx)
    assert stub.queries[-1] == (EVENT.text, 1)
    assert "empty explanation" in state.steps[-1].parsed["note"]
    # CI: the extracted roles, else the event's own
    state = PipelineState(EVENT, ci=Flow.of(sender_role="Covered entity", purpose="treatment"))
    run(retrieve(stub, query_from="ci"), state, ctx)
    query, k = stub.queries[-1]
    assert k == 5 and isinstance(query, RetrievalQuery)
    assert (
        query.flow.sender.role == "Covered entity" and query.flow.principle.purpose == "treatment"
    )
    assert query.flow.recipient.role is None and query.text == EVENT.text
    run(retrieve(stub, query_from="ci"), PipelineState(EVENT), ctx)
    assert stub.queries[-1][0].flow.recipient.role == "Employer"


def test_retriever_built_lazily_once() -> None:
    ctx, _ = ctx_for(lambda p, s: "")
    built: list[int] = []

    def factory(c: PipelineContext) -> StubRetriever:
        built.append(1)
        return StubRetriever(["164.502(a)"])

    step = retrieve(factory)
    run(step, PipelineState(EVENT), ctx)
    run(step, PipelineState(EVENT), ctx)
    assert built == [1]


def test_retrieval_error_stops_but_empty_query_does_not() -> None:
    ctx, _ = ctx_for(lambda p, s: "")
    state = run(
        retrieve(StubRetriever([], RetrievalError("index broken"))), PipelineState(EVENT), ctx
    )
    assert state.error is not None and "index broken" in state.error
    from privacy_ci.retrieval import EmptyQueryError

    state = run(retrieve(StubRetriever([], EmptyQueryError("empty"))), PipelineState(EVENT), ctx)
    assert state.error is None and state.candidates == []
    assert "empty query" in (state.steps[-1].error or "")


# ---------------------------------------------------------------------------------
# filter
# ---------------------------------------------------------------------------------
def test_filter_once_per_candidate_keeps_yes_only() -> None:
    answers = {
        "164.502(a)": "Yes. The regulation governs disclosures.",
        "164.502(b)": "no, unrelated",
        "164.512(f)": "NONE",
        "164.512": "The moon is made of cheese.",
    }

    def answer(prompt: str, settings: GenerationSettings) -> str:
        assert prompt_name_of(prompt) == "law_filter"
        (node_id,) = [i for i in answers if f"HIPAA Regulation: {i}:" in prompt]
        return answers[node_id]

    ctx, backend = ctx_for(answer)
    state = PipelineState(EVENT, candidates=list(answers))
    state = run(filter_rules, state, ctx)
    assert len(backend.calls) == 4
    assert state.kept == ["164.502(a)"]
    assert [r.retrieved_ids for r in state.steps] == [[i] for i in answers]
    assert all(r.name == "filter" and r.prompt_name == "law_filter" for r in state.steps)
    by_id = {r.retrieved_ids[0]: r for r in state.steps}
    assert by_id["164.512(f)"].parsed["none"] is True and by_id["164.512(f)"].error is None
    assert "unparseable" in (by_id["164.512"].error or "")
    assert by_id["164.512"].parsed["relevant"] is False
    prompt = by_id["164.502(b)"].prompt
    assert f"Event: {EVENT.text}" in prompt
    assert "HIPAA Regulation: 164.502(b): PART 164" in prompt and "minimum necessary." in prompt


def test_filter_constrained_grammar_and_no_candidates() -> None:
    ctx, backend = ctx_for(lambda p, s: "yes", constrain=True)
    state = run(filter_rules, PipelineState(EVENT, candidates=["164.502(a)"]), ctx)
    assert state.kept == ["164.502(a)"]
    grammar = backend.calls[0][1].grammar or ""
    assert '"yes"' in grammar and '"no"' in grammar and '"NONE"' in grammar
    state = run(filter_rules, PipelineState(EVENT), ctx)
    assert state.kept == [] and state.steps == [] and len(backend.calls) == 1


def test_filter_failure_stops_with_all_records() -> None:
    def answer(prompt: str, settings: GenerationSettings) -> str | LLMError:
        if "164.502(b):" in prompt:
            return LLMError("server down", retryable=False)
        return "yes"

    ctx, _ = ctx_for(answer)
    state = run(filter_rules, PipelineState(EVENT, candidates=["164.502(a)", "164.502(b)"]), ctx)
    assert state.error is not None and "server down" in state.error
    assert len(state.steps) == 2 and state.kept == []


# ---------------------------------------------------------------------------------
# Agent-ID
# ---------------------------------------------------------------------------------
def test_propose_ids_verifies_and_records_rejections() -> None:
    text = (
        "Execution: ...\nGenerated Related HIPAA Regulations:\n"
        "1. 164.502(a) - Standard\n2. 164.999(z) - invented\n3. 45 CFR 164.512(f) - law enforcement\n"
        "4. 164.502(b) - minimum necessary\n"
    )
    ctx, backend = ctx_for(lambda p, s: text, generated_num=2)
    state = run(propose_ids, PipelineState(EVENT), ctx)
    (record,) = state.steps
    assert record.prompt == load_prompt("agent_id_generate").render(
        event=EVENT.text, generated_num="2"
    )
    assert state.candidates == ["164.502(a)", "164.512(f)"]
    assert record.parsed["over_limit"] == ["164.502(b)"]
    assert [r["id"] for r in record.parsed["rejected"]] == ["164.999(z)"]
    assert record.retrieved_ids == state.candidates
    assert backend.calls[0][1].grammar is None


def test_propose_ids_constrained_grammar() -> None:
    ctx, backend = ctx_for(lambda p, s: "1. 164.502(a)\n", constrain=True, generated_num=3)
    state = run(propose_ids, PipelineState(EVENT), ctx)
    assert state.candidates == ["164.502(a)"]
    settings = backend.calls[0][1]
    # the tree's sections are the only section numbers the grammar allows
    assert settings.grammar == id_list_grammar(3, ["164.502", "164.512"])
    assert '"164.502" | "164.512"' in settings.grammar and settings.max_tokens == 72


@pytest.mark.parametrize("sections", [(), ("164.502", "160.103", "Article 6")])
def test_id_list_grammar_constrains_the_embedded_model(sections: tuple[str, ...]) -> None:
    from privacy_ci.llm import user
    from privacy_ci.llm._embedded import EmbeddedBackend, default_model_path, llama_cpp_available

    text = id_list_grammar(3, sections)
    assert text.startswith("root ::= item{1,3}\n")
    if not llama_cpp_available():
        pytest.skip("llama_cpp is not installed")
    try:
        default_model_path()
    except PrivacyCIError:
        pytest.skip("the SmolLM2 GGUF is not installed")
    out = EmbeddedBackend().complete_sync(
        [user("List the HIPAA sections about disclosures.")],
        GenerationSettings(max_tokens=120),
        grammar=text,  # llama.cpp rejects an invalid grammar (LLMError)
    )
    section = "|".join(re.escape(x) for x in sections) or r"16[024]\.\d{3,4}"
    line = re.compile(rf"[1-9]\. (?:{section})(?:\([a-z0-9]{{1,3}}\)){{0,3}}")
    lines = out.text.splitlines()
    assert 1 <= len(lines) <= 3 and all(line.fullmatch(x) for x in lines), out.text


# ---------------------------------------------------------------------------------
# CI extraction
# ---------------------------------------------------------------------------------
def test_extract_ci_structured_output() -> None:
    value = {name: "None" for name in CI_JSON_FIELDS}
    value.update({"Sender Role": "Doctor", "Recipient Role": " employer ", "Purpose": "employment"})
    ctx, backend = ctx_for(lambda p, s: json.dumps(value))
    state = run(extract_ci, PipelineState(Event(text=EVENT.text)), ctx)
    assert state.ci_source == "model" and state.ci is not None
    assert state.ci.get("sender_role") == "Doctor" and state.ci.get("recipient_role") == "employer"
    assert state.ci.get("subject_role") is None and state.ci.get("purpose") == "employment"
    settings = backend.calls[0][1]
    assert settings.json_schema == ci_schema() and settings.grammar is None
    assert state.steps[0].prompt == load_prompt("ci_extract").render(event=EVENT.text)
    assert state.steps[0].error is None


def test_extract_ci_malformed_falls_back_to_case_fields() -> None:
    ctx, _ = ctx_for(lambda p, s: '{"Sender Role": "Doc')
    state = run(extract_ci, PipelineState(EVENT), ctx)
    assert state.ci_source == "case" and state.ci is not None
    assert state.ci.get("sender_role") == "Doctor" and state.ci.get("recipient_role") == "Employer"
    assert "malformed" in (state.steps[0].error or "") and state.error is None
    state = run(extract_ci, PipelineState(Event(text="x")), ctx)
    assert state.ci_source == "none"
    ctx, _ = ctx_for(lambda p, s: '["a list"]')
    state = run(extract_ci, PipelineState(EVENT), ctx)
    assert state.ci_source == "case" and "expected a JSON object" in (state.steps[0].error or "")


def test_extract_ci_constrained_schema_has_max_length() -> None:
    ctx, backend = ctx_for(lambda p, s: "{}", constrain=True, ci_field_chars=20)
    run(extract_ci, PipelineState(EVENT), ctx)
    settings = backend.calls[0][1]
    assert settings.json_schema is not None
    assert settings.json_schema["properties"]["Purpose"] == {"type": "string", "maxLength": 20}
    assert settings.max_tokens == 256


# ---------------------------------------------------------------------------------
# chains
# ---------------------------------------------------------------------------------
def test_run_steps_stops_at_the_first_failure() -> None:
    def answer(prompt: str, settings: GenerationSettings) -> str | LLMError:
        if prompt_name_of(prompt) == "explain":
            return LLMError("timeout", retryable=False)
        return "Choice: A"

    ctx, backend = ctx_for(answer)
    state = asyncio.run(run_steps([explain, decide("dp")], PipelineState(EVENT), ctx))
    assert [r.name for r in state.steps] == ["explain"] and len(backend.calls) == 1
    judgment = state.to_judgment("x", ctx.backend)
    assert judgment.error is not None and judgment.verdict is None and len(judgment.steps) == 1
    assert judgment.backend == "scripted-test-double:scripted"


def test_decide_parse_failure_notes_a_cut_answer() -> None:
    from privacy_ci.llm import Completion, FinishReason

    class Cut(ScriptedTestBackend):
        async def complete(
            self, messages: Sequence[Message], settings: GenerationSettings
        ) -> Completion:
            completion = await super().complete(messages, settings)
            completion.finish_reason = FinishReason.LENGTH
            return completion

    client = LLMClient(Cut(["Plans: plan 1 - identify the"]), cache=None)
    ctx = PipelineContext(client=client, settings=GenerationSettings(max_tokens=8))
    state = run(decide("cot_auto"), PipelineState(EVENT), ctx)
    assert state.decision is not None and state.decision.verdict is None
    assert state.steps[0].error == (
        "parse failure: the answer holds no recognisable choice (cut at max_tokens=8)"
    )
