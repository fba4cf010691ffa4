"""Annotating a regulation's leaves with a model (sections 3.2, Appendix D): the runs.

A build is a folder, like an evaluation or labeling run: ``manifest.json`` (the
regulation, tree hash, model, settings, prompt hashes, which leaves) and
``records.jsonl`` (one line per leaf: the parsed annotation or an explicit failure,
with every attempt's raw output), appended and fsynced as each leaf finishes, so a
killed build resumes without re-asking or losing a finished leaf. Another build's
folder (a different identity) is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from privacy_ci._model_run import (
    MANIFEST_FILE,
    RECORD_KEY,
    RECORDS_FILE,
    ask_each,
    ask_with_reasks,
    open_run_folder,
    read_run_folder,
)
from privacy_ci.annotation._prompt import (
    ANNOTATION_PROMPT,
    ANSWER_PROMPT,
    load_annotation_prompt,
    render_annotation_prompt,
)
from privacy_ci.annotation._schema import (
    CHARACTERISTICS,
    Annotation,
    AnnotationOutputError,
    annotation_schema,
    parse_annotation,
)
from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import (
    Capability,
    Completion,
    GenerationSettings,
    LLMClient,
    capabilities_of,
    parse_structured,
    user,
)
from privacy_ci.regulations import RegulationTree

__all__ = [
    "EXPERIMENT",
    "MANIFEST_FILE",
    "PARSE_RETRIES",
    "RECORDS_FILE",
    "AnnotationRun",
    "Annotator",
    "BuildRunMismatch",
    "CostEstimate",
    "NodeRecord",
    "estimate_cost",
    "load_annotation_run",
    "run_annotation",
    "select_leaves",
]

EXPERIMENT = "kb-build"
PARSE_RETRIES = 2
"""Re-asks after an answer that does not parse (Appendix D: "We re-run the prompt
whenever we encounter a pattern-matching failure"; bounded here, then a failure)."""
CONSTRAINED_FIELD_CHARS = 96
"""``maxLength`` of each characteristic when the backend asks for constrained answers."""
CHARS_PER_TOKEN = 4.0
"""The dry run's token estimate: about four characters per token (English text with
the GPT-family tokenizers); no tokenizer is loaded and no model is called."""
MEAN_FIELD_CHARS = 22
"""Mean length of a characteristic in the published HIPAA KB (22.3 characters), used
to estimate an answer's size."""


class BuildRunMismatch(PrivacyCIError):
    """The folder holds a build with another identity (regulation, tree, model, ...)."""


def select_leaves(
    tree: RegulationTree, only: str | None = None, limit: int | None = None
) -> list[str]:
    """The leaves a build annotates, in document order.

    Args:
        tree: the regulation tree.
        only: a node id (any spelling the tree resolves; its subtree's leaves) or an id
            prefix (``164.5`` -> every leaf whose id starts so).
        limit: at most this many (the first in document order).

    Returns:
        The leaf ids.

    Raises:
        PrivacyCIError: nothing matches `only`, or `limit` is below 1.
    """
    if limit is not None and limit < 1:
        raise PrivacyCIError(f"--limit must be at least 1, not {limit}")
    leaves = [n.id for n in tree.leaves()]
    if only:
        node = tree.resolve(only)
        if node is not None:
            inside = set(tree.subtree(node))
            leaves = [leaf for leaf in leaves if leaf in inside]
        else:
            leaves = [leaf for leaf in leaves if leaf.startswith(only)]
        if not leaves:
            raise PrivacyCIError(
                f"{tree.regulation}: no leaf of the tree is {only!r} or starts with it"
            )
    return leaves[:limit] if limit is not None else leaves


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One leaf's annotation, or an explicit failure.

    Args:
        node_id: the leaf.
        draw: 1-based draw number.
        annotation: the parsed answer (None on failure).
        failure: why no annotation came back (None on success).
        references: the node's references as asked (``Q5``'s keys).
        attempts: every model call: raw text, why it did not parse, tokens, latency.
        backend: ``provider:model``.
    """

    node_id: str
    draw: int
    annotation: Annotation | None
    failure: str | None
    references: tuple[str, ...]
    attempts: tuple[dict[str, Any], ...]
    backend: str

    @property
    def ok(self) -> bool:
        return self.annotation is not None

    @property
    def key(self) -> str:
        return f"{self.node_id}#{self.draw}"

    def as_dict(self) -> dict[str, Any]:
        return {
            RECORD_KEY: self.key,
            "node_id": self.node_id,
            "draw": self.draw,
            "annotation": None if self.annotation is None else self.annotation.as_dict(),
            "failure": self.failure,
            "references": list(self.references),
            "attempts": list(self.attempts),
            "backend": self.backend,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeRecord:
        ann = data.get("annotation")
        return cls(
            str(data["node_id"]),
            int(data["draw"]),
            None if ann is None else Annotation.from_dict(ann),
            data.get("failure"),
            tuple(data.get("references") or ()),
            tuple(data.get("attempts") or ()),
            str(data.get("backend", "")),
        )


class Annotator:
    """Asks a model Table 5's questions about one leaf at a time.

    Args:
        client: the LLM client (its backend is named on every record).
        tree: the regulation tree (full specifications and references come from it).
        settings: generation settings (default temperature 0, seed 0); the answer
            schema is attached where the backend takes one.
        parse_retries: re-asks after an answer that does not parse.
    """

    def __init__(
        self,
        client: LLMClient,
        tree: RegulationTree,
        *,
        settings: GenerationSettings | None = None,
        parse_retries: int = PARSE_RETRIES,
    ) -> None:
        if parse_retries < 0:
            raise ValueError("parse_retries must be 0 or more")
        self.client = client
        self.tree = tree
        caps = capabilities_of(client.backend)
        # constrained output where the backend supports it; strict parsing otherwise
        self.structured = Capability.JSON_SCHEMA in caps
        self.field_chars = CONSTRAINED_FIELD_CHARS if caps.constrain_by_default else None
        self.settings = replace(settings or GenerationSettings(), grammar=None, json_schema=None)
        self.parse_retries = parse_retries

    @property
    def backend(self) -> str:
        return f"{self.client.backend.provider}:{self.client.backend.model}"

    def references(self, node_id: str) -> tuple[str, ...]:
        return self.tree.refs(node_id)

    def prompt_for(self, node_id: str) -> str:
        return render_annotation_prompt(self.tree, node_id, self.references(node_id))

    def settings_for(self, node_id: str) -> GenerationSettings:
        if not self.structured:
            return self.settings
        schema = annotation_schema(self.references(node_id), self.field_chars)
        return replace(self.settings, json_schema=schema, schema_name="ci_annotation")

    async def annotate(self, node_id: str, draw: int = 1, *, use_cache: bool = True) -> NodeRecord:
        """One leaf; a failure is a value, never an exception.

        Draw ``d``'s attempt ``a`` is sample ``(d - 1) * (parse_retries + 1) + a`` of the
        client, so every re-ask is its own call and cache entry.
        """
        refs = self.references(node_id)
        answer = await ask_with_reasks(
            self.client,
            [user(self.prompt_for(node_id))],
            self.settings_for(node_id),
            draw=draw,
            parse_retries=self.parse_retries,
            use_cache=use_cache,
            parse=lambda completion: parse_annotation(_decoded(completion), refs),
            output_error=AnnotationOutputError,
            unparsed=lambda n, exc: f"answer does not fit the schema after {n} attempt(s): {exc}",
        )
        return NodeRecord(
            node_id, draw, answer.value, answer.failure, refs, answer.attempts, self.backend
        )


def _decoded(completion: Completion) -> object:
    if completion.parsed is not None:
        return completion.parsed
    value, problem = parse_structured(completion.text)
    if problem is not None:
        raise AnnotationOutputError(f"not JSON ({problem})")
    return value


# -- cost -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CostEstimate:
    """What a build would ask, without asking (``kb build --dry-run``).

    Args:
        nodes: leaves to annotate.
        calls: one call per leaf (``max_calls`` if every answer were re-asked to the limit).
        max_calls: the bound with every re-ask.
        prompt_tokens: estimated prompt tokens of the first attempts.
        completion_tokens: estimated answer tokens of the first attempts.
        prompt_chars: the prompts' exact characters.
        references: references asked about (``Q5`` keys), over all leaves.
        method: how tokens were estimated.
    """

    nodes: int
    calls: int
    max_calls: int
    prompt_tokens: int
    completion_tokens: int
    prompt_chars: int
    references: int
    method: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "calls": self.calls,
            "max_calls": self.max_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "prompt_chars": self.prompt_chars,
            "references": self.references,
            "method": self.method,
        }


def _answer_chars(references: Sequence[str]) -> int:
    """The size of a typical answer: the schema's keys with average-length values."""
    answer = {
        "Q1": "General Definition",
        "Q2": dict.fromkeys(CHARACTERISTICS, "x" * MEAN_FIELD_CHARS),
        "Q3": "Not Sure",
        "Q4": "Not Sure",
        "Q5": dict.fromkeys(references, "Exception"),
    }
    return len(json.dumps(answer))


