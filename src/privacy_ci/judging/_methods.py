"""The six judging methods of the Privacy Checklist paper, and the Privacy Conductor
paper's flow judge, as chains of steps.

==================  ===========================================================
method              steps (prompt files under ``prompts/``)
==================  ===========================================================
``dp``              decide(``dp``)                                     Table 7
``cot-auto``        decide(``cot_auto``)                               Table 7
``cot-manual``      decide(``cot_manual``)                             Table 7
``agent-id``        propose_ids(``agent_id_generate``) -> filter_rules(``law_filter``)
                    per verified id -> decide(``agent_id_decide``)     Table 8
``bm25-content``    explain(``explain``) -> retrieve(BM25, k, query = the
                    explanation) -> filter_rules(``law_filter``) per hit ->
                    decide(``content_decide``)                         Table 9
``ci-es-content``   extract_ci(``ci_extract``) -> retrieve(role keywords, k,
                    query = the extracted roles) -> filter_rules(``law_filter``)
                    per hit -> decide(``content_decide``)              Table 10
``checklist-qa``    read (the offline reader's facts and the given ones,
                    model-free) -> facts_qa(``facts_qa``): one call, every
                    fact with a verified quote, re-asked up to twice when it
                    does not parse -> combine (given > answered > read facts,
                    then the law engine)
``flow-judge``      judge_flow(system ``flow_judge_system``, user
                    ``flow_judge_user``): the CI five-tuple and the narrative,
                    a structured decision + rationale, re-asked up to twice
                    when it does not parse      Conductor V-G, Appendix C
==================  ===========================================================

The decision steps of the three retrieval methods see the kept regulations as
``ID: text`` lines (text = the node's full specification, cut to
`JudgeConfig.reference_chars`); Agent-ID's too (the paper's Agent-ID prompt adds
"regulation IDs"; we give the same ``ID: text`` lines so all three retrieval
methods differ only in how candidates are found). When the filter keeps nothing,
``<reference_regulations>`` is ``None`` (`JudgeConfig.no_reference`), as the law
filter's own "answer NONE" suggests; the decision is still made.

BM25-content uses the paper-faithful ``bm25-paper`` retriever by default
(`JudgeConfig.retriever`, or pass any `Retriever`); its query is the explanation
alone, as in section 4.2 (the event text when the explanation is empty).
CI-ES-content uses the role-keyword retriever ``roles``
(`privacy_ci.retrieval.RoleKeywordRetriever`, the paper's "matched roles as
keywords"; `JudgeConfig.ci_retriever`), or any `Retriever` passed in; its query is
a `RetrievalQuery` with the event text and the extracted CI characteristics (the
case's own when the extraction is malformed).

The flow judge (`privacy_ci.judging._flow`) is judge-only: no knowledge base, no
retrieval, no regulation text; see its module for how missing CI fields are shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from privacy_ci.errors import PrivacyCIError
from privacy_ci.judging._checklist_qa import checklist_qa
from privacy_ci.judging._config import JudgeConfig
from privacy_ci.judging._decide import decide
from privacy_ci.judging._explain import explain
from privacy_ci.judging._extract_ci import extract_ci
from privacy_ci.judging._filter import filter_rules
from privacy_ci.judging._flow import judge_flow
from privacy_ci.judging._pipeline import (
    PipelineContext,
    PipelineState,
    RetrieverSource,
    Step,
    run_steps,
)
from privacy_ci.judging._propose_ids import propose_ids
from privacy_ci.judging._reason import reason
from privacy_ci.judging._retrieve import retrieve
from privacy_ci.judging._types import Event, Judgment, MethodIdentity
from privacy_ci.llm import GenerationSettings, LLMClient

if TYPE_CHECKING:
    from privacy_ci.cases import Case
    from privacy_ci.knowledge import KnowledgeBase
    from privacy_ci.retrieval import Retriever

__all__ = [
    "METHODS",
    "ChainBuilder",
    "MethodSpec",
    "Pipeline",
    "build_method",
    "default_retriever",
    "event_from_case",
    "register_method",
]

ChainBuilder = Callable[[JudgeConfig, "Retriever | None"], list[Step]]
"""Builds a method's chain of steps from its configuration and an optional retriever."""


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """A judging method: what it is (for listings and run manifests) and how to build it.

    Args:
        name: the method name (``dp`` ... ``ci-es-content``, ``flow-judge``).
        title: the paper's description.
        prompts: the prompt files it uses, in call order.
        steps: its step names, in order.
        needs_kb: whether it reads the knowledge base.
        chain: builds its steps (`ChainBuilder`).
        retriever_option: the `JudgeConfig` field naming its retriever (``retriever``
            or ``ci_retriever``), for methods that retrieve; None for the others.
        needs_model: False for a model-free method (it is built without a client).
    """

    name: str
    title: str
    prompts: tuple[str, ...]
    steps: tuple[str, ...]
    needs_kb: bool
    chain: ChainBuilder = field(repr=False, compare=False)
    retriever_option: str | None = None
    needs_model: bool = True


