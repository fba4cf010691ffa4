"""The labeler (section V-C): a model writes each document's label once per draw,
from the document's title, type, subject name and full content, never from the
authored tier, ACL, extra-sensitive flag, requesters or assignments.

A run is a folder, like an evaluation run: ``manifest.json`` (what was asked of
which model, with which prompts, over which corpus) and ``records.jsonl`` (one
line per document and draw, every attempt's raw output kept), appended and
fsynced as each label finishes, so a killed run resumes without relabeling or
losing a finished document.

A user's corpus folder (``load_corpus(DIR)``) may hold documents with no label yet
(`Corpus.unlabelled`): they are drafted, with ``unknown`` for the type and subject
the prompt would otherwise take from the authored label, under their own template
(``labeler_draft_user``, which also asks for the data subject among the corpus's
known subjects; the paper's template is unchanged); their model labels are drafts
for the Policy Authority.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from privacy_ci._model_run import (
    RECORD_KEY,
    ask_each,
    ask_with_reasks,
    open_run_folder,
    read_run_folder,
)
from privacy_ci.conductor import Corpus, Label
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling._prompts import (
    DRAFT_USER_PROMPT,
    SYSTEM_PROMPT,
    USER_PROMPT,
    LabelerPrompt,
    load_labeler_prompt,
)
from privacy_ci.labeling._schema import (
    LabelOutputError,
    ParsedDraft,
    ProposedLabel,
    draft_schema,
    label_schema,
    parse_draft,
    parse_proposed,
)
from privacy_ci.llm import (
    Completion,
    GenerationSettings,
    LLMClient,
    system,
    user,
)

ORGANIZATION_SUBJECT = "organization-level (no individual subject)"
PARSE_RETRIES = 2
"""Appendix C: "A response that does not parse is retried twice and otherwise
recorded as an explicit failure"."""
UNKNOWN = "unknown"
"""The document type and subject the prompt shows for a document with no authored
label: nothing but its file says what it is, and the labeler never guesses a person."""


class LabelingRunMismatch(PrivacyCIError):
    """A run folder holds a different labeling run than the one asked for."""


def record_key(doc_id: str, draw: int) -> str:
    return f"{doc_id}#{draw}"


@dataclass(frozen=True, slots=True)
class LabelRecord:
    """One draw of one document: the label, or an explicit failure.

    Args:
        doc_id: the document.
        draw: 1-based draw number.
        proposed: the parsed label (None on failure).
        failure: why no label came back (None on success).
        attempts: every model call for it: raw text, why it did not parse, tokens,
            latency, whether it came from the cache.
        backend: ``provider:model``.
        subject: the data subject a draft names (a document with no authored label).
        notes: what was repaired in the model's output (e.g. a repeated role dropped).
    """

    doc_id: str
    draw: int
    proposed: ProposedLabel | None
    failure: str | None
    attempts: tuple[dict[str, Any], ...]
    backend: str
    subject: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.proposed is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            RECORD_KEY: record_key(self.doc_id, self.draw),
            "doc_id": self.doc_id,
            "draw": self.draw,
            "label": None if self.proposed is None else self.proposed.as_dict(),
            "failure": self.failure,
            "attempts": list(self.attempts),
            "backend": self.backend,
            # only on drafts: the experiment's records read as they always have
            **({"subject": self.subject} if self.subject is not None else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
        }


def corpus_documents(corpus: Corpus) -> list[str]:
    """Every document a labeler can label: the labelled ones in label-file order, then
    the ``documents/`` files no label names (sorted)."""
    return [*corpus.labels.ids, *corpus.unlabelled]


def document_texts(corpus: Corpus) -> dict[str, str]:
    """Every document's text (`corpus_documents` order), labelled or not."""
    texts = {doc_id: corpus.content(doc_id) for doc_id in corpus.labels.ids}
    texts.update((doc_id, corpus.document_text(doc_id)) for doc_id in corpus.unlabelled)
    return texts


def content_sha256(texts: Mapping[str, str]) -> str:
    """One hash of a corpus's documents (ids and texts): a changed folder changes it."""
    content = hashlib.sha256()
    for doc_id in sorted(texts):
        content.update(f"{doc_id}\0{texts[doc_id]}\0".encode())
    return content.hexdigest()