def estimate_cost(
    tree: RegulationTree, node_ids: Sequence[str], parse_retries: int = PARSE_RETRIES
) -> CostEstimate:
    """Count what a build of `node_ids` costs: calls and estimated tokens (no model).

    Prompts are rendered exactly; tokens are estimated at `CHARS_PER_TOKEN` characters
    per token, the answer at the schema's size with `MEAN_FIELD_CHARS` per field.
    """
    chars = answer = refs = 0
    for node_id in node_ids:
        references = tree.refs(node_id)
        chars += len(render_annotation_prompt(tree, node_id, references))
        answer += _answer_chars(references)
        refs += len(references)
    return CostEstimate(
        nodes=len(node_ids),
        calls=len(node_ids),
        max_calls=len(node_ids) * (parse_retries + 1),
        prompt_tokens=math.ceil(chars / CHARS_PER_TOKEN),
        completion_tokens=math.ceil(answer / CHARS_PER_TOKEN),
        prompt_chars=chars,
        references=refs,
        method=f"{CHARS_PER_TOKEN:g} characters per token; answers at {MEAN_FIELD_CHARS}"
        " characters per characteristic (the published HIPAA KB's mean)",
    )


# -- runs -----------------------------------------------------------------------------
@dataclass
class AnnotationRun:
    """A build read back from its folder.

    Args:
        folder: where it lives.
        manifest: what was run.
        records: one `NodeRecord` per finished leaf, in the manifest's leaf order.
    """

    folder: Path
    manifest: dict[str, Any]
    records: list[NodeRecord] = field(default_factory=list)

    @property
    def identity(self) -> dict[str, Any]:
        return dict(self.manifest.get("identity", {}))

    @property
    def regulation(self) -> str:
        return str(self.identity.get("regulation", ""))

    @property
    def tree_variant(self) -> str:
        return str(self.identity.get("tree", "published"))

    @property
    def backend(self) -> str:
        return str(self.identity.get("backend", ""))

    @property
    def nodes(self) -> list[str]:
        return list(self.manifest.get("nodes", []))

    def failures(self) -> list[NodeRecord]:
        return [r for r in self.records if not r.ok]

    def missing(self) -> list[str]:
        done = {r.node_id for r in self.records}
        return [n for n in self.nodes if n not in done]


