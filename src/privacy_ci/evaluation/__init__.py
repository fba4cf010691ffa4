"""Evaluating judging methods on the case datasets: metrics, runs, baselines, reports.

* Metrics (`score`, `score_run`, `accuracy`, `per_class`, `macro_f1`,
  `confusion_matrix`, `wilson_interval`, `bootstrap_interval`, `mcnemar`,
  `binary_compliance`, `applicability`): pure functions over
  ``(gold, predicted | None)`` pairs; an unparsed prediction is always wrong.
* Baselines (`majority_baseline`, `health_rule_baseline`, `always_permit_baseline`,
  `baseline_scores`): model-free predictors computed on the same cases as every run.
* Cases with gold facts and pair ids (`gold_fact_metrics`, `law_from_gold`,
  `reading_scores`, `record_facts`, `pair_scores`): the law from gold facts,
  reading accuracy per fact, pair accuracy and flip rate.
* Runs (`run_eval`, `run_eval_sync`): judge a dataset with a `Method`,
  concurrently, one fsynced JSONL record per case, a manifest of everything
  that identifies the run, resume after a kill, ``metrics.json`` at the end.
* Reports (`load_run`, `build_report`, `write_report`): Markdown and
  self-contained HTML over several run folders (Tables 2-4 of the Privacy
  Checklist paper, confusion matrices, per-class F1 plot, McNemar tests).

Numbers from the scripted test backend (provider ``scripted-test-double``) are
never model accuracy: the report marks them in every table.
"""

from privacy_ci.evaluation._baselines import (
    HEALTH_INFORMATION,
    HEALTH_TERMS,
    Baseline,
    always_permit_baseline,
    baseline_scores,
    compute_baselines,
    health_rule_baseline,
    is_health_information,
    majority_baseline,
)
from privacy_ci.evaluation._cross_check import (
    CROSS_CHECK_COLUMNS,
    CROSS_CHECK_ROWS,
    cross_check_metrics,
)
from privacy_ci.evaluation._gold_facts import (
    gold_fact_metrics,
    law_from_gold,
    pair_groups,
    reading_scores,
    record_facts,
)
from privacy_ci.evaluation._metrics import (
    APPLICABILITY_CLASSES,
    COMPLIANCE_CLASSES,
    THREE_WAY_CLASSES,
    UNPARSED,
    ClassScores,
    ConfusionMatrix,
    Interval,
    McNemarResult,
    Pair,
    PairScores,
    RunScores,
    Scores,
    accuracy,
    applicability,
    binary_compliance,
    bootstrap_interval,
    confusion_matrix,
    macro_f1,
    mcnemar,
    pair_scores,
    per_class,
    proportion_bootstrap,
    score,
    score_run,
    wilson_interval,
)
from privacy_ci.evaluation._report import (
    Report,
    RunData,
    build_report,
    load_run,
    write_report,
)
from privacy_ci.evaluation._runner import (
    MANIFEST_FILE,
    METRICS_FILE,
    RECORDS_FILE,
    TEST_DOUBLE_PROVIDER,
    RunMismatch,
    RunResult,
    case_event,
    compute_metrics,
    is_test_double,
    read_records,
    run_eval,
    run_eval_sync,
)

__all__ = [
    "APPLICABILITY_CLASSES",
    "COMPLIANCE_CLASSES",
    "CROSS_CHECK_COLUMNS",
    "CROSS_CHECK_ROWS",
    "HEALTH_INFORMATION",
    "HEALTH_TERMS",
    "MANIFEST_FILE",
    "METRICS_FILE",
    "RECORDS_FILE",
    "TEST_DOUBLE_PROVIDER",
    "THREE_WAY_CLASSES",
    "UNPARSED",
    "Baseline",
    "ClassScores",
    "ConfusionMatrix",
    "Interval",
    "McNemarResult",
    "Pair",
    "PairScores",
    "Report",
    "RunData",
    "RunMismatch",
    "RunResult",
    "RunScores",
    "Scores",
    "accuracy",
    "always_permit_baseline",
    "applicability",
    "baseline_scores",
    "binary_compliance",
    "bootstrap_interval",
    "build_report",
    "case_event",
    "compute_baselines",
    "compute_metrics",
    "confusion_matrix",
    "cross_check_metrics",
    "gold_fact_metrics",
    "health_rule_baseline",
    "is_health_information",
    "is_test_double",
    "law_from_gold",
    "load_run",
    "macro_f1",
    "majority_baseline",
    "mcnemar",
    "pair_groups",
    "pair_scores",
    "per_class",
    "proportion_bootstrap",
    "read_records",
    "reading_scores",
    "record_facts",
    "run_eval",
    "run_eval_sync",
    "score",
    "score_run",
    "wilson_interval",
    "write_report",
]
