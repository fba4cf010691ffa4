"""The judging pipelines' core: a chain of small async steps over a shared state.

A step is an async callable ``step(state, ctx) -> state``: it reads and updates a
mutable `PipelineState` (the event, candidate and kept regulation ids, the LLM
explanation, the extracted CI characteristics, the step records and the final
parsed verdict) using a `PipelineContext` (the LLM client, the knowledge base,
the base generation settings and the `JudgeConfig`). `run_steps` runs a chain and
stops at the first failed model call. Each step lives in a module of its own
(`_decide`, `_explain`, `_retrieve`, `_filter`, `_propose_ids`, `_extract_ci`,
`_flow`); the methods (`_methods`) are compositions of them.

Constrained decoding (`JudgeConfig.constrain`; auto: on when the backend asks for
it, i.e. the embedded model). A tiny local model cannot follow the paper's long
output formats, so when constraining is on: the decision is a GBNF grammar whose
only sentences are ``Choice: A. Prohibited | B. Permitted | C. Not related``; the
law filter's answer is one of ``yes``, ``no``, ``NONE``; Agent-ID's list is a
grammar of numbered section numbers; the CI fields get a ``maxLength``; and free
text (the explanation) is cut at `JudgeConfig.short_max_tokens`. With constraining
off, every prompt is sent as the paper wrote it and the answer parsed from free text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from privacy_ci.ci import Flow
from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._config import JudgeConfig
from privacy_ci.judging._parse import ParsedVerdict
from privacy_ci.judging._types import Event, Judgment, StepRecord
from privacy_ci.llm import (
    Completion,
    GenerationSettings,
    LLMClient,
    capabilities_of,
    choice_grammar,
    user,
)

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase
    from privacy_ci.retrieval import RetrievalQuery, Retriever

MODEL_FREE = "model-free"
"""The backend a method without a model reports (reports name it so)."""

__all__ = [
    "MODEL_FREE",
    "PipelineContext",
    "PipelineState",
    "QuerySource",
    "RetrieverSource",
    "Step",
    "call_model",
    "choice_settings",
    "format_reference",
    "format_references",
    "free_text_settings",
    "parsed_verdict_dict",
    "run_steps",
    "step_record",
    "truncate_text",
]


@dataclass(slots=True)
class PipelineContext:
    """What every step may use.

    Args:
        client: the LLM client (retries, cache, concurrency, accounting); None for a
            model-free method.
        settings: the base generation settings (temperature, seed, max_tokens ...);
            steps derive theirs from it.
        config: the `JudgeConfig`.
        kb: the knowledge base (needed by retrieval, Agent-ID and reference text).
    """

    client: LLMClient | None
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    config: JudgeConfig = field(default_factory=JudgeConfig)
    kb: KnowledgeBase | None = None

    @property
    def constrained(self) -> bool:
        """Whether answers are constrained (config, else what the backend asks for)."""
        if self.config.constrain is not None:
            return self.config.constrain
        if self.client is None:
            return False
        return capabilities_of(self.client.backend).constrain_by_default

    @property
    def backend(self) -> str:
        """``provider:model`` of the client's backend (``model-free`` without one)."""
        if self.client is None:
            return MODEL_FREE
        return f"{self.client.backend.provider}:{self.client.backend.model}"

    def require_client(self) -> LLMClient:
        """The LLM client (a step that calls a model in a model-free method is a bug)."""
        if self.client is None:
            raise PrivacyCIError("this method has no model: its steps cannot call one")
        return self.client

    def require_kb(self) -> KnowledgeBase:
        """The knowledge base, loading `config.regulation`'s on first use.

        Returns:
            The knowledge base.

        Raises:
            DataMissingError: the regulation's data files are missing.
        """
        if self.kb is None:
            from privacy_ci.knowledge import open_knowledge_base

            self.kb = open_knowledge_base(self.config.regulation, self.config.kb)
        return self.kb


@dataclass(slots=True)
class PipelineState:
    """The mutable state a chain of steps works on.

    Args:
        event: what is judged.
        candidates: regulation ids proposed or retrieved, in order (filter input).
        kept: ids the law filter kept (shown to the decision), in candidate order.
        explanation: the LLM explanation (BM25-content).
        ci: the extracted CI characteristics as a flow (None: not run).
        ci_source: ``model``, ``case`` (fallback to the event's fields) or ``none``.
        steps: the step records, in order.
        decision: the parsed final answer (None until a decision step ran).
        rationale: the decision step's raw text.
        error: the first failed model call's message; the chain stops there.
    """

    event: Event
    candidates: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    explanation: str | None = None
    ci: Flow | None = None
    ci_source: str = "none"
    steps: list[StepRecord] = field(default_factory=list)
    decision: ParsedVerdict | None = None
    rationale: str = ""
    error: str | None = None

    def to_judgment(self, method: str, backend: str) -> Judgment:
        """The `Judgment` of this state.

        Args:
            method: the method name.
            backend: ``provider:model``.

        Returns:
            The judgment (verdict None when the decision failed to parse, did not
            run, or a model call failed).
        """
        verdict = None if self.error is not None or self.decision is None else self.decision.verdict
        return Judgment(
            method=method,
            verdict=verdict,
            cited_ids=list(self.kept),
            rationale=self.rationale,
            steps=list(self.steps),
            backend=backend,
            error=self.error,
            abstained=self.decision is not None and self.decision.method == "abstained",
        )


