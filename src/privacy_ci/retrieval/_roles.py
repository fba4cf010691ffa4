"""`RoleKeywordRetriever`: CI-ES, norms retrieved by the roles of a flow (paper sections 4.2, 5).

CI-ES-content "considers stakeholders' roles as keywords and uses pre-trained
embedding models to match their roles with roles in our Privacy Checklist by
calculating the embedding similarities. We use the matched roles as keywords to
search for applicable rules." This retriever does that, plus the role graph.

Role similarity. A role string is split into alternatives (on ``/``, ``;``,
``,`` and `` or ``: ``"health care provider or health plan"`` has two). For a
case role ``c`` and a KB role ``r``::

    sim(c, r) = max over alternatives a of c and b of r of max(cos(e(a), e(b)), graph(a, b))

where ``e`` is the sentence embedding (the dense model, default MiniLM) and
``graph(a, b)`` is the strength of the role-graph match of ``a`` when ``b``'s
graph term is ``a``'s matched term or one of its ancestors (``surgeon`` falls
under the regulation roles ``health care provider`` and ``cover entity`` with
strength 1.0; a fuzzy match carries its `TermMatch` score; WordNet generalities
such as ``person`` do not count). Only the HIPAA KB has a role graph.

Norm score. For each slot ``s`` in sender, recipient, subject where both the
case and the norm have a role and ``sim >= threshold``::

    score(norm) = sum_s  sim(case_s, norm_s) * idf_s(a)
                + attribute_weight * (sim(case.information_type, norm.information_type)
                                      + sim(case.purpose, norm.purpose))     # >= threshold only

where ``sim`` is taken at the norm role's best-matching alternative ``a`` and
``idf_s(a) = ln(1 + N_s / n_s(a))`` (``N_s`` norms with a role in slot ``s``,
``n_s(a)`` of them whose role has the alternative ``a``), so a match on a rare
role (``law enforcement``) counts more than one on the ubiquitous ``health care
provider``, however the annotator worded the rest of the role.
Norms that score 0 are not returned; ties keep KB order.

Without roles in the query (``query="text"`` evaluations, free-text queries),
the retriever looks for role phrases in the text: role-graph terms and KB role
alternatives (at most 4 words) that occur in it become slot-agnostic
case roles, matched against every slot of every norm.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privacy_ci.retrieval._base import Hit, RetrievalQuery, as_query, check_k
from privacy_ci.retrieval._dense import DEFAULT_MODEL, EmbeddingModel, load_embedding_model

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

__all__ = ["RoleKeywordRetriever", "RolesConfig", "split_role"]

SLOTS: tuple[str, ...] = ("sender", "recipient", "subject")
_SPLIT = re.compile(r"\s*(?:/|;|,|\bor\b|\band/or\b|&)\s*", re.IGNORECASE)
_WORDS = re.compile(r"[a-z][a-z\-]+")


def split_role(role: str) -> list[str]:
    """A role string's alternatives, lower-cased.

    Args:
        role: e.g. ``"Law Enforcement/Judicial Authority"``.

    Returns:
        e.g. ``["law enforcement", "judicial authority"]`` (the whole string when
        it has no separator).
    """
    parts = [p.strip(" .()").lower() for p in _SPLIT.split(role) if p and p.strip(" .()")]
    return list(dict.fromkeys(parts)) or [role.strip().lower()]


@dataclass(frozen=True, slots=True)
class RolesConfig:
    """Settings of `RoleKeywordRetriever`.

    Args:
        name: the retriever's name in tables.
        model: the embedding model (name or folder).
        threshold: similarities below this are no match.
        attribute_weight: weight of the information-type and purpose matches (0: roles only).
        use_graph: use the role graph (when the KB has one).
        norms_only: only positive and negative norms (not general definitions).
    """

    name: str = "roles"
    model: str = DEFAULT_MODEL
    threshold: float = 0.5
    attribute_weight: float = 0.5
    use_graph: bool = True
    norms_only: bool = True


class RoleKeywordRetriever:
    """Norms whose roles match the case's roles (CI-ES; see the module docstring).

    Args:
        kb: the knowledge base.
        config: the settings.
        model: an already loaded embedding model (default: `load_embedding_model`).

    Attributes:
        name: ``config.name``.
        ids: the norm ids that can be retrieved.
    """

    def __init__(
        self,
        kb: KnowledgeBase,
        config: RolesConfig | None = None,
        model: EmbeddingModel | None = None,
    ) -> None:
        self.kb = kb
        self.config = config or RolesConfig()
        self.name = self.config.name
        self.model = model or load_embedding_model(self.config.model)
        norms = [
            n
            for n in kb.norms.values()
            if (n.is_norm or not self.config.norms_only) and kb.tree.in_tree(n.id)
        ]
        self.ids = [n.id for n in norms]
        # every distinct phrase (alternatives of roles, information types, purposes)
        self._fields = (*SLOTS, "information_type", "purpose")
        values: dict[str, list[str | None]] = {
            f: [getattr(n, f"{f}_role" if f in SLOTS else f) or None for n in norms]
            for f in self._fields
        }
        self._values = values
        phrases: dict[str, int] = {}
        self._alts: dict[str, list[int]] = {}
        for f in self._fields:
            for value in values[f]:
                if value and value not in self._alts:
                    idx = []
                    for alt in split_role(value):
                        idx.append(phrases.setdefault(alt, len(phrases)))
                    self._alts[value] = idx
        self._phrases = list(phrases)
        self._phrase_vecs = self.model.encode(self._phrases) if self._phrases else np.zeros((0, 1))
        # field-wise idf of each phrase: ln(1 + N_f / n_f(phrase)), where n_f counts the
        # norms whose value in field f has that phrase among its alternatives
        self._idf: dict[str, np.ndarray] = {}
        for f in self._fields:
            present = [v for v in values[f] if v]
            counts = np.zeros(len(self._phrases), dtype=np.float32)
            for v in present:
                for j in set(self._alts[v]):
                    counts[j] += 1
            with np.errstate(divide="ignore"):
                idf = np.where(counts > 0, np.log1p(len(present) / np.maximum(counts, 1)), 0.0)
            self._idf[f] = idf.astype(np.float32)
        graph = kb.role_graph if self.config.use_graph else None
        self._graph = graph
        self._reg_roles = frozenset(graph.regulation_roles) if graph is not None else frozenset()
        self._graph_memo: dict[str, list[tuple[int, float]]] = {}
        self._graph_terms: list[str | None] = (
            [graph.resolve(p) for p in self._phrases] if graph is not None else []
        )
        # phrases to spot in free text: short KB role alternatives and role-graph terms
        spot: set[str] = {p for f in SLOTS for v in values[f] if v for p in split_role(v)}
        if graph is not None:
            spot.update(t.lower() for t in graph.terms if t.strip())
        self._spot = sorted(
            (p for p in spot if 1 <= len(p.split()) <= 4 and len(p) >= 4), key=len, reverse=True
        )

    # -- similarity ------------------------------------------------------------------
    def _phrase_similarity(self, text: str) -> np.ndarray:
        """max over the alternatives of ``text`` of sim(alternative, each KB phrase)."""
        alts = split_role(text)
        vecs = self.model.encode_memo(alts)
        sims = np.asarray((vecs @ self._phrase_vecs.T).max(axis=0), dtype=np.float32)
        for alt in alts:
            for j, strength in self._graph_credit(alt):
                if strength > sims[j]:
                    sims[j] = strength
        return sims

    def _graph_credit(self, alt: str) -> list[tuple[int, float]]:
        """(KB phrase index, strength) for the phrases a case role falls under in the role graph."""
        cached = self._graph_memo.get(alt)
        if cached is not None:
            return cached
        out: list[tuple[int, float]] = []
        if self._graph is not None:
            for cls in self._graph.classify(alt, limit=1, min_score=0.5):
                # the matched term itself, and the regulation roles above it (not
                # WordNet generalities such as "person", which every role falls under)
                under = {cls.match.term, *(a for a in cls.ancestors if a in self._reg_roles)}
                out.extend(
                    (j, cls.match.score)
                    for j, term in enumerate(self._graph_terms)
                    if term is not None and term in under
                )
        if len(self._graph_memo) > 4096:
            self._graph_memo.clear()
        self._graph_memo[alt] = out
        return out

    def _value_scores(
        self, field_name: str, phrase_sims: np.ndarray
    ) -> dict[str, tuple[float, float]]:
        """value -> (similarity, idf) of its best-matching alternative."""
        out: dict[str, tuple[float, float]] = {}
        idf = self._idf[field_name]
        for value in self._values[field_name]:
            if value and value not in out:
                best = max(self._alts[value], key=lambda j: (phrase_sims[j], -idf[j]))
                out[value] = (float(phrase_sims[best]), float(idf[best]))
        return out

    def mentioned_roles(self, text: str) -> list[str]:
        """Role phrases (KB role alternatives, role-graph terms) that occur in ``text``.

        Args:
            text: free text.

        Returns:
            The phrases, longest first, each at most once.
        """
        low = " ".join(_WORDS.findall(text.lower()))
        found: list[str] = []
        for phrase in self._spot:
            if re.search(rf"\b{re.escape(phrase)}s?\b", low) and not any(
                phrase in f for f in found
            ):
                found.append(phrase)
        return found

    def score_vector(self, query: str | RetrievalQuery) -> np.ndarray:
        """The score of every retrievable norm.

        Args:
            query: free text or a `RetrievalQuery`.

        Returns:
            One score per norm in `ids` order.
        """
        q = as_query(query)
        cfg = self.config
        scores = np.zeros(len(self.ids), dtype=np.float32)
        roles = q.roles
        if roles:
            pairs: list[tuple[str, str, float]] = [(s, roles[s], 1.0) for s in roles]
        else:
            mentions = self.mentioned_roles(q.text)[:12]
            pairs = [(s, m, 1.0) for m in mentions for s in SLOTS]
        attrs = [
            (f, value, cfg.attribute_weight)
            for f in ("information_type", "purpose")
            if cfg.attribute_weight > 0 and (value := q.flow.get(f))
        ]
        best: dict[tuple[int, str], float] = {}
        for field_name, text, weight in [*pairs, *attrs]:
            value_scores = self._value_scores(field_name, self._phrase_similarity(text))
            for i, value in enumerate(self._values[field_name]):
                if not value:
                    continue
                sim, idf = value_scores[value]
                if sim < cfg.threshold:
                    continue
                contrib = weight * sim * idf
                key = (i, field_name)
                if contrib > best.get(key, 0.0):
                    best[key] = contrib
        for (i, _), contrib in best.items():
            scores[i] += contrib
        return scores

    def retrieve(self, query: str | RetrievalQuery, k: int = 10) -> list[Hit]:
        """The top ``k`` norms by role match.

        Args:
            query: free text or a `RetrievalQuery` (roles used when present).
            k: at most this many hits.

        Returns:
            Hits, best first; empty when no role matches.

        Raises:
            EmptyQueryError: the query is empty.
            RetrievalError: ``k`` is not positive.
        """
        check_k(k)
        scores = self.score_vector(query)
        order = np.lexsort((np.arange(len(scores)), -scores))
        return [Hit(self.ids[i], float(scores[i])) for i in order[:k] if scores[i] > 0]

    def matched_roles(self, role: str, limit: int = 5) -> list[tuple[str, float]]:
        """The KB role phrases nearest to a case role (for inspection).

        Args:
            role: a case role.
            limit: how many.

        Returns:
            ``(phrase, similarity)`` pairs, best first.
        """
        sims = self._phrase_similarity(role)
        order = np.argsort(-sims)[:limit]
        return [(self._phrases[j], float(sims[j])) for j in order]