def unknown_document(corpus: Corpus, doc_id: str) -> PrivacyCIError:
    """The error for a document id the corpus has neither a label nor a file for."""
    ids = corpus.labels.ids
    listed = f" ({ids[0]} ... {ids[-1]})" if ids else ""
    without = len(corpus.unlabelled)
    extra = f" and {without} without a label" if without else ""
    return PrivacyCIError(
        f"unknown document {doc_id!r}; the corpus has {len(ids)} labelled documents{listed}{extra}"
    )


def subject_name(label: Label, corpus: Corpus) -> str:
    """The subject as the labeler sees it: a person's name, or organization-level."""
    if label.subject is None:
        return ORGANIZATION_SUBJECT
    return corpus.directory.person_name(label.subject) or label.subject


def known_subjects(corpus: Corpus) -> list[str]:
    """The subjects a draft may name: everyone some requester is assigned to."""
    return sorted(set().union(*corpus.assignments.values()))


def render_draft_prompt(
    corpus: Corpus, doc_id: str, template: LabelerPrompt, *, content: str | None = None
) -> str:
    """The drafting prompt for a document with no label: it also asks for the subject."""
    subjects = known_subjects(corpus)
    listed = (
        "\n".join(f"- {s} ({corpus.directory.person_name(s) or s})" for s in subjects)
        or "- (none: the corpus assigns nobody, so answer null)"
    )
    return template.render(
        title=doc_id,
        document_type=UNKNOWN,
        subject_name=UNKNOWN,
        content=corpus.document_text(doc_id) if content is None else content,
        known_subjects=listed,
    )


def render_user_prompt(
    corpus: Corpus,
    doc_id: str,
    template: LabelerPrompt | None = None,
    *,
    content: str | None = None,
) -> str:
    """The labeler's user prompt for one document.

    Only the title, document type, subject name and full content go in; the
    authored tier, ACL, extra-sensitive flag, requesters and assignments never do.
    A document with no label yet shows its id as title and `UNKNOWN` as type and
    subject.

    Args:
        corpus: the corpus.
        doc_id: the document.
        template: the user prompt (default: the paper's; for a document with no
            label, the drafting prompt, `render_draft_prompt`).
        content: the document text (default: the corpus's, `Corpus.document_text`).

    Raises:
        PrivacyCIError: the corpus has no such document.
    """
    label = corpus.labels.get(doc_id)
    if label is None and template is None and doc_id in corpus.unlabelled:
        return render_draft_prompt(
            corpus, doc_id, load_labeler_prompt(DRAFT_USER_PROMPT), content=content
        )
    template = template or load_labeler_prompt(USER_PROMPT)
    if label is None:
        if doc_id not in corpus.unlabelled:
            raise unknown_document(corpus, doc_id)
        return template.render(
            title=doc_id,
            document_type=UNKNOWN,
            subject_name=UNKNOWN,
            content=corpus.document_text(doc_id) if content is None else content,
        )
    return template.render(
        title=label.title or label.doc_id,
        document_type=label.document_type,
        subject_name=subject_name(label, corpus),
        content=corpus.content(doc_id) if content is None else content,
    )