def _nodes_sha(node_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(node_ids).encode()).hexdigest()


def _identity(
    annotator: Annotator, variant: str, node_ids: Sequence[str], selection: dict[str, Any]
) -> dict[str, Any]:
    backend = annotator.client.backend
    return {
        "experiment": EXPERIMENT,
        "regulation": annotator.tree.regulation,
        "tree": variant,
        "tree_sha256": annotator.tree.content_hash(),
        "backend": annotator.backend,
        "provider": backend.provider,
        "model": backend.model,
        "base_url": getattr(backend, "base_url", None),
        "settings": annotator.settings.cache_key_part(),
        "structured": "json_schema" if annotator.structured else "text, parsed strictly",
        "field_chars": annotator.field_chars,
        "prompts": {
            name: load_annotation_prompt(name).sha256 for name in (ANNOTATION_PROMPT, ANSWER_PROMPT)
        },
        "parse_retries": annotator.parse_retries,
        "selection": selection,
        "nodes": {"count": len(node_ids), "sha256": _nodes_sha(node_ids)},
    }


def load_annotation_run(folder: Path | str) -> AnnotationRun:
    """Read a build folder (finished or not).

    Raises:
        PrivacyCIError: no manifest, not a build's manifest, or a damaged records file.
    """
    folder = Path(folder)
    manifest, records = read_run_folder(
        folder,
        experiment=EXPERIMENT,
        what="a knowledge base build",
        command="privacy-ci kb build",
        parse=NodeRecord.from_dict,
        key=lambda rec: rec.node_id,  # a re-asked failure wins
    )
    order = {n: i for i, n in enumerate(manifest.get("nodes", []))}
    ordered = sorted(records.values(), key=lambda r: order.get(r.node_id, len(order)))
    return AnnotationRun(folder, manifest, ordered)


