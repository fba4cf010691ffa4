"""The LangChain retriever, in-process and over HTTP: a real LCEL chain sees only the
documents the gate admits, and the service's leakage tests pass through it."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import ValidationError

from privacy_ci.adapters import AuthError, Forbidden, ValidationFailed
from privacy_ci.adapters.langchain import GatedLangChainRetriever
from privacy_ci.conductor import Corpus, Gate
from tests.adapters._gated import (
    FORGED,
    QUERIES,
    Mode,
    check_leakage,
    permitted_ids,
    token,
)

_OPENS = re.compile(r"<doc ([\w-]+)>")  # where the prompt opens a document


def _flat(docs: list[Document]) -> list[dict[str, Any]]:
    out = []
    for d in docs:
        assert d.id == d.metadata["doc_id"]
        out.append({**d.metadata, "content": d.page_content})
    return out


def test_a_chain_sees_only_admitted_documents(mode: Mode, corpus: Corpus, gate: Gate) -> None:
    permitted = permitted_ids(corpus, gate)
    retriever = GatedLangChainRetriever(source=mode.source(), k=5)
    prompts: list[str] = []

    def model(prompt: PromptValue) -> str:  # records what reached the "model"
        text = prompt.to_string()
        prompts.append(text)
        return "cited: " + ", ".join(_OPENS.findall(text))

    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the documents."), ("human", "{context}\n\nQ: {question}")]
    )
    context = retriever | RunnableLambda(
        lambda docs: "\n\n".join(f"<doc {d.id}>\n{d.page_content}" for d in docs)
    )
    chain = {"context": context, "question": RunnablePassthrough()} | prompt | RunnableLambda(model)

    answer = chain.invoke("lipid panel cholesterol")
    assert answer.startswith("cited: RMC-LAB-003")
    for question in QUERIES:
        chain.invoke(question)
    assert len(prompts) == 1 + len(QUERIES)
    reached = {i for p in prompts for i in _OPENS.findall(p)}
    assert reached and reached <= permitted
    # the async path of the chain goes through the same gate
    assert asyncio.run(chain.ainvoke("lipid panel cholesterol")) == answer


def test_documents_carry_their_ids_and_decisions(mode: Mode) -> None:
    docs = GatedLangChainRetriever(source=mode.source(), k=3).invoke("lipid panel cholesterol")
    assert docs[0].id == "RMC-LAB-003" and len(docs) == 3
    meta = docs[0].metadata
    assert (meta["decision"], meta["rule"], meta["requester"], meta["role"]) == (
        "permit",
        "permit",
        "D01",
        "Doctor",
    )
    assert meta["policy_version"].startswith("sha256:") and meta["label_version"] >= 1
    assert len({d.metadata["request_id"] for d in docs}) == 1


def test_the_services_leakage_tests_through_langchain(
    mode: Mode, corpus: Corpus, gate: Gate
) -> None:
    retriever = GatedLangChainRetriever(source=mode.source(), k=10)
    check_leakage(
        lambda q: _flat(retriever.invoke(q)),
        retriever.source.decide,
        mode.store,
        corpus,
        permitted_ids(corpus, gate),
    )


def test_bad_input(mode: Mode) -> None:
    with pytest.raises(AuthError, match="signature"):
        GatedLangChainRetriever(source=mode.source(FORGED)).invoke("lipid")
    with pytest.raises(Forbidden, match="unknown agent 'GHOST'"):
        GatedLangChainRetriever(source=mode.source(token("GHOST", "Doctor", "Medical"))).invoke("x")
    retriever = GatedLangChainRetriever(source=mode.source())
    with pytest.raises(ValidationFailed, match="query: String should have at least 1"):
        retriever.invoke("")
    for k in (0, 101):
        with pytest.raises(ValidationError, match="k"):
            GatedLangChainRetriever(source=retriever.source, k=k)
    with pytest.raises(ValidationError, match="source"):
        GatedLangChainRetriever(source="http://127.0.0.1:8000")
