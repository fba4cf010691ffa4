"""The retrieval vocabulary: `Hit`, `RetrievalQuery`, the `Retriever` protocol, errors.

A retriever maps a query (free text, optionally with the CI characteristics of
section 4.1 of the Privacy Checklist paper) to ranked ``(node_id, score)`` pairs
over one regulation tree. Scores are comparable within one ranking only.

Also here: `kb_fingerprint`, the content hash of everything in a `KnowledgeBase`
that retrievers index (tree, norms, definitions, role graph), used as the cache
key of indexes and embeddings, and `retrieval_cache_dir`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from privacy_ci.ci import CHARACTERISTICS, Flow
from privacy_ci.embeddings._errors import ModelUnavailableError as _EmbeddingModelUnavailable
from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    import numpy as np

    from privacy_ci.knowledge import KnowledgeBase

__all__ = [
    "CI_FIELDS",
    "EmptyQueryError",
    "Hit",
    "ModelUnavailableError",
    "RetrievalError",
    "RetrievalQuery",
    "Retriever",
    "as_query",
    "atomic_dir",
    "check_k",
    "config_hash",
    "kb_fingerprint",
    "load_array_entry",
    "prune_stale",
    "retrieval_cache_dir",
    "save_array_entry",
]

CI_FIELDS: tuple[str, ...] = CHARACTERISTICS
"""The CI characteristics a `RetrievalQuery` may carry besides its text
(`privacy_ci.ci.CHARACTERISTICS`: roles, information type, purpose, consent)."""


class RetrievalError(PrivacyCIError):
    """A retrieval request that cannot be served (bad query, k, model, index)."""


class EmptyQueryError(RetrievalError, ValueError):
    """The query has neither text nor any CI characteristic.

    Design choice: an *empty* query is an error (it is almost always a caller
    bug), while a non-empty query that shares no term with the index (e.g. a
    Chinese sentence against the English BM25 vocabulary) returns an empty list.
    """


# an embedding model that is not installed: the embeddings package's error, one class
# for retrieval, the graphs and the store
ModelUnavailableError = _EmbeddingModelUnavailable


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved tree node.

    Args:
        node_id: the canonical tree node id.
        score: the retriever's score (higher is better; comparable within a ranking).
    """

    node_id: str
    score: float


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """A query: the case text and, optionally, its flow's CI characteristics (section 4.1).

    Args:
        text: the case / event description.
        flow: the case's flow; retrievers read its characteristics (the parties'
            roles, the information type, the purpose and the consent form), never
            the parties' names.
    """

    text: str = ""
    flow: Flow = field(default_factory=Flow)

    @classmethod
    def from_case(cls, case: Any, use_ci: bool = True) -> RetrievalQuery:
        """Build a query from a `privacy_ci.cases.Case`, or a case-like mapping.

        Args:
            case: a `Case` (its ``text`` and ``flow``), or a mapping with ``text``
                (or ``context``/``case_content``) and some of the flat CI fields.
            use_ci: keep the CI characteristics (False: the text alone).

        Returns:
            The query.
        """
        if isinstance(case, Mapping):
            text = case.get("text") or case.get("context") or case.get("case_content") or ""
            flow = Flow.of(case)
        else:
            text, flow = case.text, case.flow
        return cls(str(text), flow if use_ci else Flow())

    def ci_values(self) -> dict[str, str]:
        """The CI characteristics that have a value, in `CI_FIELDS` order."""
        return self.flow.characteristics()

    @property
    def has_ci(self) -> bool:
        """Whether any CI characteristic has a value."""
        return bool(self.ci_values())

    @property
    def roles(self) -> dict[str, str]:
        """The role fields with a value: ``{"sender": ..., "recipient": ..., "subject": ...}``."""
        parties = (
            ("sender", self.flow.sender),
            ("recipient", self.flow.recipient),
            ("subject", self.flow.subject),
        )
        return {slot: party.role for slot, party in parties if party.role}

    def is_empty(self) -> bool:
        """True when there is neither text nor a CI value."""
        return not self.text.strip() and not self.has_ci

    def combined_text(self, ci: bool = True) -> str:
        """The text followed by the CI values (one per line), for lexical/dense retrievers.

        Args:
            ci: append the CI values (False: the text alone).

        Returns:
            The text.
        """
        parts = [self.text.strip()] if self.text.strip() else []
        if ci:
            parts.extend(self.ci_values().values())
        return "\n".join(parts)

    def text_only(self) -> RetrievalQuery:
        """The same query without its CI fields.

        Returns:
            A query with the text alone.
        """
        return RetrievalQuery(self.text)


def as_query(query: str | RetrievalQuery) -> RetrievalQuery:
    """Coerce a string or query into a non-empty `RetrievalQuery`.

    Args:
        query: free text or a query.

    Returns:
        The query.

    Raises:
        EmptyQueryError: no text and no CI value.
        TypeError: neither a string nor a `RetrievalQuery`.
    """
    if isinstance(query, str):
        q = RetrievalQuery(query)
    elif isinstance(query, RetrievalQuery):
        q = query
    else:
        raise TypeError(f"a query must be a str or RetrievalQuery, not {type(query).__name__}")
    if q.is_empty():
        raise EmptyQueryError("the query is empty: give a case text or CI characteristics")
    return q


