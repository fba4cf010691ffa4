"""Values of the judging pipelines: a case to judge, each step's record, the judgment.

A pipeline is a chain of small async steps over the LLM layer, the knowledge base
and the retrievers. Every step appends a `StepRecord` (prompt, raw output, parsed
result, retrieved ids, tokens, latency), so a run can be audited and resumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from privacy_ci.ci import Flow, Verdict

if TYPE_CHECKING:
    from privacy_ci.llm import LLMClient


@dataclass(frozen=True, slots=True)
class Event:
    """What is judged: the narrative and, when known, its flow.

    Args:
        text: the event or case narrative.
        id: a stable identifier (the case id), or "" for ad-hoc events.
        flow: the CI parameters given with the case (unknown ones None): the
            parties' names (only the ``flow-judge`` prompt shows them) and roles,
            the information type, purpose and consent form.
        facts: facts of the disclosure the user states (fact -> value, as in a facts
            file; ``judge --facts``): the ``ci-reasoner`` takes them as given and reads
            only the rest. No prompt shows them.
    """

    text: str
    id: str = ""
    flow: Flow = field(default_factory=Flow)
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class StepRecord:
    """One step of a pipeline.

    Args:
        name: the step (``decide``, ``explain``, ``retrieve``, ``filter``, ...).
        prompt_name: the prompt template used (None for model-free steps).
        prompt: the rendered prompt sent.
        raw_output: the model's text.
        parsed: the step's parsed result (verdict, yes/no, ids, CI fields ...).
        retrieved_ids: node ids this step produced or consumed.
        prompt_tokens / completion_tokens / latency_s / cached / retries: accounting.
        error: a failure message when the model call failed or parsing failed.
    """

    name: str
    prompt_name: str | None = None
    prompt: str = ""
    raw_output: str = ""
    parsed: Any = None
    retrieved_ids: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cached: bool = False
    retries: int = 0
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Judgment:
    """A pipeline's answer for one event.

    Args:
        method: the pipeline (``dp``, ``cot-auto``, ``cot-manual``, ``agent-id``,
            ``bm25-content``, ``ci-es-content``, ``flow-judge``).
        verdict: Permit / Prohibit / Not applicable, or None when the final answer
            could not be parsed (an explicit failure, counted wrong).
        cited_ids: the regulation ids kept and shown to the decision step.
        rationale: the model's reasoning text (the decision step's output).
        steps: every step, in order.
        backend: ``provider:model`` of the model that produced it (``model-free``
            for a method without one).
        error: set when a model call failed (after retries) and no verdict exists.
        abstained: the method declined to answer (``undetermined``): no verdict, not
            a failure; counted wrong, and reported with coverage beside accuracy.
    """

    method: str
    verdict: Verdict | None
    cited_ids: list[str] = field(default_factory=list)
    rationale: str = ""
    steps: list[StepRecord] = field(default_factory=list)
    backend: str = ""
    error: str | None = None
    abstained: bool = False

    @property
    def parsed(self) -> bool:
        return self.verdict is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "verdict": None if self.verdict is None else self.verdict.value,
            "cited_ids": list(self.cited_ids),
            "rationale": self.rationale,
            "backend": self.backend,
            "error": self.error,
            "abstained": self.abstained,
            "steps": [s.as_dict() for s in self.steps],
        }


@dataclass(frozen=True)
class MethodIdentity:
    """What a method says about itself for run manifests (a run's identity).

    Args:
        method: the method name.
        client: the LLM client it calls (None for a model-free method).
        settings: its base generation settings (None when it calls no model).
        config: its configuration (k, retriever, constrained decoding ...), if any.
        prompts: the prompt templates it uses, in call order.
        knowledge_base: the content hash of the knowledge base it reads, if any.
    """

    method: str
    client: LLMClient | None = None
    settings: Any = None
    config: Any = None
    prompts: tuple[str, ...] = ()
    knowledge_base: str | None = None


class Method(Protocol):
    """A judging method: `await method.judge(event)` -> `Judgment`, and what it is."""

    name: str

    async def judge(self, event: Event) -> Judgment: ...

    def identity(self) -> MethodIdentity: ...
