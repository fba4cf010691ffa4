"""The regulation registry: one `RegulationSpec` per regulation, read by every caller.

Each entry names a regulation's files (relative to the data directory), their
formats, its root node, its id syntax and aliases, and its case datasets. The
knowledge base, gold-id resolution, dataset loading, retrieval evaluation and the
CLIs list regulations and find their files here and nowhere else, so adding a
regulation is one `register_regulation` call plus its data (see
``docs/architecture.md``, "Adding a regulation").

HIPAA, GDPR and the EU AI Act are registered when this module is imported.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from privacy_ci._views import LiveMapping
from privacy_ci.errors import PrivacyCIError
from privacy_ci.regulations._ecfr import ECFR_FILES
from privacy_ci.regulations._ids import PRINTED_ID_ERRATA, IdSyntax

if TYPE_CHECKING:
    from privacy_ci.data import Source
    from privacy_ci.regulations._graphml import LoadReport
    from privacy_ci.regulations._tree import RegulationTree

__all__ = [
    "CaseTask",
    "DefinitionsFormat",
    "KBFormat",
    "RegistryError",
    "RegistryView",
    "RegulationCases",
    "RegulationSpec",
    "TreeFormat",
    "UnknownRegulation",
    "find_regulation",
    "get_regulation",
    "load_regulation_tree",
    "register_regulation",
    "regulation_keys",
    "regulations",
    "unregister_regulation",
]

TreeFormat = Literal["checklist", "privaci"]
"""GraphML tree formats: ``checklist`` (node attribute ``text``, the Privacy Checklist /
GoldCoin HIPAA trees) or ``privaci`` (node attribute ``data`` = JSON ``{content,
refer_list}``, the PrivaCI-Bench law trees)."""

KBFormat = Literal["checklist", "privaci"]
"""KB formats: ``checklist`` (``{node_id: entry}`` JSON, ``kb_annotated.json``) or
``privaci`` (PrivaCI-Bench JSONL, every value JSON-encoded twice)."""

DefinitionsFormat = Literal["checklist", "flat"]
"""Definition formats: ``checklist`` (``{term: {content, source}}``) or ``flat``
(``{term: text}``)."""

CaseTask = Literal["three_way", "compliance"]
"""What a regulation's case dataset scores (a `privacy_ci.cases.Task` value)."""

TREE_VARIANTS = ("ecfr", "published")
"""Tree variants: parsed from eCFR pages (regulations that have them) or the GraphML file."""


class RegistryError(PrivacyCIError, ValueError):
    """A regulation entry is invalid, or its key is already taken."""


class UnknownRegulation(PrivacyCIError, ValueError):
    """A regulation key that no registry entry has (the message lists the known keys)."""


@dataclass(frozen=True)
class RegulationCases:
    """A regulation's case file in the PrivaCI-Bench JSONL format (dataset ``privaci-<key>``).

    Args:
        file: the JSONL file, relative to the data directory.
        task: ``three_way`` (permit / prohibit / not applicable) or ``compliance``
            (permit vs prohibit).
        description: one line for `privacy_ci.cases.list_datasets`.
        paper: the paper or table the dataset reproduces.
    """

    file: str
    task: CaseTask
    description: str
    paper: str = ""


