"""LLM judging with the Privacy Checklist (sections 4-5 of the paper), and the
Privacy Conductor paper's judge-only flow judge (section V-G).

    from privacy_ci.judging import build_method, event_from_case
    from privacy_ci.llm import make_client
    method = build_method("bm25-content", make_client())
    judgment = await method.judge(event_from_case(case))   # verdict, cited ids, steps

* The six methods (`METHODS`, `build_method`): ``dp``, ``cot-auto``, ``cot-manual``,
  ``agent-id``, ``bm25-content``, ``ci-es-content``; each a `Pipeline` of steps.
* ``flow-judge`` (`judge_flow`): the CI five-tuple and the narrative, one
  structured decision + rationale (`flow_schema`, `parse_flow_answer`), re-asked
  up to twice when it does not parse.
* Steps (`decide`, `explain`, `retrieve`, `filter_rules`, `propose_ids`,
  `extract_ci`, `run_steps`) over a `PipelineState` and a `PipelineContext`, with
  `JudgeConfig` (k, retriever, reference length, constrained decoding).
* Prompts (`load_prompt`, `prompt_hashes`), parsing (`parse_verdict`,
  `parse_yes_no`), values (`Event`, `StepRecord`, `Judgment`, `Method`).
"""

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
    MethodSpec,
    Pipeline,
    build_method,
    default_retriever,
    event_from_case,
)
from privacy_ci.judging._parse import LETTERS, ParsedVerdict, parse_verdict, parse_yes_no
from privacy_ci.judging._prompts import PromptTemplate, load_prompt, prompt_hashes
from privacy_ci.judging._steps import (
    CI_JSON_FIELDS,
    FILTER_OPTIONS,
    VERDICT_OPTIONS,
    JudgeConfig,
    PipelineContext,
    PipelineState,
    QuerySource,
    RetrieverSource,
    Step,
    ci_schema,
    decide,
    explain,
    extract_ci,
    filter_rules,
    format_reference,
    format_references,
    id_list_grammar,
    propose_ids,
    retrieve,
    run_steps,
    truncate_text,
)
from privacy_ci.judging._types import Event, Judgment, Method, StepRecord

__all__ = [
    "CI_JSON_FIELDS",
    "FILTER_OPTIONS",
    "FLOW_DECISIONS",
    "FLOW_MISSING",
    "FLOW_NO_CONSENT",
    "FLOW_PARSE_RETRIES",
    "LETTERS",
    "METHODS",
    "VERDICT_OPTIONS",
    "Event",
    "FlowAnswer",
    "JudgeConfig",
    "Judgment",
    "Method",
    "MethodSpec",
    "ParsedVerdict",
    "Pipeline",
    "PipelineContext",
    "PipelineState",
    "PromptTemplate",
    "QuerySource",
    "RetrieverSource",
    "Step",
    "StepRecord",
    "build_method",
    "ci_schema",
    "decide",
    "default_retriever",
    "event_from_case",
    "explain",
    "extract_ci",
    "filter_rules",
    "flow_schema",
    "flow_values",
    "format_reference",
    "format_references",
    "id_list_grammar",
    "judge_flow",
    "load_prompt",
    "parse_flow_answer",
    "parse_verdict",
    "parse_yes_no",
    "prompt_hashes",
    "propose_ids",
    "render_flow_prompt",
    "retrieve",
    "run_steps",
    "truncate_text",
]
