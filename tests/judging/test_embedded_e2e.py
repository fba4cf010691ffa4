"""Every method end to end with the embedded local model on real GoldCoin cases.

This checks wiring and parsing (each prompt reaches the model, constrained answers
parse, ids flow from retrieval through the filter to the decision), never accuracy:
a 135M model answers legal cases at about chance. Kept short: the two shortest real
cases, k = 1, one proposed id, 200-character references and 24-token free text (the
unit tests cover several candidates per filter).
Skips when llama_cpp, the GGUF file or the data are missing.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.judging import (
    METHODS,
    Event,
    JudgeConfig,
    Judgment,
    build_method,
    event_from_case,
)
from privacy_ci.llm import EmbeddedBackend, LLMClient

# llama.cpp's OpenMP threads spin while they wait; on a busy 2-core machine that makes
# prompt evaluation several times slower. Set before llama_cpp loads (it is imported
# lazily, after collection), this only changes how idle threads wait.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

CASES = 2
CONFIG = JudgeConfig(
    k=1,
    generated_num=1,
    reference_chars=200,
    short_max_tokens=24,
    ci_field_chars=16,
    ci_max_tokens=128,
)
TIMINGS: dict[str, list[float]] = {}


def _skip_reason() -> str | None:
    from privacy_ci.llm.testing import embedded_unavailable_reason

    return embedded_unavailable_reason()


@pytest.fixture(scope="module")
def setup(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    mp = pytest.MonkeyPatch()
    mp.setenv("PRIVACY_CI_DATA", str(shared_data))
    mp.setenv("PRIVACY_CI_CACHE", str(tmp_path_factory.mktemp("cache")))
    from privacy_ci.cases import load_dataset
    from privacy_ci.knowledge import load_knowledge_base

    kb = load_knowledge_base("hipaa")
    cases = sorted(load_dataset("real").cases, key=lambda c: (len(c.text), c.id))[:CASES]
    # One in-process model; prefix reuse (the law-filter prompts of a case share all
    # but their last lines) roughly halves their prompt evaluation. Outputs may then
    # depend on the previous call, which does not matter for a wiring test.
    client = LLMClient(EmbeddedBackend(reuse_prefix=True), cache=None, concurrency=1)
    yield {"kb": kb, "events": [event_from_case(c) for c in cases], "client": client}
    mp.undo()
    for method, times in TIMINGS.items():
        print(f"\n{method:14} " + "  ".join(f"{t:6.1f}s" for t in times))


def _judge(method: str, setup: dict[str, Any], **kwargs: Any) -> list[Judgment]:
    client: LLMClient = setup["client"]
    pipeline = build_method(method, client, kb=setup["kb"], config=CONFIG, **kwargs)
    out = []
    for event in setup["events"]:
        start = time.perf_counter()
        out.append(asyncio.run(pipeline.judge(event)))
        TIMINGS.setdefault(method, []).append(time.perf_counter() - start)
    return out


def _check_common(judgment: Judgment, method: str, event: Event) -> None:
    assert judgment.error is None, judgment.error
    assert judgment.method == method
    assert judgment.backend == "embedded:smollm2-135m-instruct"
    decide = judgment.steps[-1]
    assert decide.name == "decide" and decide.error is None
    assert decide.raw_output.startswith("Choice: ")  # the grammar
    assert judgment.verdict is not None and judgment.rationale == decide.raw_output
    assert event.text in decide.prompt
    for step in judgment.steps:
        if step.prompt_name is not None:
            assert step.prompt_tokens > 0 and step.latency_s > 0 and not step.cached


def _check_filter(judgment: Judgment, candidates: list[str]) -> None:
    filters = [s for s in judgment.steps if s.name == "filter"]
    assert [s.retrieved_ids[0] for s in filters] == candidates
    for step in filters:
        assert step.raw_output in ("yes", "no", "NONE")  # constrained
        assert step.error is None
    kept = [s.retrieved_ids[0] for s in filters if s.parsed["relevant"]]
    assert judgment.cited_ids == kept
    decide = judgment.steps[-1]
    assert decide.retrieved_ids == kept
    reference = decide.prompt.split("HIPAA Regulations Reference: ")[1].split("\nLet’s complete")[0]
    if kept:
        assert [line.split(": ")[0] for line in reference.splitlines()] == kept
    else:
        assert reference == "None"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dp", "cot-auto", "cot-manual"])
def test_single_prompt_methods(method: str, setup: dict[str, Any]) -> None:
    for event, judgment in zip(setup["events"], _judge(method, setup), strict=True):
        _check_common(judgment, method, event)
        assert [s.name for s in judgment.steps] == ["decide"]


@pytest.mark.slow
def test_agent_id(setup: dict[str, Any]) -> None:
    tree = setup["kb"].tree
    for event, judgment in zip(setup["events"], _judge("agent-id", setup), strict=True):
        _check_common(judgment, "agent-id", event)
        propose = judgment.steps[0]
        assert propose.name == "propose_ids" and propose.prompt_name == "agent_id_generate"
        valid = propose.parsed["valid"]
        assert len(valid) <= CONFIG.generated_num and all(v in tree for v in valid)
        rejected = {r["id"] for r in propose.parsed["rejected"]}
        assert not rejected & set(judgment.steps[-1].retrieved_ids)
        _check_filter(judgment, valid)


@pytest.mark.slow
def test_bm25_content(setup: dict[str, Any]) -> None:
    for event, judgment in zip(setup["events"], _judge("bm25-content", setup), strict=True):
        _check_common(judgment, "bm25-content", event)
        explain, retrieve = judgment.steps[:2]
        assert explain.name == "explain" and explain.completion_tokens <= CONFIG.short_max_tokens
        assert retrieve.name == "retrieve" and retrieve.parsed["retriever"] == "bm25-paper"
        assert len(retrieve.retrieved_ids) == CONFIG.k
        _check_filter(judgment, retrieve.retrieved_ids)


@pytest.mark.slow
def test_ci_es_content(setup: dict[str, Any]) -> None:
    from privacy_ci.retrieval import ModelUnavailableError, RoleKeywordRetriever

    try:
        retriever = RoleKeywordRetriever(setup["kb"])
    except (ModelUnavailableError, ImportError) as exc:
        pytest.skip(f"no embedding model for the role-keyword retriever: {exc}")
    judgments = _judge("ci-es-content", setup, retriever=retriever)
    for event, judgment in zip(setup["events"], judgments, strict=True):
        _check_common(judgment, "ci-es-content", event)
        extract, retrieve = judgment.steps[:2]
        assert extract.name == "extract_ci" and extract.parsed["source"] in ("model", "case")
        assert set(extract.parsed["ci"]) == {
            "sender",
            "sender_role",
            "recipient",
            "recipient_role",
            "subject",
            "subject_role",
            "information_type",
            "consent_form",
            "purpose",
        }
        assert retrieve.name == "retrieve" and len(retrieve.retrieved_ids) <= CONFIG.k
        _check_filter(judgment, retrieve.retrieved_ids)


def test_every_method_is_covered() -> None:
    assert set(METHODS) == {
        "dp",
        "cot-auto",
        "cot-manual",
        "agent-id",
        "bm25-content",
        "ci-es-content",
        "flow-judge",  # on PrivaCI-Bench cases: test_flow_judge.py
        "ci-reasoner",  # no model: tests/reasoning/
        "checklist-qa",  # with the embedded model: tests/judging/test_facts_qa.py
    }