Step = Callable[[PipelineState, PipelineContext], Awaitable[PipelineState]]
"""A step: ``await step(state, ctx)`` returns the (same, updated) state."""

RetrieverSource: TypeAlias = "Retriever | Callable[[PipelineContext], Retriever]"
"""A retriever, or a function of the context that builds one (called once, lazily)."""

QuerySource: TypeAlias = (
    "Literal['event', 'explanation', 'ci'] | Callable[[PipelineState], str | RetrievalQuery]"
)
"""Where `retrieve` takes its query from (see `retrieve`)."""


async def run_steps(
    steps: Sequence[Step], state: PipelineState, ctx: PipelineContext
) -> PipelineState:
    """Run steps in order; stop after the first one that leaves ``state.error`` set.

    Args:
        steps: the chain.
        state: the initial state.
        ctx: the context.

    Returns:
        The final state.
    """
    for step in steps:
        state = await step(state, ctx)
        if state.error is not None:
            break
    return state


# -- formatting ------------------------------------------------------------
def truncate_text(text: str, limit: int, marker: str = " […] ") -> str:
    """Cut ``text`` to at most ``limit`` characters, keeping its head and its tail.

    A full specification runs from the part heading down to the node's own
    paragraph, so the head (headings) and the tail (the most specific text) are
    kept and the middle is replaced by ``marker``.

    Args:
        text: any text.
        limit: the maximum length (characters).
        marker: what replaces the cut middle.

    Returns:
        The text, unchanged when it fits.
    """
    text = text.strip()
    if len(text) <= limit:
        return text
    room = max(limit - len(marker), 2)
    head = room // 3
    tail = room - head
    return text[:head].rstrip() + marker + text[len(text) - tail :].lstrip()


def format_reference(kb: KnowledgeBase, node_id: str, limit: int) -> str:
    """One reference as ``ID: text`` (text = the node's full specification, cut to `limit`).

    Args:
        kb: the knowledge base.
        node_id: a tree node id.
        limit: the text's maximum length in characters.

    Returns:
        The line(s).
    """
    text = " ".join(kb.tree.full_specification(node_id).split())
    return f"{node_id}: {truncate_text(text, limit)}"


def format_references(kb: KnowledgeBase | None, ids: Sequence[str], config: JudgeConfig) -> str:
    """The ``<reference_regulations>`` value: one ``ID: text`` per line, or ``None``.

    Args:
        kb: the knowledge base (needed when ``ids`` is not empty).
        ids: the kept ids.
        config: for `reference_chars` and `no_reference`.

    Returns:
        The text.
    """
    if not ids or kb is None:
        return config.no_reference
    return "\n".join(format_reference(kb, i, config.reference_chars) for i in ids)


# -- model calls ----------------------------------------------------------
async def call_model(
    ctx: PipelineContext,
    name: str,
    prompt_name: str,
    prompt: str,
    settings: GenerationSettings,
) -> tuple[Completion, StepRecord]:
    """One model call with a user prompt, and its `StepRecord` (not yet appended)."""
    completion = await ctx.require_client().complete([user(prompt)], settings)
    return completion, step_record(name, prompt_name, prompt, completion)


def step_record(name: str, prompt_name: str, prompt: str, completion: Completion) -> StepRecord:
    """The `StepRecord` of one model call: its prompt, answer and accounting."""
    return StepRecord(
        name=name,
        prompt_name=prompt_name,
        prompt=prompt,
        raw_output=completion.text,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        latency_s=completion.latency_s,
        cached=completion.cached,
        retries=completion.retries,
        error=completion.error,
    )


def free_text_settings(ctx: PipelineContext) -> GenerationSettings:
    """The base settings, cut to `JudgeConfig.short_max_tokens` when constrained."""
    if ctx.constrained:
        return replace(
            ctx.settings, max_tokens=min(ctx.settings.max_tokens, ctx.config.short_max_tokens)
        )
    return ctx.settings


def choice_settings(
    ctx: PipelineContext, options: Sequence[str], prefix: str, max_tokens: int
) -> GenerationSettings:
    """Settings whose only answers are ``prefix + option`` when constrained."""
    if not ctx.constrained:
        return ctx.settings
    return replace(
        ctx.settings,
        grammar=choice_grammar(list(options), prefix=prefix),
        json_schema=None,
        max_tokens=max_tokens,
    )


def parsed_verdict_dict(parsed: ParsedVerdict) -> dict[str, Any]:
    """A parsed verdict as the step record's ``parsed``."""
    return {
        "verdict": None if parsed.verdict is None else parsed.verdict.value,
        "method": parsed.method,
        "evidence": parsed.evidence,
    }
