"""The condition catalogue: a regulation's norms compiled into checklists (data, not code).

A catalogue file (YAML, ``catalogue/<regulation>.yaml``) has three parts:

``applicability``
    When the regulation governs a flow at all: the senders it binds (role-graph
    terms, e.g. ``covered entity``, ``business associate``), the information it
    protects (attribute-graph terms, e.g. ``health information``), and the
    `Ground`\\ s on which it does not apply (employment records held as employer,
    education records, de-identified data, an individual sharing their own
    information ...), each with the paragraph it comes from and its cues.

``norms``
    One `NormEntry` per norm group that permits or prohibits uses and disclosures:
    the CI `Pattern` it applies to (sender, recipient and subject roles through the
    role graph, information types through the attribute graph, purposes), its
    effect, and its `Condition`\\ s: each with an id, the paragraph it comes from, a
    plain-language question, and evidence `Cues` (phrases that state it as met, and
    phrases that state it as not met).

Every paragraph id is checked against the regulation tree and every role or
attribute term against the graphs when the catalogue loads; a bad file is one
error naming the file, the entry and the field (`CatalogueError`).

Cues are short phrases taken from the regulation's own wording and the knowledge
base's annotations, never from case narratives; they are matched on lemmas, so
``signed an authorization`` also matches ``signs the authorization``. Negation
and its scope (``no authorization was signed``, ``without a court order``) are
the NLP layer's job (`privacy_ci.reasoning._evidence`): a cue for "met" found
negated counts as evidence of "not met".
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

__all__ = [
    "Catalogue",
    "CatalogueError",
    "Condition",
    "Cues",
    "Effect",
    "Ground",
    "NormEntry",
    "Pattern",
    "catalogue_path",
    "load_catalogue",
]


class CatalogueError(PrivacyCIError):
    """A catalogue file that does not load: every problem names file, entry and field."""


class Effect(StrEnum):
    """What a norm does to the flows it applies to."""

    PERMIT = "permit"
    PROHIBIT = "prohibit"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _phrases(values: Sequence[Any]) -> tuple[str, ...]:
    out = []
    for value in values:
        # str() would turn a stray mapping or number into a phrase that matches nothing
        if not isinstance(value, str):
            raise ValueError(f"a phrase must be a string, not {type(value).__name__}")
        text = " ".join(value.split())
        if not text:
            raise ValueError("an empty phrase")
        out.append(text)
    if len({v.casefold() for v in out}) != len(out):
        raise ValueError("a phrase is listed twice")
    return tuple(out)


class Cues(_Strict):
    """Evidence phrases: what states a condition (or ground) as met, and as not met.

    Args:
        met: phrases that state it as met (found negated, they state it as not met).
        not_met: phrases that state it as not met outright (``without consent``).
    """

    met: tuple[str, ...] = ()
    not_met: tuple[str, ...] = ()

    @field_validator("met", "not_met", mode="before")
    @classmethod
    def _clean(cls, values: Any) -> tuple[str, ...]:
        if values is None:
            return ()
        if isinstance(values, str) or not isinstance(values, Sequence):
            raise ValueError("expected a list of phrases")
        return _phrases(values)


class Condition(_Strict):
    """One requirement of a norm.

    Args:
        id: unique within the catalogue (``valid-authorization``).
        paragraph: the tree node it comes from (``164.508(c)``).
        question: the plain-language question (``Did the individual sign ...?``).
        cues: the evidence phrases.
    """

    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")
    paragraph: str = Field(min_length=1)
    question: str = Field(min_length=8)
    cues: Cues

    @field_validator("question")
    @classmethod
    def _a_question(cls, text: str) -> str:
        if not text.rstrip().endswith("?"):
            raise ValueError("a question ends with '?'")
        return text.strip()


class Pattern(_Strict):
    """The flows a norm applies to. An empty list means: any.

    Args:
        senders / recipients / subjects: role-graph terms; a party matches when its
            role is the term or falls under it in the role graph.
        information: attribute-graph terms, matched the same way.
        purposes: purpose phrases (matched on lemmas against the flow's purpose
            and the narrative).
    """

    senders: tuple[str, ...] = ()
    recipients: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    information: tuple[str, ...] = ()
    purposes: tuple[str, ...] = ()

    @field_validator("purposes")
    @classmethod
    def _clean_purposes(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return _phrases(values)  # an empty phrase would match every narrative


class NormEntry(_Strict):
    """A norm group compiled into a checklist.

    Args:
        id: unique within the catalogue (``164.506-treatment``).
        paragraph: the tree node of the norm (``164.506(c)(2)``).
        title: one line.
        effect: permit or prohibit.
        pattern: the flows it applies to.
        conditions: what must hold for it (a permitting norm permits when they hold;
            a prohibiting norm prohibits when they hold).
        requires: ``all`` conditions, or ``any`` one of them (alternatives, e.g. a
            court order *or* satisfactory assurances).
    """

    id: str = Field(min_length=1, pattern=r"^[0-9a-z][0-9a-z.()-]*$")
    paragraph: str = Field(min_length=1)
    title: str = Field(min_length=3)
    effect: Effect
    pattern: Pattern = Pattern()
    conditions: tuple[Condition, ...] = ()
    requires: Literal["all", "any"] = "all"


class Ground(_Strict):
    """A ground on which the regulation does not apply to a flow.

    Args:
        id: unique within the catalogue.
        paragraph: the tree node it comes from.
        question: the plain-language question (yes means: not applicable).
        cues: the evidence phrases (met: the ground holds).
    """

    id: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")
    paragraph: str = Field(min_length=1)
    question: str = Field(min_length=8)
    cues: Cues


class Applicability(_Strict):
    """When the regulation governs a flow.

    Args:
        paragraph: where the scope is defined (``160.103(Protected health information)``).
        senders: role-graph terms of the parties it binds.
        information: attribute-graph terms of the information it protects.
        information_cues: phrases that name protected information in a narrative.
        identifying_cues: phrases that name information which is protected only when a
            bound party holds it (demographic identifiers): it counts when the narrative
            names such a party.
        grounds: the grounds on which it does not apply.
    """

    paragraph: str
    senders: tuple[str, ...] = ()
    information: tuple[str, ...] = ()
    information_cues: tuple[str, ...] = ()
    identifying_cues: tuple[str, ...] = ()
    grounds: tuple[Ground, ...] = ()

    @field_validator("information_cues", "identifying_cues")
    @classmethod
    def _clean_cues(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        return _phrases(values)


class Catalogue(_Strict):
    """A regulation's condition catalogue (see the module docstring)."""

    regulation: str
    version: int = Field(ge=1)
    applicability: Applicability
    norms: tuple[NormEntry, ...]

    # Not Field(min_length=1): pydantic adds that error whenever any entry is invalid,
    # a second, misleading line beside the real one.
    @field_validator("norms")
    @classmethod
    def _some_norms(cls, norms: tuple[NormEntry, ...]) -> tuple[NormEntry, ...]:
        if not norms:
            raise ValueError("a catalogue needs at least one norm entry")
        return norms

    def norm(self, norm_id: str) -> NormEntry:
        """The entry with this id.

        Raises:
            PrivacyCIError: no such entry.
        """
        for entry in self.norms:
            if entry.id == norm_id:
                return entry
        raise PrivacyCIError(f"no catalogue entry {norm_id!r} for {self.regulation}")

    def conditions(self) -> dict[str, Condition]:
        """Every condition by id."""
        return {c.id: c for n in self.norms for c in n.conditions}


