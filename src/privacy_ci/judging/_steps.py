"""Small composable async steps of the judging pipelines (a solver chain).

A step is an async callable ``step(state, ctx) -> state``: it reads and updates a
mutable `PipelineState` (the event, candidate and kept regulation ids, the LLM
explanation, the extracted CI characteristics, the step records and the final
parsed verdict) using a `PipelineContext` (the LLM client, the knowledge base,
the base generation settings and the `JudgeConfig`). `run_steps` runs a chain
and stops at the first failed model call. The six methods of the Privacy
Checklist paper (Tables 7-10) are compositions of these steps (`_methods`).

Steps (each appends one `StepRecord` per model call or retrieval):

* `decide(prompt)`: the decision prompt; its ``<reference_regulations>`` (when the
  template has one) are the kept regulations formatted ``ID: text``, one per line,
  or ``None`` when no regulation was kept. The answer goes through
  `parse_verdict`; an unparseable answer is recorded (``verdict=None``), never
  resampled and never guessed.
* `explain`: the "LLM Explanation for BM25 Similarity" prompt (Table 9).
* `retrieve(retriever, k, query_from=...)`: ranked node ids from a `Retriever`.
* `filter_rules`: the law-filter prompt once per candidate, concurrently (the
  client's concurrency limit bounds it); "yes" keeps the candidate, "no", "NONE"
  and an unparseable answer (recorded as such) drop it.
* `propose_ids`: Agent-ID's generation prompt, then `verify_ids` against the tree;
  rejected ids are recorded and never become candidates.
* `extract_ci`: CI characteristics as structured output (a JSON schema over
  Sender, Sender Role, Recipient, Recipient Role, Subject, Subject Role,
  Information Type, Consent Form, Purpose); a malformed answer is recorded and
  the step falls back to the CI fields given with the event, if any.

Constrained decoding (`JudgeConfig.constrain`; auto: on for the ``embedded``
provider, off otherwise). A tiny local model cannot follow the paper's long
output formats, so when constraining is on: the decision is a GBNF grammar whose
only sentences are ``Choice: A. Prohibited | B. Permitted | C. Not related``; the
law filter's answer is one of ``yes``, ``no``, ``NONE``; Agent-ID's list is a
grammar of numbered HIPAA section numbers (HIPAA only); the CI fields get a
``maxLength``; and free text (the explanation) is cut at
`JudgeConfig.short_max_tokens`. With constraining off, every prompt is sent as the
paper wrote it and the answer parsed from free text.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._parse import ParsedVerdict, parse_verdict, parse_yes_no
from privacy_ci.judging._prompts import load_prompt
from privacy_ci.judging._types import Event, Judgment, StepRecord
from privacy_ci.llm import Completion, FinishReason, GenerationSettings, LLMClient, user

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase
    from privacy_ci.retrieval import Hit, RetrievalQuery, Retriever

__all__ = [
    "CI_JSON_FIELDS",
    "FILTER_OPTIONS",
    "VERDICT_OPTIONS",
    "JudgeConfig",
    "PipelineContext",
    "PipelineState",
    "QuerySource",
    "RetrieverSource",
    "Step",
    "ci_schema",
    "decide",
    "explain",
    "extract_ci",
    "filter_rules",
    "format_reference",
    "format_references",
    "id_list_grammar",
    "propose_ids",
    "retrieve",
    "run_steps",
    "truncate_text",
]

VERDICT_OPTIONS: tuple[str, ...] = ("A. Prohibited", "B. Permitted", "C. Not related")
"""The decision grammar's answers (after the forced ``Choice: ``), as the prompts print them."""

FILTER_OPTIONS: tuple[str, ...] = ("yes", "no", "NONE")
"""The law filter's constrained answers: the prompt asks for yes or no, or NONE."""

CI_JSON_FIELDS: dict[str, str] = {
    "Sender": "sender",
    "Sender Role": "sender_role",
    "Recipient": "recipient",
    "Recipient Role": "recipient_role",
    "Subject": "subject",
    "Subject Role": "subject_role",
    "Information Type": "information_type",
    "Consent Form": "consent_form",
    "Purpose": "purpose",
}
"""The CI extraction prompt's field names -> the snake-case keys of `PipelineState.ci`."""

