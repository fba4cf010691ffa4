"""The evaluation datasets, each under a named protocol.

* `load_dataset(name)` / `list_datasets()`: GoldCoin's real and synthetic HIPAA
  cases (``real``, ``synthetic``) and its CSV splits
  (``goldcoin-{real,synthetic,val}-{applicability,compliance}``), and PrivaCI-Bench
  (``privaci-{hipaa,gdpr,ai_act,aclu}``).
* `Case`: one narrative with CI fields, a `privacy_ci.ci.Verdict` label, gold ids
  as written and the tree nodes they resolve to; `Case.flow` is its `privacy_ci.ci.Flow`.
* `Dataset`: the cases plus their `Protocol` (task, label set, inclusion rule,
  gold field, source file and sha256) and a `DatasetReport`; ``label_counts``,
  ``applicable`` and deterministic stratified ``sample``.
* Packaged with the code (`PACKAGED_DATASETS`, `packaged_path`): ``pairs-dev`` and
  ``pairs-validation`` (development data), ``pairs-heldout`` and ``cases-heldout``
  (for measuring only), HIPAA cases and minimal pairs whose cases carry gold facts
  (`Case.gold_facts`, a `GoldFacts`) and pair ids (`Case.pair_id`).
* `load_case_file(path)` (also `load_dataset(path)`): a user's JSON/JSONL file of
  cases in the GoldCoin or PrivaCI-Bench schema, as a three-way dataset named after
  the file's stem; `read_case_file` validates a file's entries without labels
  (`UserCase`), e.g. for ``privacy-ci judge --case``.
* Gold-id resolution (`gold_resolver`, `parse_article_mention`): HIPAA ids through
  the tree's aliases, GDPR free-form mentions to ``Article N``/``Article N(p)``,
  AI Act ``Article N`` to its dotted node; trees loaded lazily, once per process.
"""

from privacy_ci.cases._case import (
    CI_FIELDS,
    VERDICT_ORDER,
    Case,
    Dataset,
    DatasetReport,
    GoldFacts,
    Protocol,
    SkippedRow,
    Task,
    UnresolvedGold,
)
from privacy_ci.cases._gold import (
    TREE_FILES,
    ArticleRef,
    GoldKind,
    GoldResolution,
    GoldResolver,
    clear_tree_cache,
    gold_resolver,
    parse_article_mention,
)
from privacy_ci.cases._loaders import (
    DATASET_NAMES,
    LABEL_SPELLINGS,
    PACKAGED_DATASETS,
    UnknownDataset,
    list_datasets,
    load_dataset,
    packaged_path,
    parse_label,
)
from privacy_ci.cases._user import UserCase, load_case_file, read_case_file

__all__ = [
    "CI_FIELDS",
    "DATASET_NAMES",
    "LABEL_SPELLINGS",
    "PACKAGED_DATASETS",
    "TREE_FILES",
    "VERDICT_ORDER",
    "ArticleRef",
    "Case",
    "Dataset",
    "DatasetReport",
    "GoldFacts",
    "GoldKind",
    "GoldResolution",
    "GoldResolver",
    "Protocol",
    "SkippedRow",
    "Task",
    "UnknownDataset",
    "UnresolvedGold",
    "UserCase",
    "clear_tree_cache",
    "gold_resolver",
    "list_datasets",
    "load_case_file",
    "load_dataset",
    "packaged_path",
    "parse_article_mention",
    "parse_label",
    "read_case_file",
]
