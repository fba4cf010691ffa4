"""LLM judging with the Privacy Checklist (sections 4-5 of the paper), and the
Privacy Conductor paper's judge-only flow judge (section V-G).

    from privacy_ci.judging import build_method, event_from_case
    from privacy_ci.llm import make_client
    method = build_method("bm25-content", make_client())
    judgment = await method.judge(event_from_case(case))   # verdict, cited ids, steps

* The method registry (`METHODS`, `register_method`, `build_method`): the paper's
  six, ``dp``, ``cot-auto``, ``cot-manual``, ``agent-id``, ``bm25-content``,
  ``ci-es-content``, and the flow judge; each `MethodSpec` builds its chain of
  steps, and each built method reports its `MethodIdentity` for run manifests.
* ``checklist-qa`` (`checklist_qa`): the facts of the disclosure read by a model
  in one call (`render_facts_prompt`, `facts_answer_schema`, `parse_facts_answer`),
  each answer's quote verified against the narrative (`check_quote`, `find_quote`:
  found there, and more than a word such as "no"), then the law engine.
* The cross-check (`CrossChecker`, `cross_check`): the ci-reasoner (facts, then
  law) beside any model's verdict, flagging a permit where the law, on the facts
  read, prohibits, and a prohibit where it permits.
* ``flow-judge`` (`judge_flow`): the CI five-tuple and the narrative, one
  structured decision + rationale (`flow_schema`, `parse_flow_answer`), re-asked
  up to twice when it does not parse.
* Steps, one module each (`decide`, `explain`, `retrieve`, `filter_rules`,
  `propose_ids`, `extract_ci`, `judge_flow`), run by `run_steps` over a
  `PipelineState` and a `PipelineContext`, with `JudgeConfig` (k, retriever,
  reference length, constrained decoding).
* Prompts (`load_prompt`, `prompt_hashes`), parsing (`parse_verdict`,
  `parse_yes_no`), values (`Event`, `StepRecord`, `Judgment`, `Method`).
"""

from privacy_ci.judging._checklist_qa import (
    FACTS_QA_PARSE_RETRIES,
    FACTS_QA_UNKNOWN,
    QUOTE_MIN_WORDS,
    FactsAnswer,
    QuoteCheck,
    check_quote,
    checklist_qa,
    facts_answer_schema,
    find_quote,
    parse_facts_answer,
    render_facts_prompt,
)
from privacy_ci.judging._ci import CI_JSON_FIELDS, ci_schema
from privacy_ci.judging._config import JudgeConfig
from privacy_ci.judging._cross_check import (
    CROSS_CHECK_REASONER,
    CrossCheck,
    CrossChecker,
    cross_check,
)
from privacy_ci.judging._decide import VERDICT_OPTIONS, decide
from privacy_ci.judging._explain import explain
from privacy_ci.judging._extract_ci import extract_ci
from privacy_ci.judging._filter import FILTER_OPTIONS, filter_rules
from privacy_ci.judging._flow import (
    FLOW_DECISIONS,
    FLOW_MISSING,
    FLOW_NO_CONSENT,
    FLOW_PARSE_RETRIES,
    FlowAnswer,
    flow_schema,
    flow_values,
    judge_flow,
    parse_flow_answer,
    render_flow_prompt,
)
from privacy_ci.judging._methods import (
    METHODS,
    ChainBuilder,
    MethodSpec,
    Pipeline,
    build_method,
    default_retriever,
    event_from_case,
    register_method,
)
from privacy_ci.judging._parse import LETTERS, ParsedVerdict, parse_verdict, parse_yes_no
from privacy_ci.judging._pipeline import (
    PipelineContext,
    PipelineState,
    QuerySource,
    RetrieverSource,
    Step,
    format_reference,
    format_references,
    run_steps,
    truncate_text,
)
from privacy_ci.judging._prompts import PromptTemplate, load_prompt, prompt_hashes
from privacy_ci.judging._propose_ids import id_list_grammar, propose_ids
from privacy_ci.judging._retrieve import retrieve
from privacy_ci.judging._types import Event, Judgment, Method, MethodIdentity, StepRecord

__all__ = [
    "CI_JSON_FIELDS",
    "CROSS_CHECK_REASONER",
    "FACTS_QA_PARSE_RETRIES",
    "FACTS_QA_UNKNOWN",
    "FILTER_OPTIONS",
    "FLOW_DECISIONS",
    "FLOW_MISSING",
    "FLOW_NO_CONSENT",
    "FLOW_PARSE_RETRIES",
    "LETTERS",
    "METHODS",
    "QUOTE_MIN_WORDS",
    "VERDICT_OPTIONS",
    "ChainBuilder",
    "CrossCheck",
    "CrossChecker",
    "Event",
    "FactsAnswer",
    "FlowAnswer",
    "JudgeConfig",
    "Judgment",
    "Method",
    "MethodIdentity",
    "MethodSpec",
    "ParsedVerdict",
    "Pipeline",
    "PipelineContext",
    "PipelineState",
    "PromptTemplate",
    "QuerySource",
    "QuoteCheck",
    "RetrieverSource",
    "Step",
    "StepRecord",
    "build_method",
    "check_quote",
    "checklist_qa",
    "ci_schema",
    "cross_check",
    "decide",
    "default_retriever",
    "event_from_case",
    "explain",
    "extract_ci",
    "facts_answer_schema",
    "filter_rules",
    "find_quote",
    "flow_schema",
    "flow_values",
    "format_reference",
    "format_references",
    "id_list_grammar",
    "judge_flow",
    "load_prompt",
    "parse_facts_answer",
    "parse_flow_answer",
    "parse_verdict",
    "parse_yes_no",
    "prompt_hashes",
    "propose_ids",
    "register_method",
    "render_facts_prompt",
    "render_flow_prompt",
    "retrieve",
    "run_steps",
    "truncate_text",
]
