"""The labeling experiment of the Privacy Conductor (sections V-C to VI-D): an LLM
writes the document labels instead of the Policy Authority's annotator, and the
same deterministic gate shows what that does to the enforced policy.

    from privacy_ci.conductor import load_corpus
    from privacy_ci.labeling import Labeler, analyze_run, run_labeling
    from privacy_ci.llm import make_client

    corpus = load_corpus()
    run = await run_labeling(Labeler(make_client(), corpus), "runs/label-smollm2", draws=5)
    report = analyze_run(run, corpus)       # Tables VII-IX, attribution, controls
    report.conformance.privacy_violations   # flows the model's labels release

A user's corpus folder works the same way, documents without a label included:
their labels are drafts (`draft_labels`), reported as "drafted, no authored label".

Prompts (Appendix C) are files under ``labeling/prompts/``.
"""

from privacy_ci.labeling._analysis import (
    Adjudicator,
    Conformance,
    LabelDrafts,
    LabelingReport,
    Stability,
    analyze_run,
    attribute,
    conformance,
    draft_labels,
    label_problems,
    majority_label,
    model_labels,
)
from privacy_ci.labeling._labeler import (
    PARSE_RETRIES,
    Labeler,
    LabelingRun,
    LabelingRunMismatch,
    LabelRecord,
    corpus_documents,
    load_labeling_run,
    run_from_labels,
    run_labeling,
    subject_name,
)
from privacy_ci.labeling._prompts import LabelerPrompt, load_labeler_prompt, prompt_from_file
from privacy_ci.labeling._schema import (
    MODEL_FIELDS,
    LabelOutputError,
    ParsedDraft,
    ProposedLabel,
    draft_label,
    draft_schema,
    label_schema,
    parse_draft,
    parse_proposed,
    substitute,
)

__all__ = [
    "MODEL_FIELDS",
    "PARSE_RETRIES",
    "Adjudicator",
    "Conformance",
    "LabelDrafts",
    "LabelOutputError",
    "LabelRecord",
    "Labeler",
    "LabelerPrompt",
    "LabelingReport",
    "LabelingRun",
    "LabelingRunMismatch",
    "ParsedDraft",
    "ProposedLabel",
    "Stability",
    "analyze_run",
    "attribute",
    "conformance",
    "corpus_documents",
    "draft_label",
    "draft_labels",
    "draft_schema",
    "label_problems",
    "label_schema",
    "load_labeler_prompt",
    "load_labeling_run",
    "majority_label",
    "model_labels",
    "parse_draft",
    "parse_proposed",
    "prompt_from_file",
    "run_from_labels",
    "run_labeling",
    "subject_name",
    "substitute",
]
