"""The labeling experiment end to end with the embedded local model (SmolLM2-135M).

Wiring, not accuracy: the paper's prompts and the label schema reach a real model
through llama.cpp's JSON-schema grammar, and each (document, draw) comes back as a
valid label or as an explicit failure with every attempt's raw output. Two short
documents, one draw. Skips when llama_cpp or the GGUF file is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from privacy_ci.conductor import Corpus
from privacy_ci.labeling import (
    Labeler,
    analyze_run,
    load_labeling_run,
    parse_proposed,
    run_labeling,
)
from privacy_ci.llm import GenerationSettings, LLMClient

# llama.cpp's OpenMP threads spin while they wait (see tests/judging/test_embedded_e2e.py).
os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def _skip_reason() -> str | None:
    from privacy_ci.llm.testing import embedded_unavailable_reason

    return embedded_unavailable_reason()


@pytest.mark.slow
def test_two_documents_one_draw_with_the_embedded_model(corpus: Corpus, tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    from privacy_ci.llm import EmbeddedBackend

    client = LLMClient(EmbeddedBackend(), cache=None, concurrency=1)
    # a short completion budget keeps the test quick; a label fits in about 60 tokens
    labeler = Labeler(client, corpus, settings=GenerationSettings(max_tokens=160))
    docs = sorted(corpus.labels.ids, key=lambda d: (len(labeler.prompt_for(d)), d))[:2]
    run = asyncio.run(run_labeling(labeler, tmp_path / "run", draws=1, doc_ids=docs))

    assert run.backend == "embedded:smollm2-135m-instruct"
    assert sorted(r.doc_id for r in run.records) == sorted(docs)
    for record in run.records:
        assert record.draw == 1 and record.backend == run.backend
        assert 1 <= len(record.attempts) <= 3
        for attempt in record.attempts:
            assert attempt["error"] is None  # the model ran; only the output may be off
            assert attempt["prompt_tokens"] > 0 and attempt["completion_tokens"] > 0
            assert isinstance(attempt["text"], str) and attempt["text"]
        if record.ok:
            assert record.failure is None
            # the label is in the policy's vocabulary, and it is the last attempt's text
            again = parse_proposed(json.loads(record.attempts[-1]["text"]), corpus.policy)
            assert again == record.proposed
            assert all(a["parse_error"] for a in record.attempts[:-1])
        else:
            assert record.proposed is None and len(record.attempts) == 3
            assert record.failure and record.failure.startswith("output does not fit")
            assert all(a["parse_error"] for a in record.attempts)
    # the folder reads back the same, and is analysed as a (partial) real-model run
    assert load_labeling_run(tmp_path / "run").records == run.records
    report = analyze_run(run, corpus, allow_partial=True)
    assert report.test_double is False and report.conformance.failures >= 103
    print("\n" + "\n".join(f"{r.doc_id}: {r.proposed or r.failure}" for r in run.records))