_EVENT_CI = (
    "sender_role",
    "recipient_role",
    "subject_role",
    "information_type",
    "purpose",
    "consent_form",
)
_PLACEHOLDERS = frozenset({"", "none", "null", "n/a", "na", "unknown", "not specified"})


@dataclass(frozen=True, slots=True)
class JudgeConfig:
    """How the pipelines run (everything but the model and the knowledge base).

    Args:
        constrain: constrain answers with grammars / length limits (see the module
            docstring). None (auto): on for the ``embedded`` provider, off otherwise.
        k: how many retrieved regulations the law filter examines (BM25-content,
            CI-ES-content). Default 5: the paper does not print its k; 5 is the
            average number of gold references of a real case rounded up (4.64,
            Table 1), and it bounds the cost at five filter calls per case.
        retriever: the BM25-content retriever, a name of
            `privacy_ci.retrieval.build_retriever`: ``bm25-paper`` (default, the
            paper-faithful BM25 of section 4.2), ``bm25-plus`` (our improved BM25),
            ``dense``, ``roles``, ``hybrid`` ...
        ci_retriever: the CI-ES-content retriever (default ``roles``, the
            role-keyword retriever: the paper's "matched roles as keywords").
        reference_chars: each regulation shown to the filter and the decision is
            ``ID: text`` with text = the node's full specification, cut to at most
            this many characters (the head, with the part and section headings, and
            the tail, the node's own paragraph; 1500 characters are ~375 tokens, so
            five references fit an 8k context with a long case).
        generated_num: Agent-ID's ``<generated_num>``: how many ids the model may
            propose; at most this many verified ids go to the filter.
        short_max_tokens: the completion limit of free-text steps when constrained.
        ci_field_chars: the ``maxLength`` of each CI field when constrained.
        ci_max_tokens: the completion limit of the CI extraction when constrained.
        regulation: the knowledge base loaded when none is given.
        no_reference: the ``<reference_regulations>`` text when no regulation was kept.
    """

    constrain: bool | None = None
    k: int = 5
    retriever: str = "bm25-paper"
    ci_retriever: str = "roles"
    reference_chars: int = 1500
    generated_num: int = 5
    short_max_tokens: int = 64
    ci_field_chars: int = 32
    ci_max_tokens: int = 256
    regulation: str = "hipaa"
    no_reference: str = "None"

    def __post_init__(self) -> None:
        positive = (
            "k",
            "reference_chars",
            "generated_num",
            "short_max_tokens",
            "ci_field_chars",
            "ci_max_tokens",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PrivacyCIError(f"judge config: {name} must be a positive integer")
        from privacy_ci.retrieval import RETRIEVER_NAMES

        for name in ("retriever", "ci_retriever"):
            if getattr(self, name) not in RETRIEVER_NAMES:
                raise PrivacyCIError(
                    f"judge config: unknown {name} {getattr(self, name)!r}; "
                    f"expected one of {', '.join(RETRIEVER_NAMES)}"
                )
        if self.reference_chars < 40:
            raise PrivacyCIError("judge config: reference_chars must be at least 40")


@dataclass(slots=True)
class PipelineContext:
    """What every step may use.

    Args:
        client: the LLM client (retries, cache, concurrency, accounting).
        settings: the base generation settings (temperature, seed, max_tokens ...);
            steps derive theirs from it.
        config: the `JudgeConfig`.
        kb: the knowledge base (needed by retrieval, Agent-ID and reference text).
    """

    client: LLMClient
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    config: JudgeConfig = field(default_factory=JudgeConfig)
    kb: KnowledgeBase | None = None

    @property
    def constrained(self) -> bool:
        """Whether answers are constrained (config, else on for the embedded provider)."""
        if self.config.constrain is not None:
            return self.config.constrain
        return self.client.backend.provider == "embedded"

    @property
    def backend(self) -> str:
        """``provider:model`` of the client's backend."""
        return f"{self.client.backend.provider}:{self.client.backend.model}"

    def require_kb(self) -> KnowledgeBase:
        """The knowledge base, loading `config.regulation`'s on first use.

        Returns:
            The knowledge base.

        Raises:
            DataMissingError: the regulation's data files are missing.
        """
        if self.kb is None:
            from privacy_ci.knowledge import load_knowledge_base

            self.kb = load_knowledge_base(self.config.regulation)
        return self.kb


@dataclass(slots=True)
class PipelineState:
    """The mutable state a chain of steps works on.

    Args:
        event: what is judged.
        candidates: regulation ids proposed or retrieved, in order (filter input).
        kept: ids the law filter kept (shown to the decision), in candidate order.
        explanation: the LLM explanation (BM25-content).
        ci: extracted CI characteristics, keys of `CI_JSON_FIELDS` values (None: not run).
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
    ci: dict[str, str | None] | None = None
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


# ---------------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------
# model calls
# ---------------------------------------------------------------------------------
async def _call(
    ctx: PipelineContext,
    name: str,
    prompt_name: str,
    prompt: str,
    settings: GenerationSettings,
) -> tuple[Completion, StepRecord]:
    completion = await ctx.client.complete([user(prompt)], settings)
    record = StepRecord(
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
    return completion, record


def _free_text_settings(ctx: PipelineContext) -> GenerationSettings:
    if ctx.constrained:
        return replace(
            ctx.settings, max_tokens=min(ctx.settings.max_tokens, ctx.config.short_max_tokens)
        )
    return ctx.settings


def _choice_settings(
    ctx: PipelineContext, options: Sequence[str], prefix: str, max_tokens: int
) -> GenerationSettings:
    if not ctx.constrained:
        return ctx.settings
    from privacy_ci.llm._embedded import choice_grammar

    return replace(
        ctx.settings,
        grammar=choice_grammar(list(options), prefix=prefix),
        json_schema=None,
        max_tokens=max_tokens,
    )


def _parsed_verdict_dict(parsed: ParsedVerdict) -> dict[str, Any]:
    return {
        "verdict": None if parsed.verdict is None else parsed.verdict.value,
        "method": parsed.method,
        "evidence": parsed.evidence,
    }


# ---------------------------------------------------------------------------------
# steps
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Decide:
    prompt_name: str
    name: str = "decide"

    async def __call__(self, state: PipelineState, ctx: PipelineContext) -> PipelineState:
        template = load_prompt(self.prompt_name)
        values = {"event": state.event.text}
        if "reference_regulations" in template.variables:
            kb = ctx.require_kb() if state.kept else ctx.kb
            values["reference_regulations"] = format_references(kb, state.kept, ctx.config)
        prompt = template.render(**values)
        settings = _choice_settings(ctx, VERDICT_OPTIONS, "Choice: ", 16)
        completion, record = await _call(ctx, self.name, self.prompt_name, prompt, settings)
        record.retrieved_ids = list(state.kept)
        state.steps.append(record)
        if not completion.ok:
            state.error = completion.error
            return state
        parsed = parse_verdict(completion.text, prompt=prompt)
        record.parsed = _parsed_verdict_dict(parsed)
        if parsed.verdict is None:
            record.error = "parse failure: the answer holds no recognisable choice"
            if completion.finish_reason is FinishReason.LENGTH:
                record.error += f" (cut at max_tokens={settings.max_tokens})"
        state.decision = parsed
        state.rationale = completion.text
        return state


def decide(prompt: str) -> Step:
    """The decision step with the named prompt (``dp``, ``cot_auto``, ``cot_manual``,
    ``agent_id_decide``, ``content_decide``).

    Args:
        prompt: the prompt template's name; ``<event>`` is the event text and
            ``<reference_regulations>`` (when present) the kept regulations.

    Returns:
        The step.
    """
    load_prompt(prompt)  # fail early on a typo
    return _Decide(prompt)


async def explain(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Table 9's "LLM Explanation for BM25 Similarity": sets ``state.explanation``.

    Args:
        state: the pipeline state.
        ctx: the context.

    Returns:
        The state.
    """
    prompt = load_prompt("explain").render(event=state.event.text)
    completion, record = await _call(ctx, "explain", "explain", prompt, _free_text_settings(ctx))
    state.steps.append(record)
    if not completion.ok:
        state.error = completion.error
        return state
    state.explanation = completion.text.strip()
    record.parsed = {"chars": len(state.explanation)}
    return state


def _ci_query(state: PipelineState) -> RetrievalQuery:
    from privacy_ci.retrieval import RetrievalQuery

    ci = state.ci if state.ci is not None else _event_ci(state.event)
    return RetrievalQuery(
        text=state.event.text,
        sender_role=ci.get("sender_role"),
        recipient_role=ci.get("recipient_role"),
        subject_role=ci.get("subject_role"),
        information_type=ci.get("information_type"),
        purpose=ci.get("purpose"),
        consent_form=ci.get("consent_form"),
    )


def _query_text(query: str | RetrievalQuery) -> str:
    if isinstance(query, str):
        return query
    lines = [query.text.strip()] if query.text.strip() else []
    lines.extend(f"{k}: {v}" for k, v in query.ci_values().items())
    return "\n".join(lines)


@dataclass(slots=True)
class _Retrieve:
    source: Any
    k: int | None
    query_from: Any
    _retriever: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _search(self, retriever: Retriever, query: str | RetrievalQuery, k: int) -> list[Hit]:
        # one search at a time per step: retrievers keep memo tables and models
        with self._lock:
            return retriever.retrieve(query, k)

    def _resolve(self, ctx: PipelineContext) -> Retriever:
        if self._retriever is None:
            self._retriever = self.source if hasattr(self.source, "retrieve") else self.source(ctx)
        return self._retriever  # type: ignore[no-any-return]

    def _query(self, state: PipelineState) -> tuple[str | RetrievalQuery, str | None]:
        note = None
        if callable(self.query_from):
            return self.query_from(state), None
        if self.query_from == "explanation":
            if state.explanation and state.explanation.strip():
                return state.explanation, None
            note = "empty explanation: the event text is the query"
            return state.event.text, note
        if self.query_from == "ci":
            return _ci_query(state), None
        return state.event.text, note

    async def __call__(self, state: PipelineState, ctx: PipelineContext) -> PipelineState:
        from privacy_ci.retrieval import EmptyQueryError, RetrievalError

        k = self.k if self.k is not None else ctx.config.k
        record = StepRecord(name="retrieve")
        state.steps.append(record)
        try:
            retriever = self._resolve(ctx)
            query, note = self._query(state)
            record.prompt_name = None
            record.prompt = _query_text(query)
            start = time.perf_counter()
            hits = await asyncio.to_thread(self._search, retriever, query, k)
            record.latency_s = time.perf_counter() - start
        except EmptyQueryError as exc:
            record.error = f"empty query, nothing retrieved: {exc}"
            state.candidates = []
            return state
        except (RetrievalError, PrivacyCIError, OSError) as exc:
            record.error = f"retrieval failed: {exc}"
            state.error = record.error
            return state
        record.parsed = {
            "retriever": getattr(retriever, "name", type(retriever).__name__),
            "k": k,
            "hits": [{"id": h.node_id, "score": round(float(h.score), 6)} for h in hits],
        }
        if note:
            record.parsed["note"] = note
        state.candidates = [h.node_id for h in hits]
        record.retrieved_ids = list(state.candidates)
        return state


def retrieve(
    retriever: RetrieverSource,
    k: int | None = None,
    query_from: QuerySource = "event",
) -> Step:
    """Retrieve candidate regulations into ``state.candidates``.

    Args:
        retriever: a `Retriever`, or a function of the context that builds one
            (called once, on first use: indexes load lazily).
        k: how many (None: ``config.k``).
        query_from: ``event`` (the event text), ``explanation`` (the LLM
            explanation; the event text when it is empty, noted in the record),
            ``ci`` (a `RetrievalQuery` with the event text and the extracted CI
            characteristics, else the event's own), or a function of the state.

    Returns:
        The step. A query with nothing in it retrieves nothing (recorded); any
        other retrieval error stops the pipeline (``state.error``).
    """
    return _Retrieve(retriever, k, query_from)


async def _filter_one(
    state: PipelineState, ctx: PipelineContext, node_id: str
) -> tuple[Completion, StepRecord, bool | None]:
    kb = ctx.require_kb()
    prompt = load_prompt("law_filter").render(
        event=state.event.text,
        candidates=format_reference(kb, node_id, ctx.config.reference_chars),
    )
    settings = _choice_settings(ctx, FILTER_OPTIONS, "", 4)
    completion, record = await _call(ctx, "filter", "law_filter", prompt, settings)
    record.retrieved_ids = [node_id]
    if not completion.ok:
        return completion, record, None
    answer = parse_yes_no(completion.text)
    words = completion.text.replace("*", " ").split()
    record.parsed = {
        "id": node_id,
        "relevant": answer is True,
        "answer": answer,
        "none": bool(words) and words[0].strip(".,:;").upper() == "NONE",
    }
    if answer is None:
        record.error = "unparseable yes/no answer: treated as not relevant"
    return completion, record, answer


async def filter_rules(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """The law filter (Tables 8-10): one prompt per candidate, concurrently.

    "yes" keeps the candidate; "no", "NONE" and an unparseable answer (recorded
    in the step's ``error``) do not. Records keep candidate order. A failed call
    stops the pipeline after all records are appended.

    Args:
        state: the pipeline state (``candidates``).
        ctx: the context.

    Returns:
        The state with ``kept`` set.
    """
    results = await asyncio.gather(*(_filter_one(state, ctx, c) for c in state.candidates))
    state.kept = []
    for node_id, (completion, record, answer) in zip(state.candidates, results, strict=True):
        state.steps.append(record)
        if not completion.ok and state.error is None:
            state.error = completion.error
        if answer is True:
            state.kept.append(node_id)
    if state.error is not None:
        state.kept = []
    return state


def id_list_grammar(count: int, sections: Sequence[str] = ()) -> str:
    """A GBNF grammar for a numbered list of 1..`count` regulation ids.

    Each line is ``<n>. <section><labels>``, e.g. ``1. 164.512(f)(1)``: the section
    is one of ``sections`` (the tree's section or article ids, so a constrained
    model names sections that exist) or, when none are given, any HIPAA-shaped
    section number (``160|162|164.NNN``); up to three paragraph labels follow,
    unconstrained, so an invented paragraph is still caught by `verify_ids`.

    Args:
        count: the most items.
        sections: the allowed section ids (empty: the HIPAA number pattern).

    Returns:
        The grammar.
    """
    from privacy_ci.llm._embedded import _gbnf_literal

    if sections:
        section = " | ".join(_gbnf_literal(x) for x in dict.fromkeys(sections))
    else:
        section = '("160" | "162" | "164") "." [1-9] [0-9] [0-9] [0-9]?'
    return (
        f"root ::= item{{1,{count}}}\n"
        'item ::= [1-9] ". " section para{0,3} "\\n"\n'
        f"section ::= {section}\n"
        'para ::= "(" [a-z1-9] [a-z0-9]? [a-z0-9]? ")"\n'
    )


def _section_ids(kb: KnowledgeBase) -> list[str]:
    kinds = {"section", "article"}
    return [n.id for n in kb.tree if n.kind.value in kinds and kb.tree.in_tree(n.id)]


async def propose_ids(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Agent-ID (Table 8): ask for regulation ids, keep those the tree has.

    At most ``config.generated_num`` verified ids become ``state.candidates``; the
    rejected ones (with reasons) and any over the limit are recorded in the step.

    Args:
        state: the pipeline state.
        ctx: the context.

    Returns:
        The state.
    """
    from privacy_ci.retrieval import verify_ids

    kb = ctx.require_kb()
    n = ctx.config.generated_num
    prompt = load_prompt("agent_id_generate").render(event=state.event.text, generated_num=str(n))
    settings = _free_text_settings(ctx)
    if ctx.constrained:
        sections = _section_ids(kb)
        if sections or kb.regulation == "hipaa":
            grammar = id_list_grammar(n, sections)
            settings = replace(settings, grammar=grammar, json_schema=None, max_tokens=24 * n)
    completion, record = await _call(ctx, "propose_ids", "agent_id_generate", prompt, settings)
    state.steps.append(record)
    if not completion.ok:
        state.error = completion.error
        return state
    verified = verify_ids(completion.text, kb.tree)
    valid = list(verified.valid)
    state.candidates = valid[:n]
    record.retrieved_ids = list(state.candidates)
    record.parsed = {
        "valid": list(state.candidates),
        "over_limit": valid[n:],
        "rejected": [{"id": r.raw, "reason": r.reason} for r in verified.rejected],
        "coarsened": [list(pair) for pair in verified.coarsened],
    }
    return state


def ci_schema(constrained: bool = False, field_chars: int = 32) -> dict[str, Any]:
    """The JSON schema of the CI extraction (every field a string, all required).

    Args:
        constrained: add ``maxLength`` to every field (for small local models).
        field_chars: that ``maxLength``.

    Returns:
        The schema.
    """
    prop: dict[str, Any] = {"type": "string"}
    if constrained:
        prop = {"type": "string", "maxLength": field_chars}
    return {
        "type": "object",
        "properties": {name: dict(prop) for name in CI_JSON_FIELDS},
        "required": list(CI_JSON_FIELDS),
        "additionalProperties": False,
    }


def _clean_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        value = "; ".join(str(v) for v in value if v is not None)
    text = " ".join(str(value).split()).strip(" .")
    return None if text.lower() in _PLACEHOLDERS else text


def _event_ci(event: Event) -> dict[str, str | None]:
    out: dict[str, str | None] = dict.fromkeys(CI_JSON_FIELDS.values())
    for name in _EVENT_CI:
        out[name] = _clean_value(getattr(event, name))
    return out


async def extract_ci(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """CI characteristics extraction (section 4.1) as structured output.

    Sets ``state.ci`` (snake-case keys, ``None`` for "None" answers) and
    ``state.ci_source``: ``model``; or, when the answer is not a JSON object with
    the schema's fields (recorded as the step's ``error``), ``case`` (the CI
    fields given with the event) or ``none`` (the event has none either).

    Args:
        state: the pipeline state.
        ctx: the context.

    Returns:
        The state.
    """
    prompt = load_prompt("ci_extract").render(event=state.event.text)
    settings = replace(
        ctx.settings,
        grammar=None,
        json_schema=ci_schema(ctx.constrained, ctx.config.ci_field_chars),
        schema_name="ci_characteristics",
    )
    if ctx.constrained:
        settings = replace(settings, max_tokens=ctx.config.ci_max_tokens)
    completion, record = await _call(ctx, "extract_ci", "ci_extract", prompt, settings)
    state.steps.append(record)
    if not completion.ok:
        state.error = completion.error
        return state
    value = completion.parsed
    problem = completion.parse_error
    if problem is None and not isinstance(value, dict):
        problem = f"expected a JSON object, got {type(value).__name__}"
    if problem is None and isinstance(value, dict):
        missing = [f for f in CI_JSON_FIELDS if f not in value]
        if len(missing) == len(CI_JSON_FIELDS):
            problem = "none of the CI fields is present"
    if problem is None and isinstance(value, dict):
        state.ci = {key: _clean_value(value.get(name)) for name, key in CI_JSON_FIELDS.items()}
        state.ci_source = "model"
    else:
        fallback = _event_ci(state.event)
        has_any = any(v is not None for v in fallback.values())
        state.ci = fallback
        state.ci_source = "case" if has_any else "none"
        record.error = f"malformed CI extraction ({problem}); using the {state.ci_source} fields"
    record.parsed = {"ci": dict(state.ci), "source": state.ci_source}
    return state