class Labeler:
    """Asks a model for a document's label under a fixed prompt and schema.

    Args:
        client: the LLM client (its backend is named on every record).
        corpus: the corpus whose documents, policy and people are labeled.
        system_prompt: the system prompt (default: the paper's, Appendix C).
        user_prompt: the user prompt template (default: the paper's).
        settings: generation settings (default temperature 0, seed 0, 512 tokens);
            the label schema is always attached.
        parse_retries: re-asks after output that does not parse (paper: 2).
    """

    def __init__(
        self,
        client: LLMClient,
        corpus: Corpus,
        *,
        system_prompt: LabelerPrompt | None = None,
        user_prompt: LabelerPrompt | None = None,
        settings: GenerationSettings | None = None,
        parse_retries: int = PARSE_RETRIES,
    ) -> None:
        if parse_retries < 0:
            raise ValueError("parse_retries must be 0 or more")
        self.client = client
        self.corpus = corpus
        self.system_prompt = system_prompt or load_labeler_prompt(SYSTEM_PROMPT)
        self.user_prompt = user_prompt or load_labeler_prompt(USER_PROMPT)
        if self.system_prompt.variables:
            raise PrivacyCIError(
                f"system prompt {self.system_prompt.name!r} has variables"
                f" {sorted(self.system_prompt.variables)}; it is sent as is"
            )
        self.schema = label_schema(corpus.policy)
        base = settings or GenerationSettings()
        self.settings = replace(base, json_schema=self.schema, schema_name="document_label")
        # a document with no label (a user's corpus) is drafted: the subject is asked
        # for too, among the known ones; the paper's corpus has none, its prompt unchanged
        self.subjects = known_subjects(corpus)
        self.draft_prompt = load_labeler_prompt(DRAFT_USER_PROMPT)
        self.draft_settings = replace(
            base,
            json_schema=draft_schema(corpus.policy, self.subjects),
            schema_name="document_draft",
        )
        self.parse_retries = parse_retries
        # read once: labeling and the run's identity hash see the same texts
        self._contents = document_texts(corpus)

    @property
    def backend(self) -> str:
        return f"{self.client.backend.provider}:{self.client.backend.model}"

    @property
    def documents(self) -> list[str]:
        """Every document it can label (`corpus_documents`)."""
        return list(self._contents)

    def check_document(self, doc_id: str) -> None:
        """Raise `PrivacyCIError` naming the corpus unless `doc_id` is one of its documents."""
        if doc_id not in self._contents:
            raise unknown_document(self.corpus, doc_id)

    def prompt_for(self, doc_id: str) -> str:
        """The user prompt for a document: title, type, subject name and content only."""
        self.check_document(doc_id)
        if self.drafts(doc_id):
            return render_draft_prompt(
                self.corpus, doc_id, self.draft_prompt, content=self._contents[doc_id]
            )
        return render_user_prompt(
            self.corpus, doc_id, self.user_prompt, content=self._contents[doc_id]
        )

    def drafts(self, doc_id: str) -> bool:
        """Whether a document is drafted (no authored label, and the prompt not the user's)."""
        return doc_id in self.corpus.unlabelled and self.user_prompt.name == USER_PROMPT

    async def label(self, doc_id: str, draw: int, *, use_cache: bool = True) -> LabelRecord:
        """One draw for one document; a failure is a value, never an exception.

        Draw ``d``'s attempt ``a`` is sample ``(d - 1) * (parse_retries + 1) + a`` of
        the client, so every draw and every re-ask is its own call and cache entry.

        Args:
            doc_id: the document.
            draw: the draw number (from 1).
            use_cache: read the client's cache (off when a failed draw is retried,
                so the same failed output is not served again).

        Returns:
            The `LabelRecord`: a label, or an explicit failure with every attempt.
        """
        if draw < 1:
            raise ValueError("draws are numbered from 1")
        messages = [system(self.system_prompt.text), user(self.prompt_for(doc_id))]
        policy = self.corpus.policy
        drafting = self.drafts(doc_id)

        def parse(completion: Completion) -> ParsedDraft:
            data = _structured(completion)
            if drafting:
                return parse_draft(data, policy, self.subjects)
            return ParsedDraft(parse_proposed(data, policy), None, ())

        answer = await ask_with_reasks(
            self.client,
            messages,
            self.draft_settings if drafting else self.settings,
            draw=draw,
            parse_retries=self.parse_retries,
            use_cache=use_cache,
            parse=parse,
            output_error=LabelOutputError,
            unparsed=lambda _n, exc: f"output does not fit the label schema: {exc}",
        )
        got = answer.value
        return LabelRecord(
            doc_id,
            draw,
            None if got is None else got.proposed,
            answer.failure,
            answer.attempts,
            self.backend,
            None if got is None else got.subject,
            () if got is None else got.notes,
        )


def _structured(completion: Completion) -> object:
    if completion.parsed is not None:
        return completion.parsed
    if completion.parse_error:
        raise LabelOutputError(f"not JSON ({completion.parse_error})")
    try:
        return json.loads(completion.text)
    except ValueError as exc:
        raise LabelOutputError(f"not JSON ({exc})") from None


