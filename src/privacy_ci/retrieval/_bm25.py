"""BM25 retrieval over a regulation tree, on `bm25s` (section 4.2, equations 1 and 2).

Two presets (the paper's own BM25, ``bm25-paper``, is `privacy_ci.retrieval._bm25_official`):

* ``bm25-leaves`` (`bm25_leaves`): equations 1 and 2 over the tree's leaves, our
  first reading of section 4.2 before the released code was compared (it indexes
  about 1,600 leaves where the authors indexed the 591 annotated entries). Okapi BM25 with
  k1 = 1.5, b = 0.75 over the *leaves* of the tree ("subrules"), each leaf's own
  text; tokens are the lower-cased text split on whitespace (no stemming, no
  stop words, punctuation left attached, as ``text.lower().split()``); the query
  is the raw case text. Scores are equation 1 summed by equation 2::

      s(w, E)    = IDF(w) * f(w,E) * (k1 + 1) / (f(w,E) + k1 * (1 - b + b * |E| / avgdl))
      Sim(Q, E)  = sum over the query's tokens w_i (repeats included) of s(w_i, E)
      IDF(w)     = ln((N - n(w) + 0.5) / (n(w) + 0.5)), floored at 0

  In bm25s terms that is ``method="atire"`` (its term-frequency component is
  exactly the fraction of equation 1, *with* the ``k1 + 1`` factor) together
  with ``idf_method="robertson"`` (the standard Robertson/Spärck Jones IDF; bm25s
  floors it at 0 for words in more than half of the documents, where it would
  be negative). ``method="robertson"`` alone would drop the constant ``k1 + 1``
  (same ranking, different scores); ``lucene`` and ``atire`` alone change the IDF.
  The test suite recomputes a few scores by hand.

* ``bm25-plus`` (`bm25_plus`): our improved variant, same equations and k1, b.
  Word tokens (letters and digits after Unicode case folding), English stop
  words removed, Snowball (PyStemmer) stems. Each leaf's document is its
  root-to-leaf specification in the ``path`` form (the headings of its part,
  subpart and section, then the text of every paragraph from below the section
  down to the leaf: the literal full specification repeats each section's long
  introduction in every leaf, which scored lower), plus its norm's CI annotation
  (sender, recipient and subject with their roles, information type, purpose,
  consent form) and the defined terms its text uses. The query is the case text
  plus its CI characteristics when given.

Indexes are saved with ``bm25s.BM25.save`` under
``cache_dir()/retrieval/bm25/<regulation>-<config hash>-<KB hash>/`` and loaded
with ``bm25s.BM25.load``; a changed KB has a different hash, so its index is
rebuilt and the stale one deleted.

Query scoring uses the index's precomputed score matrix (token -> document
contributions, exactly what ``bm25s.BM25.get_scores`` sums) as a SciPy sparse
matrix, so one query costs one sparse matrix-vector product.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

# the package's one tokenizer, shared with the store's index terms (privacy_ci._tokenize)
from privacy_ci._tokenize import BM25_PLUS_TOKENIZER, LEAVES_TOKENIZER, Tokenizer
from privacy_ci.retrieval._base import (
    Hit,
    RetrievalError,
    RetrievalQuery,
    as_query,
    atomic_dir,
    check_k,
    config_hash,
    kb_fingerprint,
    prune_stale,
    retrieval_cache_dir,
)

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

__all__ = [
    "BM25Config",
    "BM25Retriever",
    "DocumentRecipe",
    "Tokenizer",
    "bm25_leaves",
    "bm25_plus",
    "build_documents",
    "defined_terms_in",
    "path_text",
    "rank_with_tree",
]


# ---------------------------------------------------------------------------------
# documents
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DocumentRecipe:
    """How the text of each retrievable node is built (part of every cache key).

    Args:
        units: ``leaves`` (the paper's subrules), ``nodes`` (every tree node but
            the root; an internal node's text is then its own text), or ``entries``
            (the knowledge base's annotated entries, in file order, as the released
            code indexes them; ``own`` text is then the entry's annotated text).
        text: ``own`` (the node's own text, or its heading when it has none);
            ``spec`` (the full specification: every node's text from the root down);
            or ``path`` (the headings of the structural ancestors (part, subpart,
            chapter, section, article) followed by the own text of every paragraph
            from below the section down to the node: a short, self-contained text
            for embedding models with a token limit).
        norm_fields: append the CI annotation of the node's norm (actors, roles,
            information type, purpose, consent form) when it has one.
        definitions: ``none``; ``terms`` (append each defined term the text uses,
            once more); or ``text`` (append those terms' definitions, the first
            ``definition_words`` words of each).
        definition_words: how much of each definition ``text`` appends.
    """

    units: Literal["leaves", "nodes", "entries"] = "leaves"
    text: Literal["own", "spec", "path"] = "own"
    norm_fields: bool = False
    definitions: Literal["none", "terms", "text"] = "none"
    definition_words: int = 40


def _norm_annotation(kb: KnowledgeBase, node_id: str) -> list[str]:
    norm = kb.norms.get(node_id)
    if norm is None:
        return []
    parts: list[str] = [*norm.sender, *norm.recipient, *norm.subject]
    parts.extend(norm.flow.characteristics().values())
    return parts


def _definition_patterns(kb: KnowledgeBase) -> list[tuple[re.Pattern[str], str, str]]:
    if kb.definitions is None:
        return []
    out: list[tuple[re.Pattern[str], str, str]] = []
    for item in kb.definitions:
        term = " ".join(item.term.replace("_", " ").split()).strip(" .:;,")
        if len(term) < 3:
            continue
        words = [re.escape(w) for w in term.split()]
        # a light plural on the last word: "covered entities", "business associates"
        last = words[-1]
        last = f"{last[:-1]}(?:y|ies)" if last.endswith("y") else f"{last}(?:s|es)?"
        pattern = re.compile(r"\b" + r"\s+".join([*words[:-1], last]) + r"\b", re.IGNORECASE)
        out.append((pattern, term, item.text))
    return out


def defined_terms_in(kb: KnowledgeBase, text: str) -> list[str]:
    """The defined terms of ``kb`` that ``text`` uses (light plural matching).

    Args:
        kb: the knowledge base (its `Definitions`).
        text: any text.

    Returns:
        The terms (as the dictionary spells them, underscores as spaces), in dictionary order.
    """
    return [term for pattern, term, _ in _definition_patterns(kb) if pattern.search(text)]


_STRUCTURAL = frozenset({"part", "subpart", "chapter", "section", "article", "appendix"})


def path_text(tree: Any, node_id: str) -> str:
    """Headings of the structural ancestors, then the paragraphs' own texts, down to a node.

    Args:
        tree: the regulation tree.
        node_id: the node.

    Returns:
        E.g. ``"SECURITY AND PRIVACY / ... / Uses and disclosures for which ...\n(e) Standard:
        Disclosures for judicial and administrative proceedings —\n(1) ...\n(i) ..."``.
    """
    heads: list[str] = []
    body: list[str] = []
    for nid in tree.path(node_id):
        if nid == tree.root:
            continue
        node = tree.nodes[nid]
        if node.kind.value in _STRUCTURAL and nid != node_id:
            heads.append(node.title or node.text.split(". ")[0][:160])
        else:
            body.append(node.text or node.title)
    return "\n".join([" / ".join(h for h in heads if h), *body])


def build_documents(kb: KnowledgeBase, recipe: DocumentRecipe) -> tuple[list[str], list[str]]:
    """The retrievable node ids and their document texts.

    Args:
        kb: the knowledge base.
        recipe: how to build each text.

    Returns:
        ``(ids, texts)`` in document order.
    """
    tree = kb.tree
    if recipe.units == "leaves":
        nodes = list(tree.leaves())
    elif recipe.units == "entries":
        nodes = [tree[norm_id] for norm_id in kb.norms if norm_id in tree]
    else:
        nodes = [n for n in tree.tree_nodes() if n.id != tree.root]
    patterns = _definition_patterns(kb) if recipe.definitions != "none" else []
    ids: list[str] = []
    texts: list[str] = []
    for node in nodes:
        if recipe.text == "spec":
            body = tree.full_specification(node.id)
        elif recipe.text == "path":
            body = path_text(tree, node.id)
        elif recipe.units == "entries":
            body = kb.norms[node.id].text
        else:
            body = node.text or node.title
        parts = [body]
        if recipe.norm_fields:
            parts.extend(_norm_annotation(kb, node.id))
        if patterns:
            for pattern, term, definition in patterns:
                if pattern.search(body):
                    if recipe.definitions == "terms":
                        parts.append(term)
                    else:
                        words = definition.split()[: recipe.definition_words]
                        parts.append(f"{term}: {' '.join(words)}")
        ids.append(node.id)
        texts.append("\n".join(p for p in parts if p))
    return ids, texts


# ---------------------------------------------------------------------------------
# tree-aware ranking
# ---------------------------------------------------------------------------------
def rank_with_tree(
    scores: np.ndarray,
    parents: Sequence[int],
    k: int,
    diversify: int,
) -> list[tuple[int, float]]:
    """Top ``k`` documents by score, at most ``diversify`` per parent group.

    Documents are taken in score order; a document whose group (``parents[i]``,
    e.g. its parent paragraph) already has ``diversify`` documents in the result
    is deferred behind all the others (not dropped), so the result still has
    ``k`` entries whenever ``k`` documents score above zero.

    Args:
        scores: one score per document (equal scores: the earlier document first).
        parents: one group number per document.
        k: how many to return.
        diversify: per-group quota (0: plain top k).

    Returns:
        ``(document index, score)`` pairs, best first, scores > 0 only.
    """
    positive = int(np.count_nonzero(scores > 0))
    if positive == 0:
        return []
    if diversify <= 0:
        take = min(k, positive)
        top = (
            np.argpartition(-scores, take - 1)[:take]
            if take < len(scores)
            else np.arange(len(scores))
        )
        top = top[np.lexsort((top, -scores[top]))]
        return [(int(i), float(scores[i])) for i in top if scores[i] > 0][:k]
    pool = min(positive, max(4 * k, 64))
    cand = (
        np.argpartition(-scores, pool - 1)[:pool] if pool < len(scores) else np.arange(len(scores))
    )
    cand = cand[np.lexsort((cand, -scores[cand]))]
    chosen: list[tuple[int, float]] = []
    deferred: list[tuple[int, float]] = []
    used: dict[int, int] = {}
    for i in cand:
        s = float(scores[i])
        if s <= 0:
            break
        g = parents[int(i)]
        if used.get(g, 0) < diversify:
            used[g] = used.get(g, 0) + 1
            chosen.append((int(i), s))
            if len(chosen) == k:
                return chosen
        else:
            deferred.append((int(i), s))
    return (chosen + deferred)[:k]


# ---------------------------------------------------------------------------------
# configuration and retriever
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BM25Config:
    """Everything that defines a BM25 retriever (hashed into the cache key).

    Args:
        name: the retriever's name in tables.
        recipe: how documents are built.
        tokenizer: tokenisation of documents and queries.
        k1, b: BM25 parameters (equation 1).
        method, idf_method: the bm25s variant (see the module docstring).
        query_ci: append the query's CI characteristics to its text.
        diversify: at most this many results per parent paragraph before the
            others (0 disables it); see `rank_with_tree`.
    """

    name: str = "bm25"
    recipe: DocumentRecipe = field(default_factory=DocumentRecipe)
    tokenizer: Tokenizer = field(default_factory=Tokenizer)
    k1: float = 1.5
    b: float = 0.75
    method: str = "atire"
    idf_method: str = "robertson"
    query_ci: bool = False
    diversify: int = 0

    def index_key(self) -> str:
        """The hash of the fields that change the saved index (not the ranking options).

        Returns:
            16 hex characters.
        """
        return config_hash(
            {
                "recipe": asdict(self.recipe),
                "tokenizer": asdict(self.tokenizer),
                "k1": self.k1,
                "b": self.b,
                "method": self.method,
                "idf_method": self.idf_method,
                "format": 1,
            }
        )


LEAVES_CONFIG = BM25Config(
    name="bm25-leaves",
    recipe=DocumentRecipe(units="leaves", text="own"),
    tokenizer=LEAVES_TOKENIZER,
)
"""Equations 1-2 over the tree's leaves (see the module docstring)."""

PLUS_CONFIG = BM25Config(
    name="bm25-plus",
    recipe=DocumentRecipe(units="leaves", text="path", norm_fields=True, definitions="terms"),
    tokenizer=BM25_PLUS_TOKENIZER,
    query_ci=True,
)
"""Our improved variant (see the module docstring)."""


class BM25Retriever:
    """BM25 over one knowledge base's tree, on a cached `bm25s` index.

    Args:
        kb: the knowledge base.
        config: the configuration (`LEAVES_CONFIG`, `PLUS_CONFIG` or your own).
        cache: ``True`` for the default cache folder, a folder, or ``False`` to
            build in memory without saving.

    Attributes:
        name: ``config.name``.
        ids: the indexed node ids, in document order.
        loaded_from_cache: whether the index came from disk.
        build_seconds: time spent building (or loading) the index.
    """

    def __init__(
        self,
        kb: KnowledgeBase,
        config: BM25Config = LEAVES_CONFIG,
        cache: bool | Path | str = True,
    ) -> None:
        self.kb = kb
        self.config = config
        self.name = config.name
        self.loaded_from_cache = False
        start = time.perf_counter()
        self.kb_hash = kb_fingerprint(kb)
        self.cache_path: Path | None = None
        if cache is not False:
            root = None if cache is True else Path(cache)
            folder = retrieval_cache_dir("bm25", root)
            family = f"{kb.regulation}-{config.index_key()}-"
            self.cache_path = folder / f"{family}{self.kb_hash[:16]}"
        self.model: Any = None
        self.ids: list[str] = []
        if self.cache_path is not None and (self.cache_path / "ids.json").is_file():
            try:
                self._load(self.cache_path)
                self.loaded_from_cache = True
            except (OSError, ValueError, KeyError):  # a damaged cache entry: rebuild it
                self.model = None
        if self.model is None:
            self._build()
            if self.cache_path is not None:
                if self.cache_path.exists():  # a damaged entry: replace it
                    shutil.rmtree(self.cache_path, ignore_errors=True)
                self._save(self.cache_path)
                prune_stale(self.cache_path.parent, family, self.cache_path.name)
        self._prepare()
        self.build_seconds = time.perf_counter() - start

    # -- index ---------------------------------------------------------------------
    def _build(self) -> None:
        import bm25s  # type: ignore[import-untyped]

        ids, texts = build_documents(self.kb, self.config.recipe)
        if not ids:
            raise RetrievalError(f"{self.kb.regulation}: the tree has no documents to index")
        corpus_tokens = [self.config.tokenizer(t) for t in texts]
        model = bm25s.BM25(
            k1=self.config.k1,
            b=self.config.b,
            method=self.config.method,
            idf_method=self.config.idf_method,
        )
        model.index(corpus_tokens, show_progress=False)
        self.model = model
        self.ids = ids

    def _save(self, path: Path) -> None:
        model, ids = self.model, self.ids
        meta = {
            "regulation": self.kb.regulation,
            "kb_hash": self.kb_hash,
            "index_key": self.config.index_key(),
            "config": _config_json(self.config),
        }

        def write(tmp: Path) -> None:
            model.save(str(tmp), show_progress=False)
            (tmp / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")

        atomic_dir(path, write)

    def _load(self, path: Path) -> None:
        import bm25s

        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        if meta.get("kb_hash") != self.kb_hash or meta.get("index_key") != self.config.index_key():
            raise ValueError("stale index")
        ids = json.loads((path / "ids.json").read_text(encoding="utf-8"))
        model = bm25s.BM25.load(str(path), show_progress=False)
        if int(model.scores["num_docs"]) != len(ids):
            raise ValueError("index and ids disagree")
        self.model = model
        self.ids = list(ids)

    def _prepare(self) -> None:
        """Precompute the sparse score matrix and the tree structures used at query time."""
        from scipy import sparse  # type: ignore[import-untyped]

        scores = self.model.scores
        n_docs = int(scores["num_docs"])
        vocab: dict[str, int] = dict(self.model.vocab_dict)
        n_vocab = len(scores["indptr"]) - 1
        # bm25s stores token-major (CSC over tokens): row t holds the contributions of token t
        by_token = sparse.csr_matrix(
            (
                np.asarray(scores["data"], dtype=np.float32),
                np.asarray(scores["indices"]),
                np.asarray(scores["indptr"]),
            ),
            shape=(n_vocab, n_docs),
        )
        self._by_doc = by_token.T.tocsr()  # docs x tokens
        self._vocab = vocab
        self._n_vocab = n_vocab
        tree = self.kb.tree
        groups: dict[str | None, int] = {}
        self._parents = [groups.setdefault(tree[i].parent, len(groups)) for i in self.ids]

    # -- scoring -------------------------------------------------------------------
    def query_tokens(self, query: str | RetrievalQuery) -> list[str]:
        """The tokens the retriever scores for ``query``.

        Args:
            query: free text or a `RetrievalQuery`.

        Returns:
            The tokens (repeats kept: equation 2 sums over every query word).
        """
        q = as_query(query)
        return self.config.tokenizer(q.combined_text(ci=self.config.query_ci))

    def score_vector(self, query: str | RetrievalQuery) -> np.ndarray:
        """Equation 2 for every document (before any tree-aware re-ranking).

        Args:
            query: free text or a `RetrievalQuery`.

        Returns:
            One float32 score per document, in `ids` order.
        """
        tokens = self.query_tokens(query)
        vocab = self._vocab
        token_ids = [vocab[t] for t in tokens if t in vocab]
        qvec = np.zeros(self._by_doc.shape[1], dtype=np.float32)
        if token_ids:
            np.add.at(qvec, np.asarray(token_ids, dtype=np.int64), 1.0)
        return np.asarray(self._by_doc @ qvec, dtype=np.float32)

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        """The top ``k`` nodes for ``query``.

        Args:
            query: free text or a `RetrievalQuery`.
            k: at most this many hits.

        Returns:
            Hits, best first; empty when no query token is in the vocabulary.

        Raises:
            EmptyQueryError: the query is empty.
            RetrievalError: ``k`` is not positive.
        """
        check_k(k)
        scores = self.score_vector(query)
        ranked = rank_with_tree(scores, self._parents, k, self.config.diversify)
        return [Hit(self.ids[i], s) for i, s in ranked]

    def retrieve_many(
        self, queries: Iterable[str | RetrievalQuery], k: int = 10
    ) -> list[list[Hit]]:
        """`retrieve` for several queries.

        Args:
            queries: the queries.
            k: hits per query.

        Returns:
            One hit list per query.
        """
        return [self.retrieve(q, k) for q in queries]

    def with_config(self, **changes: Any) -> BM25Retriever:
        """A retriever on the same KB with some config fields changed.

        Args:
            changes: `BM25Config` fields.

        Returns:
            The new retriever (its index is cached like any other).
        """
        return BM25Retriever(self.kb, replace(self.config, **changes), self._cache_arg())

    def _cache_arg(self) -> bool | Path:
        if self.cache_path is None:
            return False
        return self.cache_path.parent.parent

    def __repr__(self) -> str:
        return f"BM25Retriever({self.name!r}, {self.kb.regulation}, {len(self.ids)} docs)"


def _config_json(config: BM25Config) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(asdict(config), default=str))
    return out


def bm25_leaves(kb: KnowledgeBase, cache: bool | Path | str = True) -> BM25Retriever:
    """BM25 over the tree's leaves, ``bm25-leaves`` (see the module docstring).

    Args:
        kb: the knowledge base.
        cache: as for `BM25Retriever`.

    Returns:
        The retriever.
    """
    return BM25Retriever(kb, LEAVES_CONFIG, cache)


def bm25_plus(kb: KnowledgeBase, cache: bool | Path | str = True, **changes: Any) -> BM25Retriever:
    """Our improved BM25, ``bm25-plus`` (see the module docstring).

    Args:
        kb: the knowledge base.
        cache: as for `BM25Retriever`.
        changes: `BM25Config` fields to override.

    Returns:
        The retriever.
    """
    return BM25Retriever(kb, replace(PLUS_CONFIG, **changes), cache)