@dataclass(frozen=True)
class RegulationSpec:
    """Everything the code needs to know about one regulation.

    Paths are relative to the data directory (`privacy_ci.data.data_dir`, or a
    ``data_dir`` argument), with ``/`` separators.

    Args:
        key: the short name used everywhere (``hipaa``, ``gdpr``, ``ai_act``):
            lowercase letters, digits and ``_``.
        name: the display name used in messages (``HIPAA``, ``GDPR``, ``AI Act``).
        root: the tree's root node id (``HIPAA``, ``GDPR``, ``EU_AI_ACT``).
        tree: the GraphML tree file (the ``published`` variant).
        kb: the annotated norms file.
        definitions: the definition dictionary file.
        ids: the node-id syntax (`IdSyntax`): ``cfr``, ``article`` or ``dotted``.
        tree_format: `TreeFormat` of ``tree``.
        kb_format: `KBFormat` of ``kb``.
        definitions_format: `DefinitionsFormat` of ``definitions``.
        role_graph: the role graph file (GraphML, the Checklist format), if any.
        attribute_graph: the attribute graph file, if any.
        ecfr: eCFR pages; when given, the default tree (variant ``ecfr``) is parsed
            from them and ``tree`` becomes the ``published`` variant. Only HIPAA's
            pages (`ECFR_FILES`) have a parser.
        aliases: other spellings of node ids -> node id, used when an id resolves
            no other way (e.g. ids the source prints wrongly).
        titles: the names article mentions cite the law by (``GDPR``, ``General Data
            Protection Regulation``), ignored when reading a mention; an ``of the
            <name> Act`` that is no registered title is another law.
        kb_strict: the KB loader's policy (True: any defect raises; False: defective
            entries are skipped into the report); None: the loader's per-file
            default (`privacy_ci.knowledge.STRICT_DEFAULTS`, else strict).
        cases: the regulation's PrivaCI-Bench-format case file, if any.
        datasets: other case datasets judged against this regulation (by
            `privacy_ci.cases` name), listed before ``privaci-<key>`` for retrieval
            evaluation.
        sources: manifest entries (`privacy_ci.data.Source`) of this regulation's
            files that the built-in manifest does not list, so that
            ``privacy-ci data fetch/verify/status`` cover them.
        definition_sections: the tree nodes whose children define the regulation's
            terms (``160.103``, ``Article 4``): `privacy-ci kb build` reads its
            definition dictionary from them.
        training_cases: a case dataset (by `privacy_ci.cases` name) of labelled
            training cases that the ``cases`` and ``hybrid-cases`` retrievers
            remember (HIPAA: ``synthetic``, the GoldCoin training set); None: none.
    """

    key: str
    name: str
    root: str
    tree: str
    kb: str
    definitions: str
    ids: IdSyntax
    tree_format: TreeFormat = "privaci"
    kb_format: KBFormat = "privaci"
    definitions_format: DefinitionsFormat = "flat"
    role_graph: str | None = None
    attribute_graph: str | None = None
    ecfr: tuple[str, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)
    titles: tuple[str, ...] = ()
    kb_strict: bool | None = None
    cases: RegulationCases | None = None
    datasets: tuple[str, ...] = ()
    sources: tuple[Source, ...] = ()
    definition_sections: tuple[str, ...] = ()
    training_cases: str | None = None

    def problems(self) -> list[str]:
        """What is wrong with this entry (empty when it can be registered).

        Returns:
            One message per problem, naming the field.
        """
        out: list[str] = []
        if not self.key or not all(ch.islower() or ch.isdigit() or ch == "_" for ch in self.key):
            out.append(f"key {self.key!r}: use lowercase letters, digits and '_'")
        for name in ("name", "root", "tree", "kb", "definitions"):
            if not str(getattr(self, name)).strip():
                out.append(f"{name}: must not be empty")
        for name, value, allowed in (
            ("tree_format", self.tree_format, TreeFormat),
            ("kb_format", self.kb_format, KBFormat),
            ("definitions_format", self.definitions_format, DefinitionsFormat),
        ):
            if value not in get_args(allowed):
                out.append(f"{name} {value!r}: expected one of {', '.join(get_args(allowed))}")
        if not isinstance(self.ids, IdSyntax):
            out.append(f"ids {self.ids!r}: expected an IdSyntax")
        if self.ecfr and self.ecfr != ECFR_FILES:
            # the eCFR parser builds the HIPAA tree (root HIPAA, 45 CFR 160/162/164)
            out.append("ecfr: only the HIPAA pages (privacy_ci.regulations.ECFR_FILES) parse")
        if self.cases is not None and self.cases.task not in get_args(CaseTask):
            out.append(f"cases.task {self.cases.task!r}: expected three_way or compliance")
        for path in self.files():
            if path.startswith("/") or "\\" in path or ".." in path.split("/"):
                out.append(f"{path!r}: give paths relative to the data directory, with '/'")
        return out

    @property
    def tree_variants(self) -> tuple[str, ...]:
        """The trees it can be loaded with, the default first."""
        return TREE_VARIANTS if self.ecfr else ("published",)

    @property
    def default_tree(self) -> str:
        """The tree variant used unless another is asked for."""
        return self.tree_variants[0]

    def check_tree(self, variant: str) -> str:
        """Validate a tree variant.

        Args:
            variant: ``ecfr`` or ``published``.

        Returns:
            The variant; for a regulation without eCFR pages, always ``published``.

        Raises:
            RegistryError: an unknown variant.
        """
        if variant not in TREE_VARIANTS:
            raise RegistryError(f"hipaa_tree must be 'ecfr' or 'published', not {variant!r}")
        return variant if variant in self.tree_variants else "published"

    def tree_files(self, variant: str | None = None) -> tuple[str, ...]:
        """The files a tree variant is read from.

        Args:
            variant: ``ecfr`` or ``published`` (default `default_tree`).

        Returns:
            The eCFR pages, or the GraphML file.
        """
        chosen = self.check_tree(variant or self.default_tree)
        return self.ecfr if chosen == "ecfr" else (self.tree,)

    def kb_files(self) -> dict[str, str]:
        """The knowledge base's files by role (``tree``, ``norms``, ``definitions``,
        ``role_graph``, ``attribute_graph``; the graphs only when it has them)."""
        out = {"tree": self.tree, "norms": self.kb, "definitions": self.definitions}
        if self.role_graph is not None:
            out["role_graph"] = self.role_graph
        if self.attribute_graph is not None:
            out["attribute_graph"] = self.attribute_graph
        return out

    def files(self) -> tuple[str, ...]:
        """Every data file the entry names (KB files, eCFR pages, case file)."""
        out = [*self.kb_files().values(), *self.ecfr]
        if self.cases is not None:
            out.append(self.cases.file)
        return tuple(dict.fromkeys(out))

    @property
    def case_dataset(self) -> str | None:
        """The name of its PrivaCI-Bench-format dataset (``privaci-<key>``), if any."""
        return f"privaci-{self.key}" if self.cases is not None else None

    @property
    def eval_datasets(self) -> tuple[str, ...]:
        """The datasets judged against it: ``datasets``, then ``privaci-<key>``."""
        own = (self.case_dataset,) if self.case_dataset is not None else ()
        return tuple(dict.fromkeys((*self.datasets, *own)))


