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
* ``checklist-qa`` (`checklist_qa`): the ci-reasoner's candidate norms, each
  norm's condition questions answered by the model (yes / no / not stated with a
  verbatim quote, `checklist_schema`, `parse_checklist_answer`, `find_quote`),
  combined by the reasoner's verdict rule.
* The cross-check (`CrossChecker`, `cross_check`): the ci-reasoner beside any
  model's verdict, flagging permits whose conditions it finds unmet and
  prohibitions where it finds a permission's conditions met.
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
    CHECKLIST_ANSWERS,
    CHECKLIST_PARSE_RETRIES,
    ChecklistAnswer,
    checklist_qa,
    checklist_schema,
    find_quote,
    parse_checklist_answer,
    render_checklist_prompt,
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
    "CHECKLIST_ANSWERS",
    "CHECKLIST_PARSE_RETRIES",
    "CI_JSON_FIELDS",
    "CROSS_CHECK_REASONER",
    "FILTER_OPTIONS",
    "FLOW_DECISIONS",
    "FLOW_MISSING",
    "FLOW_NO_CONSENT",
    "FLOW_PARSE_RETRIES",
    "LETTERS",
    "METHODS",
    "VERDICT_OPTIONS",
    "ChainBuilder",
    "ChecklistAnswer",
    "CrossCheck",
    "CrossChecker",
    "Event",
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
    "RetrieverSource",
    "Step",
    "StepRecord",
    "build_method",
    "checklist_qa",
    "checklist_schema",
    "ci_schema",
    "cross_check",
    "decide",
    "default_retriever",
    "event_from_case",
    "explain",
    "extract_ci",
    "filter_rules",
    "find_quote",
    "flow_schema",
    "flow_values",
    "format_reference",
    "format_references",
    "id_list_grammar",
    "judge_flow",
    "load_prompt",
    "parse_checklist_answer",
    "parse_flow_answer",
    "parse_verdict",
    "parse_yes_no",
    "prompt_hashes",
    "propose_ids",
    "register_method",
    "render_checklist_prompt",
    "render_flow_prompt",
    "retrieve",
    "run_steps",
    "truncate_text",
]
