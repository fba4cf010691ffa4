"""Building a regulation's Privacy Checklist with a model (sections 3.2-3.3, Table 5).

* `Annotator`, `run_annotation`, `load_annotation_run`: every leaf of a regulation
  tree through the Table 5 prompt (`prompts/ci_annotation.txt`), answers parsed
  strictly (`parse_annotation`), re-asked, failures recorded; resumable run folders.
* `estimate_cost`: what a build costs, without a model (``kb build --dry-run``).
* `write_kb_folder`: the run's norms, the definitions read from the tree
  (`definitions_from_tree`), the role graph (`build_role_graph`, WordNet from a
  package: `load_wordnet`) and the attribute graph (`build_attribute_graph`) as a
  knowledge base folder (`privacy_ci.knowledge.load_kb_folder`).
* `compare_knowledge_bases`: field-by-field agreement with a published KB.
"""

from privacy_ci.annotation._assemble import (
    TAXONOMY_FILE,
    KBFolderSummary,
    norm_entry,
    write_kb_folder,
)
from privacy_ci.annotation._attributes import (
    AttributeGraphBuild,
    build_attribute_graph,
    write_attribute_graph,
)
from privacy_ci.annotation._compare import (
    SEMANTIC_MODEL,
    SEMANTIC_THRESHOLD,
    Comparison,
    compare_knowledge_bases,
)
from privacy_ci.annotation._definitions import definitions_from_tree, term_of
from privacy_ci.annotation._prompt import (
    ANNOTATION_PROMPT,
    ANSWER_PROMPT,
    load_annotation_prompt,
    render_annotation_prompt,
)
from privacy_ci.annotation._roles import RoleGraphBuild, build_role_graph, write_role_graph
from privacy_ci.annotation._run import (
    PARSE_RETRIES,
    AnnotationRun,
    Annotator,
    BuildRunMismatch,
    CostEstimate,
    NodeRecord,
    estimate_cost,
    load_annotation_run,
    run_annotation,
    select_leaves,
)
from privacy_ci.annotation._schema import (
    Annotation,
    AnnotationOutputError,
    annotation_schema,
    parse_annotation,
)
from privacy_ci.annotation._terms import head_phrase, split_terms
from privacy_ci.annotation._wordnet import WordNet, WordNetMissing, load_wordnet, wordnet_folder

__all__ = [
    "ANNOTATION_PROMPT",
    "ANSWER_PROMPT",
    "PARSE_RETRIES",
    "SEMANTIC_MODEL",
    "SEMANTIC_THRESHOLD",
    "TAXONOMY_FILE",
    "Annotation",
    "AnnotationOutputError",
    "AnnotationRun",
    "Annotator",
    "AttributeGraphBuild",
    "BuildRunMismatch",
    "Comparison",
    "CostEstimate",
    "KBFolderSummary",
    "NodeRecord",
    "RoleGraphBuild",
    "WordNet",
    "WordNetMissing",
    "annotation_schema",
    "build_attribute_graph",
    "build_role_graph",
    "compare_knowledge_bases",
    "definitions_from_tree",
    "estimate_cost",
    "head_phrase",
    "load_annotation_prompt",
    "load_annotation_run",
    "load_wordnet",
    "norm_entry",
    "parse_annotation",
    "render_annotation_prompt",
    "run_annotation",
    "select_leaves",
    "split_terms",
    "term_of",
    "wordnet_folder",
    "write_attribute_graph",
    "write_kb_folder",
    "write_role_graph",
]