# -- runs --------------------------------------------------------------------------------
@dataclass
class LabelingRun:
    """A labeling run read back from its folder.

    Args:
        folder: where it lives.
        manifest: what was run (model, prompts, corpus, draws, settings).
        records: one `LabelRecord` per finished (document, draw).
    """

    folder: Path | None
    manifest: dict[str, Any]
    records: list[LabelRecord] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.manifest.get("name") or self.manifest.get("backend") or "run")

    @property
    def backend(self) -> str:
        return str(self.manifest.get("backend", "unknown"))

    @property
    def draws(self) -> int:
        return int(self.manifest.get("draws", 0))

    def draw(self, number: int) -> dict[str, ProposedLabel | None]:
        """Document id -> label (None: failed) of one draw, for the finished documents."""
        return {r.doc_id: r.proposed for r in self.records if r.draw == number}

    def failures(self) -> list[LabelRecord]:
        return [r for r in self.records if not r.ok]

    @property
    def corpus_folder(self) -> Path | None:
        """The corpus folder the run labeled, as its manifest records it (None: not recorded)."""
        source = self.manifest.get("identity", {}).get("corpus", {}).get("source")
        return None if not source else Path(source)

    @property
    def corpus_sha256(self) -> str | None:
        """The hash of the corpus's documents when the run began (`content_sha256`)."""
        value = self.manifest.get("identity", {}).get("corpus", {}).get("content_sha256")
        return None if value is None else str(value)

    def missing(self, doc_ids: Iterable[str]) -> list[str]:
        """Keys (``doc#draw``) the run asked for and has not finished."""
        done = {record_key(r.doc_id, r.draw) for r in self.records}
        return [
            record_key(d, n)
            for n in range(1, self.draws + 1)
            for d in doc_ids
            if record_key(d, n) not in done
        ]


def _corpus_identity(labeler: Labeler) -> dict[str, Any]:
    corpus = labeler.corpus
    source = None
    if corpus.source is not None:
        # absolute, so a resume from another directory (or export) finds the same folder;
        # an absolute path is kept exactly as it was, so older runs' identities still match
        where = corpus.source
        source = str(where) if where.is_absolute() else os.path.abspath(where)
    identity: dict[str, Any] = {
        "source": source,
        "documents": len(corpus.labels),
        "content_sha256": content_sha256(labeler._contents),
        "policy_version": _policy_version(corpus),
    }
    if corpus.unlabelled:  # only then: the packaged corpus's identity stays as it was
        identity["unlabelled"] = list(corpus.unlabelled)
        identity["draft"] = {
            "prompt_sha256": labeler.draft_prompt.sha256,
            "subjects": labeler.subjects,
        }
    return identity


def _policy_version(corpus: Corpus) -> str:
    from privacy_ci.conductor import Gate

    return Gate(corpus.policy).version


def _identity(labeler: Labeler, draws: int, doc_ids: Sequence[str]) -> dict[str, Any]:
    backend = labeler.client.backend
    return {
        "experiment": "conductor-labeling",
        "backend": labeler.backend,
        "provider": backend.provider,
        "model": backend.model,
        "base_url": getattr(backend, "base_url", None),
        "settings": replace(labeler.settings, json_schema=None).cache_key_part(),
        "schema_sha256": hashlib.sha256(
            json.dumps(labeler.schema, sort_keys=True).encode()
        ).hexdigest(),
        "prompts": {
            "system": {"name": labeler.system_prompt.name, "sha256": labeler.system_prompt.sha256},
            "user": {"name": labeler.user_prompt.name, "sha256": labeler.user_prompt.sha256},
        },
        "parse_retries": labeler.parse_retries,
        "draws": draws,
        "documents": list(doc_ids),
        "corpus": _corpus_identity(labeler),
    }


def _record_from_dict(data: Mapping[str, Any]) -> LabelRecord:
    label = data.get("label")
    proposed = None
    if label is not None:
        from privacy_ci.conductor import SensitivityTier

        proposed = ProposedLabel(
            SensitivityTier(label["sensitivity_tier"]),
            frozenset(label["permitted_receiver_roles"]),
            bool(label["extra_sensitive"]),
            str(label["governing_principle"]),
        )
    return LabelRecord(
        str(data["doc_id"]),
        int(data["draw"]),
        proposed,
        data.get("failure"),
        tuple(data.get("attempts") or ()),
        str(data.get("backend", "")),
        data.get("subject"),
        tuple(data.get("notes") or ()),
    )