async def run_annotation(
    annotator: Annotator,
    out_dir: Path | str,
    node_ids: Sequence[str],
    *,
    tree_variant: str,
    selection: dict[str, Any] | None = None,
    concurrency: int = 4,
    retry_failures: bool = False,
    on_record: Callable[[NodeRecord], None] | None = None,
) -> AnnotationRun:
    """Annotate every leaf into a build folder, resuming what is there.

    Args:
        annotator: the configured `Annotator`.
        out_dir: the folder (created; an existing one with the same identity resumes).
        node_ids: the leaves (`select_leaves`).
        tree_variant: ``ecfr`` or ``published`` (recorded in the identity).
        selection: how the leaves were chosen (``only``, ``limit``), for the manifest.
        concurrency: leaves in flight.
        retry_failures: on resume, ask again about the leaves that failed.
        on_record: called with each new `NodeRecord` (progress).

    Returns:
        The `AnnotationRun` with every record, old and new.

    Raises:
        BuildRunMismatch: the folder holds a build with another identity.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    ids = list(dict.fromkeys(node_ids))
    for node_id in ids:
        annotator.tree[node_id]  # an unknown id fails here, before any call
    identity = _identity(annotator, tree_variant, ids, selection or {})
    out = Path(out_dir)

    def mismatch(_old: Mapping[str, Any], diff: list[str]) -> PrivacyCIError:
        return BuildRunMismatch(
            f"{out} holds another knowledge base build ({'; '.join(diff[:5])}); use a new folder"
        )

    run = open_run_folder(
        out,
        identity,
        fresh=lambda: {"identity": identity, "nodes": ids, "sessions": []},
        mismatch=mismatch,
    )
    done = {str(raw["node_id"]): raw for raw in run.records}
    todo = [
        n for n in ids if n not in done or (retry_failures and done[n].get("annotation") is None)
    ]

    async def ask(node_id: str) -> NodeRecord:
        return await annotator.annotate(node_id, 1, use_cache=node_id not in done)

    await ask_each(
        run,
        annotator.client,
        todo,
        ask,
        concurrency=concurrency,
        counted="annotated",
        on_record=on_record,
    )
    return load_annotation_run(out)
