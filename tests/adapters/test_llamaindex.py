"""The LlamaIndex retriever, in-process and over HTTP: a real query engine synthesises
only from the documents the gate admits, and the service's leakage tests pass through it."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore
from pydantic import Field

from privacy_ci.adapters import AuthError, Forbidden, ValidationFailed
from privacy_ci.adapters.llamaindex import GatedLlamaIndexRetriever
from privacy_ci.conductor import Corpus, Gate
from privacy_ci.errors import PrivacyCIError
from tests.adapters._gated import (
    FORGED,
    QUERIES,
    Mode,
    check_leakage,
    permitted_ids,
    token,
)

_OPENS = re.compile(r"^doc_id: ([\w-]+)$", re.MULTILINE)  # where the prompt opens a node


class RecordingLLM(CustomLLM):
    """A LlamaIndex LLM that records its prompts and answers with the ids it was shown."""

    prompts: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=100_000, num_output=64, model_name="recording")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text="shown: " + ", ".join(_OPENS.findall(prompt)))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def _flat(nodes: list[NodeWithScore]) -> list[dict[str, Any]]:
    out = []
    for n in nodes:
        assert n.node.node_id == n.node.metadata["doc_id"] and n.score == n.node.metadata["score"]
        out.append({**n.node.metadata, "content": n.node.get_content()})
    return out


def test_a_query_engine_sees_only_admitted_documents(
    mode: Mode, corpus: Corpus, gate: Gate
) -> None:
    permitted = permitted_ids(corpus, gate)
    llm = RecordingLLM()
    retriever = GatedLlamaIndexRetriever(mode.source(), k=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
    response = engine.query("lipid panel cholesterol")
    sources = [n.node.node_id for n in response.source_nodes]
    assert sources[0] == "RMC-LAB-003" and len(sources) == 5
    assert str(response) == "shown: " + ", ".join(sources)
    for question in QUERIES:
        engine.query(question)
    reached = {i for p in llm.prompts for i in _OPENS.findall(p)}
    assert reached and reached <= permitted
    # only the id and the title reach the model with the text; the decision does not
    assert "title: Lipid panel - Aiko Tanaka" in llm.prompts[0]
    assert "policy_version" not in llm.prompts[0] and "request_id" not in llm.prompts[0]
    node = response.source_nodes[0].node
    assert "policy_version" not in node.get_content(metadata_mode=MetadataMode.EMBED)
    # the async path goes through the same gate
    again = asyncio.run(engine.aquery("lipid panel cholesterol"))
    assert [n.node.node_id for n in again.source_nodes] == sources


def test_the_services_leakage_tests_through_llamaindex(
    mode: Mode, corpus: Corpus, gate: Gate
) -> None:
    retriever = GatedLlamaIndexRetriever(mode.source(), k=10)
    check_leakage(
        lambda q: _flat(retriever.retrieve(q)),
        retriever.source.decide,
        mode.store,
        corpus,
        permitted_ids(corpus, gate),
    )


def test_bad_input(mode: Mode) -> None:
    with pytest.raises(AuthError, match="signature"):
        GatedLlamaIndexRetriever(mode.source(FORGED)).retrieve("lipid")
    with pytest.raises(Forbidden, match="does not hold role 'Nurse'"):
        GatedLlamaIndexRetriever(mode.source(token("D01", "Nurse", "Medical"))).retrieve("x")
    retriever = GatedLlamaIndexRetriever(mode.source())
    with pytest.raises(ValidationFailed, match="query: String should have at least 1"):
        retriever.retrieve("")
    for k in (0, 101, "5", True):
        with pytest.raises(PrivacyCIError, match="k must be an integer between 1 and 100"):
            GatedLlamaIndexRetriever(retriever.source, k=k)  # type: ignore[arg-type]
