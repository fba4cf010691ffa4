"""Helpers for the knowledge base build tests: a scripted annotator that answers Table 5
with the published annotation of each leaf (known answers).

Every backend here is `ScriptedTestBackend` (provider ``scripted-test-double``), so no
number these tests produce can pass for a model's.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from privacy_ci.annotation import (
    AnnotationRun,
    Annotator,
    run_annotation,
    select_leaves,
    write_kb_folder,
)
from privacy_ci.knowledge import KnowledgeBase, Norm, NormType, Ternary
from privacy_ci.llm import GenerationSettings, LLMClient, LLMError, Message
from privacy_ci.llm.testing import ScriptedTestBackend

SUBTREE = "164.502(a)(1)"
"""Six leaves, every one annotated in the published KB, five with references."""

_NODE = re.compile(r"Ascertain whether the regulation (.+?) pertains")
_REFS = re.compile(r"and referred \[(.*?)\]\. For each")
_Q1 = {NormType.POSITIVE: "Permit", NormType.NEGATIVE: "Prohibit"}
_TERNARY = {Ternary.YES: "Yes", Ternary.NO: "No", Ternary.UNSURE: "Not Sure"}

Answer = Callable[[str, list[str]], "str | LLMError"]
"""(node id, its references as asked) -> the scripted model's text."""


def node_of(messages: Sequence[Message]) -> tuple[str, list[str]]:
    """The leaf a Table 5 prompt asks about and the references it lists."""
    text = messages[-1].content
    node = _NODE.search(text)
    refs = _REFS.search(text)
    assert node is not None and refs is not None, "not a Table 5 prompt"
    listed = [r for r in refs.group(1).split(", ") if r]
    return node.group(1), listed


def answer_of(norm: Norm, references: list[str]) -> dict[str, Any]:
    """A published norm as Table 5's answer (references not annotated: Support)."""
    kinds = {r.target_id: r.kind.value.capitalize() for r in norm.references}

    def join(value: tuple[str, ...] | str | None) -> str:
        if isinstance(value, tuple):
            return "; ".join(value) or "None"
        return value or "None"

    return {
        "Q1": _Q1.get(norm.norm_type, "General Definition"),
        "Q2": {
            "Sender": join(norm.sender),
            "Sender Role": join(norm.sender_role),
            "Recipient": join(norm.recipient),
            "Recipient Role": join(norm.recipient_role),
            "Subject": join(norm.subject),
            "Subject Role": join(norm.subject_role),
            "Information Type": join(norm.information_type),
            "Consent Form": join(norm.consent_form),
            "Purpose": join(norm.purpose),
        },
        "Q3": _TERNARY[norm.sender_is_subject],
        "Q4": _TERNARY[norm.recipient_is_subject],
        "Q5": {r: kinds.get(r, "Support") for r in references},
    }


def published_answers(kb: KnowledgeBase) -> Answer:
    """A 'model' that answers every leaf with its published annotation."""
    return lambda node, refs: json.dumps(answer_of(kb.norms[node], refs))


def scripted(answer: Answer, *, model: str = "scripted") -> tuple[LLMClient, ScriptedTestBackend]:
    """An `LLMClient` (no cache) over a scripted backend answering per leaf."""

    def script(messages: Sequence[Message], settings: GenerationSettings) -> str:
        node, refs = node_of(messages)
        result = answer(node, refs)
        if isinstance(result, LLMError):
            raise result
        return result

    backend = ScriptedTestBackend(script, model=model)
    return LLMClient(backend, cache=None), backend


def build(published: KnowledgeBase, out: Path) -> AnnotationRun:
    """`SUBTREE` built into `out` by the scripted annotator (the published answers), with
    its knowledge base folder (no WordNet; the published attribute graph)."""
    client, _ = scripted(published_answers(published))
    annotator = Annotator(client, published.tree)
    leaves = select_leaves(published.tree, SUBTREE)
    run = asyncio.run(run_annotation(annotator, out, leaves, tree_variant="ecfr"))
    write_kb_folder(run, published.tree, wordnet=None, taxonomy=published.attribute_graph)
    return run
