"""Helpers for the labeling tests: scripted labelers over the Riverside corpus.

Every backend here is `ScriptedTestBackend` (provider ``scripted-test-double``), so
no number these tests produce can pass for a model's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from privacy_ci.conductor import Corpus, Label
from privacy_ci.labeling import Labeler, ProposedLabel
from privacy_ci.llm import GenerationSettings, LLMClient, LLMError, Message
from privacy_ci.llm.testing import ScriptedTestBackend

_DOC_ID = re.compile(r"^Document ID: (\S+)$", re.MULTILINE)

Answer = Callable[[str], "str | LLMError"]
"""doc id -> the scripted model's text (or an error to raise)."""


def doc_id_of(messages: Sequence[Message]) -> str:
    """The document a labeler prompt is about (its content prints the document id)."""
    found = _DOC_ID.search(messages[-1].content)
    assert found is not None, "the user prompt does not show a document id"
    return found.group(1)


def label_json(label: Label | ProposedLabel, **override: Any) -> str:
    """A label's four labeler fields as the model's JSON answer."""
    data = (
        label if isinstance(label, ProposedLabel) else ProposedLabel.of(label)
    ).as_dict() | override
    return json.dumps(data)


def authored_answers(corpus: Corpus) -> Answer:
    """A 'model' that answers every document with its authored label."""
    return lambda doc_id: label_json(corpus.label(doc_id))


def by_document(answer: Answer) -> Callable[[Sequence[Message], GenerationSettings], str]:
    """A `ScriptedTestBackend` function answering per document."""

    def script(messages: Sequence[Message], settings: GenerationSettings) -> str:
        result = answer(doc_id_of(messages))
        if isinstance(result, LLMError):
            raise result
        return result

    return script


def scripted(
    answers: Sequence[str | LLMError] | Answer, *, model: str = "scripted", cycle: bool = False
) -> tuple[LLMClient, ScriptedTestBackend]:
    """An `LLMClient` (no cache, no waiting between retries) over a scripted backend."""
    if callable(answers):
        backend = ScriptedTestBackend(by_document(answers), model=model)
    else:
        backend = ScriptedTestBackend(answers, model=model, cycle=cycle)

    async def no_sleep(_: float) -> None:
        return None

    return LLMClient(backend, cache=None, concurrency=4, sleep=no_sleep), backend


def authored_labeler(corpus: Corpus, **kwargs: Any) -> tuple[Labeler, ScriptedTestBackend]:
    client, backend = scripted(authored_answers(corpus), **kwargs)
    return Labeler(client, corpus), backend


def calls_per_doc(backend: ScriptedTestBackend) -> dict[str, int]:
    out: dict[str, int] = {}
    for messages, _ in backend.calls:
        doc = doc_id_of(messages)
        out[doc] = out.get(doc, 0) + 1
    return out


def relabeled(corpus: Corpus, change: Callable[[Label], dict[str, Any] | None]) -> list[Label]:
    """The authored labels with `change(label)`'s fields replaced (None: unchanged).

    `model_copy` does no validation and no recomputation: the result is what the
    gate would read if an annotator had written exactly these fields.
    """
    out = []
    for label in corpus.labels:
        update = change(label)
        out.append(label if not update else label.model_copy(update=update))
    return out


def ids(labels: Iterable[Label]) -> list[str]:
    return [label.doc_id for label in labels]
