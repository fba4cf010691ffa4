"""The definition dictionary read from the regulation tree itself (section 3.3).

The registry names each regulation's definition sections
(`RegulationSpec.definition_sections`: HIPAA 160.103, 164.103, 164.304 and 164.501;
GDPR Article 4; AI Act Article 3). Each child of such a section that defines a term
becomes one `Definition`: the term from the node id (``160.103(Business associate)``)
or, where the id is a number, from the quoted term the text opens with (``‘personal
data’ means ...``) or the words before "means"; the text is the node's and its
sub-paragraphs' text; the source is the node id.
"""

from __future__ import annotations

import re

from privacy_ci.errors import PrivacyCIError
from privacy_ci.knowledge import Definition, Definitions
from privacy_ci.regulations import RegulationTree, get_regulation

__all__ = ["definitions_from_tree", "term_of"]

_ID_TERM = re.compile(r"\(([^()]*[A-Za-z]{2}[^()]*)\)$")
_QUOTED = re.compile(r"^\s*(?:\(\d+\)\s*)?[‘'\"“]([^’'\"”]{2,80})[’'\"”]")
_MEANS = re.compile(r"^\s*(?:\(\d+\)\s*)?([A-Z][\w\s\-/,]{1,80}?)\s+(?:means|has the meaning)\b")


def term_of(node_id: str, text: str) -> str | None:
    """The term a definition node defines, or None when it defines none.

    Args:
        node_id: e.g. ``160.103(Business associate)`` or ``Article 4(1)``.
        text: the node's own text.

    Returns:
        e.g. ``Business associate``, ``personal data``.
    """
    found = _ID_TERM.search(node_id)
    if found and not found.group(1).strip().isdigit():
        return found.group(1).replace("%20", " ").strip()
    quoted = _QUOTED.match(text)
    if quoted:
        return quoted.group(1).strip()
    means = _MEANS.match(text)
    if means:
        return means.group(1).strip()
    return None


def definitions_from_tree(tree: RegulationTree) -> Definitions:
    """The definitions of the regulation's definition sections, in document order.

    Args:
        tree: the regulation tree (its ``regulation`` names the registry entry).

    Returns:
        The definitions; a section missing from the tree is noted in the report.

    Raises:
        PrivacyCIError: the registry names no definition section for the regulation.
    """
    spec = get_regulation(tree.regulation)
    if not spec.definition_sections:
        raise PrivacyCIError(
            f"{spec.name}: the registry names no definition sections (definition_sections)"
        )
    items: list[Definition] = []
    missing: list[str] = []
    for section in spec.definition_sections:
        section_id = tree.resolve(section)
        if section_id is None:
            missing.append(section)
            continue
        for child in tree.children(section_id):
            node = tree[child]
            term = term_of(child, node.text)
            if term is None:
                continue  # an introduction ("For the purposes of this Regulation ...")
            text = " ".join(t for t in (tree[n].text.strip() for n in tree.subtree(child)) if t)
            items.append(Definition(term, text, child))
    out = Definitions(
        tree.regulation, items, f"{tree.source} ({', '.join(spec.definition_sections)})"
    )
    if missing:
        out.report.odd_keys.update({m: "definition section not in the tree" for m in missing})
    return out
