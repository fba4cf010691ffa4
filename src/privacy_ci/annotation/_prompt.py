"""The Table 5 annotation prompt (Privacy Checklist, Appendix D) and its answer format.

`ci_annotation.txt` is Table 5 word for word; `ci_annotation_answer.txt` is our own
one-paragraph answer format (JSON keyed by the paper's question labels), appended
after it so every backend, constrained or not, is asked for the same shape. The
deviations are listed in ``prompts/README.md``.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from privacy_ci._prompt import PromptTemplate
from privacy_ci.errors import PrivacyCIError
from privacy_ci.regulations import RegulationTree, get_regulation

__all__ = [
    "ANNOTATION_PROMPT",
    "ANSWER_PROMPT",
    "AnnotationPrompt",
    "load_annotation_prompt",
    "reference_list",
    "render_annotation_prompt",
]

ANNOTATION_PROMPT = "ci_annotation"
ANSWER_PROMPT = "ci_annotation_answer"
_PAPER_REGULATION = "HIPAA Privacy Rule"


class AnnotationPrompt(PromptTemplate):
    """A prompt whose variables are Table 5's ``<Regulation ID>`` blocks."""

    variable = re.compile(r"<(Regulation ID|Regulation Content|Regulation Reference List)>")


@cache
def load_annotation_prompt(name: str) -> AnnotationPrompt:
    """A packaged prompt: ``ci_annotation`` (Table 5) or ``ci_annotation_answer``.

    Raises:
        PrivacyCIError: no such prompt.
    """
    path = resources.files("privacy_ci.annotation") / "prompts" / f"{name}.txt"
    if not path.is_file():
        raise PrivacyCIError(f"no annotation prompt {name!r}")
    return AnnotationPrompt(name, path.read_text(encoding="utf-8").rstrip("\n"))


def reference_list(references: tuple[str, ...]) -> str:
    """How a node's references fill ``<Regulation Reference List>``: ``[a, b]``."""
    return "[" + ", ".join(references) + "]"


def render_annotation_prompt(
    tree: RegulationTree, node_id: str, references: tuple[str, ...]
) -> str:
    """The user message for one leaf: Table 5 with the node's full specification and
    references, then the answer format.

    For a regulation other than HIPAA, "HIPAA Privacy Rule" names that regulation
    instead (the one change to Table 5's words; see ``prompts/README.md``).

    Args:
        tree: the regulation tree.
        node_id: the leaf.
        references: the node's references (ids of the tree), in order.

    Returns:
        The prompt text.
    """
    values = {
        "Regulation ID": node_id,
        "Regulation Content": tree.full_specification(node_id),
        "Regulation Reference List": reference_list(references),
    }
    table5 = load_annotation_prompt(ANNOTATION_PROMPT)
    answer = load_annotation_prompt(ANSWER_PROMPT)
    text = _render(table5, values) + "\n\n" + _render(answer, values)
    if tree.regulation != "hipaa":
        text = text.replace(_PAPER_REGULATION, get_regulation(tree.regulation).name, 1)
    return text


def _render(template: AnnotationPrompt, values: dict[str, str]) -> str:
    # PromptTemplate.render takes keyword names; these variables contain spaces
    used = {k: v for k, v in values.items() if k in template.variables}
    return template.variable.sub(lambda m: used[m.group(1)], template.text)