_REGISTRY: dict[str, RegulationSpec] = {}
_LOCK = threading.Lock()


def register_regulation(spec: RegulationSpec, *, replace: bool = False) -> RegulationSpec:
    """Add a regulation to the registry.

    Args:
        spec: the entry.
        replace: allow replacing an entry with the same key.

    Returns:
        The entry.

    Raises:
        RegistryError: the entry is invalid (every problem listed), or the key is
            taken and ``replace`` is False.
    """
    problems = spec.problems()
    if problems:
        raise RegistryError(f"regulation {spec.key!r}: " + "; ".join(problems))
    with _LOCK:
        if spec.key in _REGISTRY and not replace and _REGISTRY[spec.key] != spec:
            raise RegistryError(f"regulation {spec.key!r} is already registered")
        _REGISTRY[spec.key] = spec
    return spec


def unregister_regulation(key: str) -> RegulationSpec:
    """Remove a regulation from the registry (for tests and plug-ins).

    Args:
        key: the regulation key.

    Returns:
        The removed entry.

    Raises:
        UnknownRegulation: no entry has that key.
    """
    with _LOCK:
        spec = _REGISTRY.pop(key, None)
    if spec is None:
        raise _unknown(key)
    return spec


def find_regulation(key: str) -> RegulationSpec | None:
    """The entry of a regulation, or None.

    Args:
        key: the regulation key.

    Returns:
        The entry or None.
    """
    return _REGISTRY.get(key)


def _unknown(key: str) -> UnknownRegulation:
    known = ", ".join(_REGISTRY) or "none"
    return UnknownRegulation(f"unknown regulation {key!r}; expected one of {known}")


def get_regulation(key: str) -> RegulationSpec:
    """The entry of a regulation.

    Args:
        key: the regulation key (``hipaa``, ``gdpr``, ``ai_act``, or a registered one).

    Returns:
        The entry.

    Raises:
        UnknownRegulation: no entry has that key (the message lists the known keys).
    """
    spec = _REGISTRY.get(key)
    if spec is None:
        raise _unknown(key)
    return spec


def regulations() -> tuple[RegulationSpec, ...]:
    """Every registered regulation, in registration order (built-ins first).

    Returns:
        The entries.
    """
    return tuple(_REGISTRY.values())


def regulation_keys() -> tuple[str, ...]:
    """The keys of every registered regulation, in registration order.

    Returns:
        The keys.
    """
    return tuple(_REGISTRY)


