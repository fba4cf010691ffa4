"""A Conductor corpus: policy, agents, labels and the assignment relation, read
from one folder and cross-checked, and the documents' content (`Corpus.content`);
plus the packaged Riverside Medical Clinic corpus and the starter folder of
``privacy-ci corpus init``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from privacy_ci._files import file_problem, is_inside, resolved
from privacy_ci._structured import MAX_INPUT_BYTES_ENV, max_input_bytes
from privacy_ci.conductor._labels import Label, LabelSet, load_labels
from privacy_ci.conductor._policy import (
    POLICY_AUTHORITY_ROLE,
    Agent,
    Directory,
    Policy,
    Requester,
    load_assignments,
    load_directory,
    load_policy,
)
from privacy_ci.conductor._sources import (
    CONTENT_FOLDER,
    DOCUMENT_SUFFIXES,
    DOCUMENTS_FOLDER,
    DocumentFolder,
)
from privacy_ci.errors import PrivacyCIError, ValidationFailed

if TYPE_CHECKING:
    from privacy_ci.conductor._sources import ContentSource

T = TypeVar("T")

CORPUS_FILES = ("policy.yaml", "agents.yaml", "labels.yaml", "assignments.yaml")


def riverside_dir() -> Path:
    """The folder of the packaged Riverside Medical Clinic corpus."""
    return Path(str(resources.files("privacy_ci.conductor") / "corpus" / "riverside"))


def starter_dir() -> Path:
    """The packaged starter corpus that ``privacy-ci corpus init`` copies."""
    return Path(str(resources.files("privacy_ci.conductor") / "corpus" / "starter"))


@dataclass(frozen=True)
class Corpus:
    """Everything the gate needs about one organisation, validated together.

    Args:
        policy: the Policy Authority's policy.
        directory: the agents (and other data subjects).
        labels: one label per document.
        assignments: requester id -> subject ids.
        source: the folder it was read from; its ``content/`` (templates) or
            ``documents/`` (plain files) folder gives the documents' text.
    """

    policy: Policy
    directory: Directory
    labels: LabelSet
    assignments: dict[str, frozenset[str]]
    source: Path | None = None

    @property
    def agents(self) -> tuple[Agent, ...]:
        return self.directory.agents

    def agent(self, agent_id: str) -> Agent:
        agent = self.directory.agent(agent_id)
        if agent is None:
            known = ", ".join(a.id for a in self.agents)
            raise PrivacyCIError(f"unknown agent {agent_id!r}; known agents: {known}")
        return agent

    def label(self, doc_id: str) -> Label:
        label = self.labels.get(doc_id)
        if label is None:
            ids = self.labels.ids
            listed = f" ({ids[0]} ... {ids[-1]})" if ids else ""
            raise PrivacyCIError(
                f"unknown document {doc_id!r}; the corpus has {len(ids)} labelled documents"
                + listed
            )
        return label

    def requester(
        self, agent_id: str, *, role: str | None = None, context: str | None = None
    ) -> Requester:
        """The requester an agent becomes, acting in its own role and context unless overridden."""
        agent = self.agent(agent_id)
        return Requester.acting_as(
            agent, self.assignments.get(agent_id, frozenset()), role=role, context=context
        )

    def requesters(self) -> list[Requester]:
        return [self.requester(a.id) for a in self.agents]

    @cached_property
    def content_source(self) -> ContentSource:
        """Where the documents' text comes from (see `privacy_ci.conductor._sources`).

        Raises:
            PrivacyCIError: the corpus has no content, or its content cannot be read.
        """
        from privacy_ci.conductor._sources import content_source_for

        return content_source_for(self)

    def content(self, doc_id: str) -> str:
        """A document's full text, from the corpus's content source.

        Raises:
            PrivacyCIError: an unknown document, a corpus without content, or a
                document whose text is missing (naming the document and the path).
        """
        self.label(doc_id)
        return self.content_source.content(doc_id)

    @cached_property
    def unlabelled(self) -> tuple[str, ...]:
        """Documents in the ``documents/`` folder that no label names, sorted.

        They are documents all the same: `privacy_ci.store.load_corpus_into` stores
        their text, and with no label the gate grants them to nobody.
        """
        if self.source is None or not (self.source / DOCUMENTS_FOLDER).is_dir():
            return ()
        source = self.content_source
        if not isinstance(source, DocumentFolder):
            return ()
        return tuple(d for d in source.scan().doc_ids if d not in self.labels)

    def document_text(self, doc_id: str) -> str:
        """Any document's text, labelled or not (`content` knows labelled ones only).

        Raises:
            PrivacyCIError: the corpus has no content, or the document no readable text.
        """
        return self.content_source.content(doc_id)


def validate_corpus(
    policy: Policy,
    directory: Directory,
    labels: LabelSet,
    assignments: dict[str, frozenset[str]],
    where: str = "corpus",
) -> list[str]:
    """Cross-file problems: names used in one file that another file does not define."""
    problems: list[str] = []
    roles, contexts, people = set(policy.roles), set(policy.contexts), directory.person_ids
    for agent in directory.agents:
        if agent.role not in roles:
            problems.append(
                f"{where}/agents.yaml: agent {agent.id}: field role: {agent.role!r}"
                " is not a role of the policy"
            )
        elif policy.authoritative_context[agent.role] != agent.context:
            problems.append(
                f"{where}/agents.yaml: agent {agent.id}: context {agent.context!r} is not where"
                f" {agent.role!r} is authoritative ({policy.authoritative_context[agent.role]!r})"
            )
    if POLICY_AUTHORITY_ROLE in roles:
        problems.append(
            f"{where}/policy.yaml: field roles: {POLICY_AUTHORITY_ROLE!r} is reserved for the"
            " people who approve labels (agents.yaml: policy_authority), not a requester role"
        )
    for member in directory.policy_authority:
        if member.context not in contexts:
            problems.append(
                f"{where}/agents.yaml: policy_authority {member.id}: context"
                f" {member.context!r} is not a context of the policy"
            )
    for label in labels:
        entry = f"{where}/labels.yaml: document {label.doc_id!r}"
        unknown = sorted(label.permitted_receiver_roles - roles)
        if unknown:
            problems.append(f"{entry}: field permitted_receiver_roles: unknown role(s) {unknown}")
        requires = policy.requires_assignment(label.sensitivity_tier)
        if requires is None:
            problems.append(
                f"{entry}: field sensitivity_tier: {label.sensitivity_tier.value!r}"
                " is not a tier of the policy"
            )
        elif label.assignment_required != (requires and label.subject is not None):
            problems.append(
                f"{entry}: field assignment_required: {label.assignment_required} disagrees"
                f" with the policy's rule for tier {label.sensitivity_tier.value!r}"
            )
        if label.originating_context not in contexts:
            problems.append(
                f"{entry}: field originating_context: {label.originating_context!r}"
                " is not a context of the policy"
            )
        if label.subject is not None and label.subject not in people:
            problems.append(f"{entry}: field subject: {label.subject!r} is not a known person")
    agent_ids = {a.id for a in directory.agents}
    for requester, subjects in assignments.items():
        if requester not in agent_ids:
            problems.append(
                f"{where}/assignments.yaml: requester {requester!r}: {requester!r} is not an"
                " agent (agents.yaml: agents)"
            )
        for subject in sorted(subjects - people):
            problems.append(
                f"{where}/assignments.yaml: {requester}: {subject!r} is not a known person"
            )
    return problems


def validate_documents(root: Path, labels: LabelSet | None) -> list[str]:
    """Problems of a corpus's ``documents/`` folder, each naming the file and field.

    A file that cannot be a document (see `DocumentFolder.scan`), two files for one
    id, a label whose document has no file, and a folder with both ``content/`` and
    ``documents/``. Files that no label names are no problem: they are unlabelled
    documents, stored and granted to nobody.

    Args:
        root: the corpus folder.
        labels: its labels (None when the label file itself failed).
    """
    documents = root / DOCUMENTS_FOLDER
    if not documents.is_dir():
        return []
    if (root / CONTENT_FOLDER).is_dir():
        return [
            f"{root}: has both {CONTENT_FOLDER}/ (generated documents) and"
            f" {DOCUMENTS_FOLDER}/ (plain documents); keep the one its documents come from"
        ]
    folder = DocumentFolder(documents, root=root)
    outside = folder.outside_root()
    if outside is not None:  # not one of its files is read: none is "missing"
        return [outside]
    scan = folder.scan()
    problems = list(scan.problems)
    others = ", ".join(DOCUMENT_SUFFIXES[1:])
    for label in labels or ():
        if label.doc_id not in scan.files and label.doc_id not in scan.refused:
            problems.append(
                f"{labels.source if labels else root}: document {label.doc_id!r}: field doc_id:"
                f" its document file is missing: no {documents / label.doc_id}"
                f"{DOCUMENT_SUFFIXES[0]} (or {others})"
            )
    return problems


_CONTENT_NAME = f"the {CONTENT_FOLDER}/ folder"


def validate_content(root: Path) -> list[str]:
    """Problems of a corpus's ``content/`` folder's files, each naming the file: a table
    (``*.yaml``) or template (``templates/*.tmpl``) that is not a regular file inside
    the folder, or is larger than the input limit; a ``content/`` outside the corpus."""
    content = root / CONTENT_FOLDER
    if not content.is_dir():
        return []
    try:
        folder, inside = resolved(content), resolved(root)
    except OSError as exc:
        return [f"{content}: cannot be read ({exc.strerror})"]
    if not is_inside(folder, inside):
        return [
            f"{content}: resolves to {folder}, outside the corpus folder {inside};"
            " content is read only from inside it"
        ]
    limit = max_input_bytes()
    paths = [*sorted(content.glob("*.yaml")), *sorted((content / "templates").glob("*.tmpl"))]
    found = (
        file_problem(
            p, limit=limit, inside=folder, env=MAX_INPUT_BYTES_ENV, folder_name=_CONTENT_NAME
        )
        for p in paths
    )
    return [problem for problem in found if problem is not None]


def load_corpus(folder: Path | str | None = None) -> Corpus:
    """Read and cross-check a corpus folder (the packaged Riverside corpus by default).

    Args:
        folder: a folder with policy.yaml, agents.yaml, labels.yaml and assignments.yaml
            (YAML or .json with the same stem), and a ``content/`` or ``documents/``
            folder for the documents' text.

    Returns:
        The validated `Corpus`.

    Raises:
        ValidationFailed: every problem in every file, each naming file, entry and field.
    """
    root = riverside_dir() if folder is None else Path(folder)
    if not root.is_dir():
        raise PrivacyCIError(f"corpus folder {root} does not exist")
    problems: list[str] = []
    inside, limit = resolved(root), max_input_bytes()

    def find(name: str) -> Path | None:
        for candidate in (root / name, root / (Path(name).stem + ".json")):
            if candidate.is_symlink() or candidate.exists():
                # a regular file inside the folder (a link out of it, a FIFO or a device
                # is never opened), within the size bound
                problem = file_problem(
                    candidate,
                    limit=limit,
                    inside=inside,
                    env=MAX_INPUT_BYTES_ENV,
                    folder_name="the corpus folder",
                )
                if problem is not None:
                    problems.append(problem)
                    return None
                return candidate
        problems.append(f"{root}: missing {name} (or {Path(name).stem}.json)")
        return None

    def read(loader: Callable[[Path], T], name: str) -> T | None:
        # Every file is read even when an earlier one fails: one error lists all.
        path = find(name)
        if path is None:
            return None
        try:
            return loader(path)
        except ValidationFailed as exc:
            problems.extend(exc.problems)
            return None

    policy = read(load_policy, "policy.yaml")
    directory = read(load_directory, "agents.yaml")
    labels = read(load_labels, "labels.yaml")
    assignments = read(load_assignments, "assignments.yaml")
    if policy is not None and directory is not None and labels is not None:
        problems.extend(validate_corpus(policy, directory, labels, assignments or {}, str(root)))
    problems.extend(validate_documents(root, labels))
    problems.extend(validate_content(root))
    # (a file that was not read always left a problem; the None checks are for mypy)
    if problems or policy is None or directory is None or labels is None or assignments is None:
        raise ValidationFailed(problems)
    return Corpus(policy, directory, labels, assignments, root)