METHODS: dict[str, MethodSpec] = {}
"""The registry of judging methods, by name (the CLI, the service and eval read it)."""


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add a method to `METHODS` (the extension point for new methods).

    Raises:
        PrivacyCIError: a method of that name is registered already.
    """
    if spec.name in METHODS:
        raise PrivacyCIError(f"a judging method named {spec.name!r} is registered already")
    METHODS[spec.name] = spec
    return spec


def default_retriever(name: str) -> RetrieverSource:
    """A retriever by name, built on first use from the context's knowledge base.

    Args:
        name: a name of the retriever registry (``bm25-paper``, ``bm25-plus``,
            ``dense``, ``roles``, ``hybrid`` ...).

    Returns:
        A function of the context that builds it (with the index cache).

    Raises:
        PrivacyCIError: unknown name.
    """
    from privacy_ci.retrieval import retriever_names

    if name not in retriever_names():
        raise PrivacyCIError(
            f"unknown retriever {name!r}; expected one of {', '.join(retriever_names())}"
        )

    def build(ctx: PipelineContext) -> Retriever:
        from privacy_ci.retrieval import build_retriever

        return build_retriever(name, ctx.require_kb())

    return build


def _decide_only(prompt: str) -> ChainBuilder:
    return lambda config, retriever: [decide(prompt)]


def _agent_id(config: JudgeConfig, retriever: Retriever | None) -> list[Step]:
    return [propose_ids, filter_rules, decide("agent_id_decide")]


def _bm25_content(config: JudgeConfig, retriever: Retriever | None) -> list[Step]:
    source: RetrieverSource = retriever or default_retriever(config.retriever)
    return [
        explain,
        retrieve(source, config.k, query_from="explanation"),
        filter_rules,
        decide("content_decide"),
    ]


def _ci_es_content(config: JudgeConfig, retriever: Retriever | None) -> list[Step]:
    source: RetrieverSource = retriever or default_retriever(config.ci_retriever)
    return [
        extract_ci,
        retrieve(source, config.k, query_from="ci"),
        filter_rules,
        decide("content_decide"),
    ]


for _spec in (
    MethodSpec("dp", "Direct prompt (Table 7)", ("dp",), ("decide",), False, _decide_only("dp")),
    MethodSpec(
        "cot-auto",
        "CoT with automatic planning (Table 7)",
        ("cot_auto",),
        ("decide",),
        False,
        _decide_only("cot_auto"),
    ),
    MethodSpec(
        "cot-manual",
        "CoT with manual guidelines (Table 7)",
        ("cot_manual",),
        ("decide",),
        False,
        _decide_only("cot_manual"),
    ),
    MethodSpec(
        "agent-id",
        "CoT with regulation ids from agent-based retrieval (Table 8)",
        ("agent_id_generate", "law_filter", "agent_id_decide"),
        ("propose_ids", "filter", "decide"),
        True,
        _agent_id,
    ),
    MethodSpec(
        "bm25-content",
        "CoT with an LLM explanation and regulations retrieved by BM25 (Table 9)",
        ("explain", "law_filter", "content_decide"),
        ("explain", "retrieve", "filter", "decide"),
        True,
        _bm25_content,
        retriever_option="retriever",
    ),
    MethodSpec(
        "ci-es-content",
        "CoT with CI extraction and regulations retrieved by role keywords (Table 10)",
        ("ci_extract", "law_filter", "content_decide"),
        ("extract_ci", "retrieve", "filter", "decide"),
        True,
        _ci_es_content,
        retriever_option="ci_retriever",
    ),
    MethodSpec(
        "ci-reasoner",
        "Model-free: the facts of the disclosure read from the case, then the law engine (no LLM)",
        (),
        ("reason",),
        False,
        lambda config, retriever: [reason],
        needs_model=False,
    ),
    MethodSpec(
        "checklist-qa",
        "The facts of the disclosure read by a model (one call, each fact with a quote"
        " verified against the narrative), then the law engine",
        ("facts_qa",),
        ("read", "facts_qa", "combine"),
        False,
        lambda config, retriever: [checklist_qa],
    ),
    MethodSpec(
        "flow-judge",
        "Judge-only: the CI five-tuple and narrative, a structured decision "
        "(Privacy Conductor V-G)",
        ("flow_judge_system", "flow_judge_user"),
        ("decide",),
        False,
        lambda config, retriever: [judge_flow],
    ),
):
    register_method(_spec)


@dataclass
class Pipeline:
    """A method: a named chain of steps over one context (implements `Method`).

    Args:
        name: the method name.
        steps: the chain.
        context: the client, knowledge base, settings and config.
        spec: the registry entry it was built from.
    """

    name: str
    steps: Sequence[Step]
    context: PipelineContext
    spec: MethodSpec | None = field(default=None, repr=False)

    async def judge(self, event: Event) -> Judgment:
        """Run the chain on one event.

        Args:
            event: what to judge.

        Returns:
            The `Judgment`: ``verdict`` None when the final answer did not parse
            (the decide record says so) or a model call failed (``error`` set, the
            steps up to the failure kept).
        """
        state = await run_steps(self.steps, PipelineState(event), self.context)
        return state.to_judgment(self.name, self.context.backend)

    def identity(self) -> MethodIdentity:
        """The method, model, settings, configuration, prompts and knowledge base."""
        kb = self.context.kb
        if kb is None and self.spec is not None and self.spec.needs_kb:
            kb = self.context.require_kb()
        return MethodIdentity(
            method=self.name,
            client=self.context.client,
            settings=self.context.settings if self.context.client is not None else None,
            config=self.context.config,
            prompts=self.spec.prompts if self.spec is not None else (),
            knowledge_base=kb.tree.content_hash() if kb is not None else None,
        )


def build_method(
    name: str,
    client: LLMClient | None,
    kb: KnowledgeBase | None = None,
    config: JudgeConfig | None = None,
    *,
    settings: GenerationSettings | None = None,
    retriever: Retriever | None = None,
) -> Pipeline:
    """Build a method of the registry (`METHODS`).

    Args:
        name: a key of `METHODS`.
        client: the LLM client (None for a model-free method).
        kb: the knowledge base (None: ``config.regulation``'s, loaded here for the
            methods that need one).
        config: the `JudgeConfig` (default: paper settings, auto constraining).
        settings: base generation settings (default: temperature 0, seed 0).
        retriever: the retriever of the methods that retrieve (``bm25-content``,
            ``ci-es-content``; default: ``config.retriever`` / ``config.ci_retriever``,
            built on first use); ignored by the others.

    Returns:
        The `Pipeline`.

    Raises:
        PrivacyCIError: unknown method or retriever name.
        DataMissingError: the method needs the knowledge base and its data is missing.
    """
    spec = METHODS.get(name)
    if spec is None:
        raise PrivacyCIError(f"unknown method {name!r}; expected one of {', '.join(METHODS)}")
    if client is None and spec.needs_model:
        raise PrivacyCIError(f"method {name!r} needs a model: give it an LLM client")
    if not spec.needs_model:
        client = None  # a model-free method reports no backend
    config = config or JudgeConfig()
    context = PipelineContext(
        client=client, settings=settings or GenerationSettings(), config=config, kb=kb
    )
    if spec.needs_kb:
        context.require_kb()  # missing data fails here, before any model call
    return Pipeline(name, spec.chain(config, retriever), context, spec)


def event_from_case(case: Case) -> Event:
    """The `Event` a method judges for a case: its narrative, id and flow (never its
    label or gold ids)."""
    return Event(text=case.text, id=case.id, flow=case.flow)