RegistryView = LiveMapping
"""A read-only mapping recomputed from the registry on every access (`LiveMapping`).

It keeps older tables (``KB_FILES``, ``TREE_FILES``, ``DEFINITION_FILES``,
``DATASET_REGULATION``) importable while the registry stays their only source."""


def load_regulation_tree(
    key: str, data_dir: Path | str | None = None, variant: str | None = None
) -> tuple[RegulationTree, LoadReport | None]:
    """Load a regulation's tree as its registry entry says.

    Args:
        key: the regulation key.
        data_dir: the data directory (default `privacy_ci.data.data_dir()`).
        variant: ``ecfr`` or ``published`` (default the entry's `default_tree`).

    Returns:
        The tree, and the GraphML loader's report (None for an eCFR tree).

    Raises:
        UnknownRegulation: unknown key.
        RegistryError: unknown variant.
        DataMissingError: a file is missing (eCFR pages).
        TreeError: a file cannot be parsed.
    """
    from privacy_ci.regulations._graphml import load_hipaa_graphml, load_privaci_law_tree

    spec = get_regulation(key)
    chosen = spec.check_tree(variant or spec.default_tree)
    if data_dir is None:
        from privacy_ci.data import data_dir as default_data_dir

        root = default_data_dir()
    else:
        root = Path(data_dir)
    if chosen == "ecfr":
        from privacy_ci.regulations._ecfr import load_ecfr_tree

        return load_ecfr_tree(root), None
    path = root / spec.tree
    if spec.tree_format == "checklist":
        return load_hipaa_graphml(path, spec.key, root=spec.root)
    return load_privaci_law_tree(path, spec.key)


# ---------------------------------------------------------------------------------
# the built-in regulations
# ---------------------------------------------------------------------------------
def _privaci_bench(
    key: str,
    name: str,
    root: str,
    ids: IdSyntax,
    titles: tuple[str, ...],
    task: CaseTask,
    cases: str,
    definition_sections: tuple[str, ...] = (),
) -> RegulationSpec:
    """A PrivaCI-Bench regulation: its law tree, KB, (fork) definitions and cases."""
    return RegulationSpec(
        key=key,
        name=name,
        root=root,
        titles=titles,
        tree=f"law_trees/{key}.graphml",
        kb=f"kb/privaci_bench/{key}.jsonl",
        definitions=f"law_trees/definitions/{key}.json",
        ids=ids,
        cases=RegulationCases(f"cases/privaci_bench/{key}.jsonl", task, cases, "PrivaCI-Bench"),
        definition_sections=definition_sections,
    )


for _spec in (
    RegulationSpec(
        key="hipaa",
        name="HIPAA",
        root="HIPAA",
        tree="hipaa/regulation_tree_goldcoin.graphml",
        tree_format="checklist",
        kb="hipaa/kb_annotated.json",
        kb_format="checklist",
        definitions="hipaa/definitions.json",
        definitions_format="checklist",
        role_graph="hipaa/role_graph.graphml",
        attribute_graph="hipaa/attribute_graph.graphml",
        ids=IdSyntax.CFR,
        ecfr=ECFR_FILES,
        aliases=PRINTED_ID_ERRATA,
        cases=RegulationCases(
            "cases/privaci_bench/hipaa.jsonl",
            "three_way",
            "PrivaCI-Bench HIPAA, 214 court-case flows (same cases as real), three-way",
            "Privacy Conductor section V-G (external policy authority)",
        ),
        datasets=("real", "synthetic"),
        definition_sections=("160.103", "164.103", "164.304", "164.501"),
        training_cases="synthetic",
    ),
    _privaci_bench(
        "gdpr",
        "GDPR",
        "GDPR",
        IdSyntax.ARTICLE,
        ("GDPR", "General Data Protection Regulation"),
        "compliance",
        "PrivaCI-Bench GDPR, 3137 enforcement-decision flows, permit vs prohibit",
        ("Article 4",),
    ),
    _privaci_bench(
        "ai_act",
        "AI Act",
        "EU_AI_ACT",
        IdSyntax.DOTTED,
        ("AI Act", "Artificial Intelligence Act"),
        "three_way",
        "PrivaCI-Bench EU AI Act, 3000 generated flows, three-way",
        ("EU_AI_ACT.chapter1.article3",),
    ),
):
    register_regulation(_spec)