def load_labeling_run(folder: Path | str) -> LabelingRun:
    """Read a labeling run folder (finished or not).

    Raises:
        PrivacyCIError: no manifest, or a damaged records file.
    """
    folder = Path(folder)
    manifest, records = read_run_folder(
        folder,
        experiment="conductor-labeling",
        what="a labeling run",
        command="privacy-ci label run",
        parse=_record_from_dict,
        key=lambda rec: record_key(rec.doc_id, rec.draw),  # a re-labeled failure wins
    )
    identity = manifest["identity"]
    flat = {
        "name": manifest.get("name"),
        "backend": identity.get("backend"),
        "draws": identity.get("draws"),
        **{k: v for k, v in manifest.items() if k != "identity"},
        "identity": identity,
    }
    ordered = sorted(records.values(), key=lambda r: (r.draw, r.doc_id))
    return LabelingRun(folder, flat, ordered)


async def run_labeling(
    labeler: Labeler,
    out_dir: Path | str,
    *,
    draws: int = 5,
    concurrency: int = 8,
    doc_ids: Sequence[str] | None = None,
    name: str | None = None,
    retry_failures: bool = False,
    on_record: Any = None,
) -> LabelingRun:
    """Label every document `draws` times into a run folder, resuming what is there.

    Args:
        labeler: the configured `Labeler`.
        out_dir: the run folder (created; an existing one with the same identity resumes).
        draws: complete relabelings of the corpus (paper: 5).
        concurrency: documents labeled at once.
        doc_ids: a subset of documents (default: all, in `corpus_documents` order,
            documents without a label included).
        name: a display name for reports (default: the backend).
        retry_failures: on resume, label again the (document, draw) pairs that failed.
        on_record: called with each new `LabelRecord` (progress).

    Returns:
        The `LabelingRun` with every record, old and new.

    Raises:
        LabelingRunMismatch: the folder holds a run with another identity.
    """
    if draws < 1:
        raise ValueError("draws must be at least 1")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    # a document listed twice is labeled once per draw (one record per key)
    ids = list(dict.fromkeys(doc_ids)) if doc_ids is not None else labeler.documents
    for doc_id in ids:
        labeler.check_document(doc_id)  # unknown ids fail here, before any call
    identity = _identity(labeler, draws, ids)
    out = Path(out_dir)

    def mismatch(old: Mapping[str, Any], diff: list[str]) -> PrivacyCIError:
        before = old.get("corpus", {}).get("content_sha256")
        changed = (
            f"the documents of {identity['corpus']['source'] or 'the corpus'} changed"
            " since it began; "
            if before != identity["corpus"]["content_sha256"]
            else ""
        )
        return LabelingRunMismatch(
            f"{out} holds another labeling run ({changed}{'; '.join(diff[:5])}); use a new folder"
        )

    run = open_run_folder(
        out,
        identity,
        fresh=lambda: {"name": name or labeler.backend, "identity": identity, "sessions": []},
        mismatch=mismatch,
    )
    done = {str(raw[RECORD_KEY]): raw for raw in run.records}
    todo = [
        (doc_id, n)
        for n in range(1, draws + 1)
        for doc_id in ids
        if record_key(doc_id, n) not in done
        or (retry_failures and done[record_key(doc_id, n)].get("label") is None)
    ]

    async def ask(item: tuple[str, int]) -> LabelRecord:
        doc_id, n = item
        # a failure being retried must not be answered from the cache again
        return await labeler.label(doc_id, n, use_cache=record_key(doc_id, n) not in done)

    await ask_each(
        run,
        labeler.client,
        todo,
        ask,
        concurrency=concurrency,
        counted="labeled",
        on_record=on_record,
    )
    return load_labeling_run(out)


def run_from_labels(
    label_sets: Sequence[Iterable[Label]], name: str = "labels", backend: str = "label files"
) -> LabelingRun:
    """A run whose draws are label files (e.g. a second annotator's), for comparison.

    Args:
        label_sets: one set of labels per draw (each `Label` contributes its four
            labeler fields; documents absent from a set count as failed).
        name: the display name.
        backend: who wrote them (shown in reports).

    Returns:
        A `LabelingRun` with no folder.
    """
    records: list[LabelRecord] = []
    labels_per_draw = [list(s) for s in label_sets]
    for n, labels in enumerate(labels_per_draw, start=1):
        for label in labels:
            records.append(LabelRecord(label.doc_id, n, ProposedLabel.of(label), None, (), backend))
    manifest = {"name": name, "backend": backend, "draws": len(labels_per_draw)}
    return LabelingRun(None, manifest, records)