def check_k(k: int) -> int:
    """Validate a result count.

    Args:
        k: how many hits are wanted.

    Returns:
        ``k``.

    Raises:
        RetrievalError: ``k`` is not a positive integer.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise RetrievalError(f"k must be a positive integer, not {k!r}")
    return k


@runtime_checkable
class Retriever(Protocol):
    """Anything that ranks regulation tree nodes for a query.

    Attributes:
        name: a short, stable name used in result tables (``bm25-paper``, ``dense``, ...).
    """

    name: str

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        """The top ``k`` nodes for ``query``, best first.

        Args:
            query: free text or a `RetrievalQuery`.
            k: at most this many hits.

        Returns:
            Hits in decreasing score order (possibly fewer than ``k``; empty when
            nothing in the index relates to the query).

        Raises:
            EmptyQueryError: the query is empty.
            RetrievalError: ``k`` is not positive.
        """
        ...


# ---------------------------------------------------------------------------------
# cache keys and directories
# ---------------------------------------------------------------------------------
def kb_fingerprint(kb: KnowledgeBase) -> str:
    """A content hash of what retrievers read from a knowledge base.

    It covers the tree (`RegulationTree.content_hash`), every norm's text, CI
    fields and references, the definitions and the role graph's terms and edges,
    so an index built from an older KB is never reused.

    Args:
        kb: the knowledge base.

    Returns:
        A hex sha256 digest.
    """
    h = hashlib.sha256(kb.regulation.encode())
    h.update(kb.tree.content_hash().encode())
    for norm in kb.norms.values():
        row = [
            norm.id,
            norm.norm_type.value,
            norm.text,
            *(getattr(norm, f) or "" for f in CI_FIELDS),
            "|".join(f"{r.target_id}:{r.kind.value}" for r in norm.references),
        ]
        h.update("\x1f".join(row).encode())
    if kb.definitions is not None:
        for item in kb.definitions:
            h.update(f"\x1d{item.term}\x1f{item.text}".encode())
    if kb.role_graph is not None:
        h.update("\x1c".join(sorted(kb.role_graph.graph.nodes)).encode())
        h.update("\x1c".join(sorted(f"{u}>{v}" for u, v in kb.role_graph.graph.edges)).encode())
    return h.hexdigest()


def config_hash(config: Any) -> str:
    """A short stable hash of a dataclass config (or any JSON-able mapping).

    Args:
        config: a dataclass instance or a mapping.

    Returns:
        16 hex characters.
    """
    if hasattr(config, "__dataclass_fields__"):
        payload = {f.name: getattr(config, f.name) for f in fields(config)}
    else:
        payload = dict(config)
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def retrieval_cache_dir(kind: str, root: Path | str | None = None) -> Path:
    """The cache folder of one kind of artefact (``bm25``, ``dense``).

    Args:
        kind: a sub-folder name.
        root: the cache root; default ``privacy_ci.data.cache_dir() / "retrieval"``.

    Returns:
        The folder (not created).
    """
    if root is None:
        from privacy_ci.data import cache_dir

        return cache_dir() / "retrieval" / kind
    return Path(root) / kind


def atomic_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Fill a temporary sibling folder with ``write`` and rename it to ``target``.

    Concurrent writers are safe: the first rename wins, later ones are discarded.

    Args:
        target: the final folder.
        write: fills the folder it is given.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; a cache entry is not
        try:
            os.replace(tmp, target)
        except OSError:  # target appeared meanwhile (another process): keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def prune_stale(folder: Path, prefix: str, keep: str) -> None:
    """Delete sibling cache folders that share ``prefix`` but are not ``keep``.

    Args:
        folder: the parent folder.
        prefix: the name prefix of one family of artefacts (regulation + config).
        keep: the folder name to keep (built from the current KB).
    """
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.name.startswith(prefix) and entry.name != keep and not entry.name.startswith("."):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def save_array_entry(
    path: Path, filename: str, matrix: Any, meta: Mapping[str, Any], family: str
) -> None:
    """Write one cache entry (an array and its ``meta.json``) and prune its family.

    A damaged entry at ``path`` is replaced; siblings of the same ``family`` prefix
    (built from older inputs) are deleted.

    Args:
        path: the entry's folder.
        filename: the array's file name (``embeddings.npy``).
        matrix: the array.
        meta: what the entry was built from (JSON-able).
        family: the name prefix shared by the entries it supersedes.
    """
    import numpy as np

    def write(tmp: Path) -> None:
        np.save(tmp / filename, matrix, allow_pickle=False)
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
    atomic_dir(path, write)
    prune_stale(path.parent, family, path.name)


def load_array_entry(
    path: Path | None, filename: str, rows: int
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Read a cache entry written by `save_array_entry`.

    Args:
        path: the entry's folder (None: no cache).
        filename: the array's file name.
        rows: the number of rows the array must have (one per document or case).

    Returns:
        ``(float32 matrix, meta)``, or None when the entry is missing, unreadable or
        not a matrix of ``rows`` rows.
    """
    if path is None or not (path / filename).is_file():
        return None
    import numpy as np

    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        matrix = np.load(path / filename, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or matrix.ndim != 2 or matrix.shape[0] != rows:
        return None
    return np.asarray(matrix, dtype=np.float32), meta