@dataclass(frozen=True)
class _Where:
    file: str

    def at(self, loc: Sequence[Any], data: Any) -> str:
        """``file: norms[3] (id '164.506-treatment'): field conditions.0.question``."""
        if len(loc) >= 2 and loc[0] in ("norms",) and isinstance(loc[1], int):
            entry = f"norms[{loc[1]}]"
            with contextlib.suppress(KeyError, IndexError, TypeError):
                entry += f" (id {data['norms'][loc[1]]['id']!r})"
            rest = ".".join(str(p) for p in loc[2:]) or "(entry)"
            return f"{self.file}: {entry}: field {rest}"
        return f"{self.file}: field {'.'.join(str(p) for p in loc) or '(top level)'}"


def catalogue_path(regulation: str) -> Path:
    """The packaged catalogue file of a regulation."""
    return Path(str(resources.files("privacy_ci.reasoning") / "catalogue" / f"{regulation}.yaml"))


def load_catalogue(source: str | Path = "hipaa", kb: KnowledgeBase | None = None) -> Catalogue:
    """Read, validate and cross-check a catalogue.

    Args:
        source: a regulation key (the packaged file) or a file path.
        kb: the knowledge base to check paragraph ids and graph terms against
            (default: the catalogue's regulation's, loaded here).

    Returns:
        The catalogue.

    Raises:
        CatalogueError: the file is missing, not YAML, or any entry is invalid;
            every problem names the file, the entry and the field.
    """
    from privacy_ci._structured import DuplicateKeyError, load_yaml

    path = (
        Path(source)
        if isinstance(source, Path) or str(source).endswith((".yaml", ".yml"))
        else None
    )
    if path is None:
        path = catalogue_path(str(source))
    where = _Where(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogueError(f"{path}: no condition catalogue (file not found)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogueError(f"{path}: cannot read the catalogue ({exc})") from None
    try:
        data = load_yaml(text)
    except DuplicateKeyError as exc:
        raise CatalogueError("; ".join(f"{path}: {d}" for d in exc.duplicates)) from None
    except Exception as exc:  # yaml.YAMLError and its kin: one line with the position
        raise CatalogueError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from None
    if not isinstance(data, Mapping):
        raise CatalogueError(f"{path}: expected a mapping with regulation, applicability, norms")
    try:
        catalogue = Catalogue.model_validate(data)
    except ValidationError as exc:
        lines = [f"{where.at(e['loc'], data)}: {e['msg']}" for e in exc.errors()]
        raise CatalogueError("\n".join(lines)) from None
    problems = _cross_check(catalogue, where, kb)
    if problems:
        raise CatalogueError("\n".join(problems))
    return catalogue


def _cross_check(catalogue: Catalogue, where: _Where, kb: KnowledgeBase | None) -> list[str]:
    """Unique ids, paragraphs in the tree, role and attribute terms in the graphs."""
    problems: list[str] = []
    ids: dict[str, str] = {}

    def unique(kind: str, ident: str, at: str) -> None:
        if ident in ids:
            problems.append(f"{at}: {kind} id {ident!r} is used twice (also {ids[ident]})")
        ids[ident] = at

    for i, norm in enumerate(catalogue.norms):
        unique("norm", norm.id, f"{where.file}: norms[{i}]")
        for j, cond in enumerate(norm.conditions):
            unique(
                "condition", cond.id, f"{where.file}: norms[{i}] (id {norm.id!r}).conditions[{j}]"
            )
    for k, ground in enumerate(catalogue.applicability.grounds):
        unique("ground", ground.id, f"{where.file}: applicability.grounds[{k}]")
    if kb is None:
        from privacy_ci.knowledge import load_knowledge_base

        kb = load_knowledge_base(catalogue.regulation)
    if kb.regulation != catalogue.regulation:
        problems.append(
            f"{where.file}: field regulation: {catalogue.regulation!r}, but the knowledge"
            f" base given is {kb.regulation!r}"
        )
        return problems

    def paragraph(at: str, node: str) -> None:
        if node not in kb.tree.nodes and kb.tree.resolve(node) is None:
            problems.append(f"{at}: field paragraph: {node!r} is not a node of the tree")

    def terms(at: str, field_name: str, values: Sequence[str], graph: Any, what: str) -> None:
        # A built knowledge base (`kb build`) has graphs of its own vocabulary: a catalogue
        # term they lack is matched by spelling alone (as with no graph), not an error.
        if graph is None or "folder" in kb.sources:
            return
        for term in values:
            if term not in graph:
                problems.append(f"{at}: field {field_name}: {term!r} is not a term of the {what}")

    app = catalogue.applicability
    paragraph(f"{where.file}: applicability", app.paragraph)
    terms(f"{where.file}: applicability", "senders", app.senders, kb.role_graph, "role graph")
    terms(
        f"{where.file}: applicability",
        "information",
        app.information,
        kb.attribute_graph,
        "attribute graph",
    )
    for k, ground in enumerate(app.grounds):
        paragraph(f"{where.file}: applicability.grounds[{k}] (id {ground.id!r})", ground.paragraph)
    for i, norm in enumerate(catalogue.norms):
        at = f"{where.file}: norms[{i}] (id {norm.id!r})"
        paragraph(at, norm.paragraph)
        for field_name in ("senders", "recipients", "subjects"):
            terms(
                at,
                f"pattern.{field_name}",
                getattr(norm.pattern, field_name),
                kb.role_graph,
                "role graph",
            )
        terms(
            at,
            "pattern.information",
            norm.pattern.information,
            kb.attribute_graph,
            "attribute graph",
        )
        for j, cond in enumerate(norm.conditions):
            paragraph(f"{at}.conditions[{j}] (id {cond.id!r})", cond.paragraph)
    return problems
