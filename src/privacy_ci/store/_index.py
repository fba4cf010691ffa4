"""`AccessIndex`: who may receive what, and the postings to rank it, kept incrementally.

What a request costs must not depend on the documents its requester may not see:
that would be work, memory and a timing side channel on exactly what the gate
hides. So the store's documents are kept in **access partitions**, built from the
fields the gate reads (paper, Algorithm 1):

* ``open[role]``: documents with a valid label in force (approved) whose ACL holds the
  role and whose tier needs no assignment (or that have no subject);
* ``subject[s]``: documents with a valid label in force whose tier needs an
  assignment to their subject ``s``.

A requester acting in role ``r`` (authoritative in its context) with assignments
``A`` may receive exactly ``open[r]`` plus the documents of ``subject[s]`` for
``s`` in ``A`` whose ACL holds ``r``. A request touches only those partitions:
their postings for the query's terms, and per-partition counts (documents, and
documents and terms that BM25 ranks) for its statistics. Withheld counts come from
aggregates kept per role. Nothing is read, built or counted per document outside
the requester's partitions.

Each partition is a `Postings` (a compacted segment plus a small delta). Every
write of the store appends history rows in its transaction; the index keeps the
history sequence it has applied, and `refresh` reads only the rows after it and
re-reads only the documents, agents and assignments they name: a write costs what
it changes, in this process and in every other process sharing the database. A
policy change, or more changes than a rebuild would cost, rebuilds it.

BM25 is the Lucene variant with k1 1.5, b 0.75, computed exactly as `bm25s`
computes it (float32 per-term scores from a float64 length normalisation, summed
in float32 in query-term order), with document frequency, document count and
average length over the requester's authorized set only: scores equal those of a
`BM25Ranker` built over that set (tested).
"""

from __future__ import annotations

import json
import math
import threading
from array import array
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import numpy.typing as npt

from privacy_ci.conductor import Gate, Policy, Requester, Rule
from privacy_ci.store._labels import LabelState
from privacy_ci.store._postings import Postings
from privacy_ci.store._ranking import tokenize
from privacy_ci.store._sql import Database, StoreError

K1, B = 1.5, 0.75

# Per document: what the index holds of its label.
NO_LABEL, NOT_APPROVED, INVALID, VALID = 0, 1, 2, 3
# Per (partition, role) statistics columns: documents, documents with terms, total length.
COUNT, RANKED, LENGTH = 0, 1, 2

MERGE_FROM = 8
"""From this many assigned subjects on, a requester's subject partitions are merged."""
MERGED_BUDGET = 8_000_000
"""Postings kept in merged partitions, all requesters together (least recent dropped)."""

IN_FORCE_SQL = (
    "COALESCE(l.in_force, l.body),"
    " CASE WHEN l.in_force IS NULL THEN l.state || ':not in force' ELSE 'approved' END,"
    " COALESCE(l.in_force_version, l.version)"
)
"""A label row as the index reads it: the body in force (else the row's own, which
grants nothing), 'approved' only when one is in force, and the version decisions name."""

REBUILD_FRACTION = 0.25
"""More changed documents than this fraction of the store: rebuild rather than apply."""


@dataclass(frozen=True)
class StoredVectors:
    """Every stored vector of one embedding model, read at one embeddings version."""

    model: str
    version: str
    rows: list[tuple[str, bytes]]


@dataclass(frozen=True)
class Scope:
    """A requester's authorized set, described without listing it.

    Args:
        role: the role index in the policy, or None when checks 1-2 deny everything.
        rule: the rule that denies everything (checks 1-2), or None.
        subjects: the subject indices of the requester's assignments that hold documents.
        authorized: how many documents the requester may receive.
        ranked: how many of them have index terms (BM25's document count).
        length: their total length in terms.
        withheld: rule -> how many documents with a label are withheld.
        not_approved: how many of those have no approved label.
    """

    role: int | None
    rule: Rule | None
    subjects: tuple[int, ...]
    authorized: int
    ranked: int
    length: int
    withheld: dict[Rule, int]
    not_approved: int
    who: str = ""


@dataclass
class _Merged:
    """One requester's assigned subjects' partitions merged (see `AccessIndex._parts`)."""

    postings: Postings
    members: dict[int, npt.NDArray[np.int32]]  # subject -> its documents taken
    built_at: int
    size: int = 0


class _Grow:
    """Per-document columns, grown by doubling."""

    def __init__(self) -> None:
        self.kind = np.zeros(1024, dtype=np.uint8)
        self.acl = np.zeros(1024, dtype=np.uint64)
        self.subject = np.full(1024, -1, dtype=np.int32)  # >= 0: needs an assignment
        self.length = np.zeros(1024, dtype=np.int64)
        self.has_terms = np.zeros(1024, dtype=bool)
        self.version = np.zeros(1024, dtype=np.int64)  # the label version decisions name

    def ensure(self, n: int) -> None:
        size = len(self.kind)
        if n <= size:
            return
        new = max(n, size * 2)
        for name in ("kind", "acl", "subject", "length", "has_terms", "version"):
            old = getattr(self, name)
            grown = np.full(new, -1, dtype=old.dtype) if name == "subject" else None
            if grown is None:
                grown = np.zeros(new, dtype=old.dtype)
            grown[:size] = old
            setattr(self, name, grown)


class AccessIndex:
    """The store's access partitions, their postings and aggregates, at one store version.

    Built by `AccessIndex.load`; moved forward by `refresh`. Thread-safe: reads and
    refreshes take the index's lock (a query holds it for a few milliseconds).
    """

    def __init__(self, policy: Policy, version: int, history_seq: int) -> None:
        self.lock = threading.RLock()
        self.policy = policy
        self.gate = Gate(policy)
        self.version = version
        self.history_seq = history_seq
        self.roles = list(policy.roles)
        self.n_roles = len(self.roles)
        self.ids: list[str] = []
        self.ordinal: dict[str, int] = {}
        self.cols = _Grow()
        self.vocab: dict[str, int] = {}
        self.subject_ids: dict[str, int] = {}
        self.open = [Postings() for _ in self.roles]
        self.open_stats = np.zeros((self.n_roles, 3), dtype=np.int64)
        self.by_subject: dict[int, Postings] = {}
        self.subject_stats = np.zeros((64, self.n_roles, 3), dtype=np.int64)
        # aggregates for withheld counts
        self.kinds = np.zeros(4, dtype=np.int64)  # documents per kind (NO_LABEL unused)
        self.acl_count = np.zeros(self.n_roles, dtype=np.int64)  # valid, role on the ACL
        self.waiting = np.zeros(self.n_roles, dtype=np.int64)  # ... and needing an assignment
        # what requests read: partitions visited and postings entries scanned (for tests
        # and benchmarks: it must not depend on documents outside a requester's scope)
        self.work = 0
        # per (role, assigned subjects): their partitions merged, kept while none changed
        self.changes = 0
        self.subject_changed = np.zeros(64, dtype=np.int64)
        self._merged: OrderedDict[tuple[int, str], _Merged] = OrderedDict()
        self._merged_size = 0
        # per embedding model: every indexed document's vector (dropped when one is written)
        self._vectors: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]] = {}
        self.embeddings_version = ""

    # -- building ------------------------------------------------------------------------
    @classmethod
    def load(cls, db: Database) -> AccessIndex:
        """Build the index from the store (inside the caller's read transaction)."""
        row = db.query_one("SELECT version FROM store_version WHERE id = 1")
        version = int(row[0]) if row else 0
        seq = db.query_one("SELECT COALESCE(MAX(seq), 0) FROM history")
        prow = db.query_one("SELECT body FROM policy WHERE id = 1")
        if prow is None:
            raise StoreError(
                f"store {db.name} has no policy: load one first"
                " (privacy-ci store load-riverside, or DocumentStore.set_policy)"
            )
        index = cls(Policy.model_validate(json.loads(prow[0])), version, int(seq[0]) if seq else 0)
        index.embeddings_version = embeddings_version(db)
        # Streamed, and each document's postings appended to its partitions' flat
        # buffers at once: the build holds no per-document objects.
        buffers: dict[int, list[array[int]]] = {}
        n_roles = index.n_roles
        rows = db.stream(
            f"SELECT l.doc_id, {IN_FORCE_SQL}, t.terms FROM labels l"
            " LEFT JOIN doc_terms t ON t.doc_id = l.doc_id ORDER BY l.doc_id"
        )
        for doc_id, body, state, version, terms in rows:
            o = index._ordinal(doc_id)
            counts = index._place(o, body, state, terms, version)
            index._count(o, +1)
            for part, role in index._partitions(o):
                key = role if part is None else n_roles + part
                buf = buffers.get(key)
                if buf is None:
                    # term frequencies in 16 bits, widened if a document needs more
                    buf = buffers[key] = [array("i"), array("i"), array("H"), array("i")]
                buf[0].extend(counts.keys())
                buf[1].extend(repeat(o, len(counts)))
                try:
                    buf[2].extend(counts.values())
                except OverflowError:
                    buf[2] = array("i", buf[2])
                    buf[2].extend(counts.values())
                buf[3].append(o)
        for key in sorted(buffers):
            term_of, docs, tfs, members = (_ints(b) for b in buffers.pop(key))
            postings = Postings.from_flat(term_of, docs, tfs, members)
            if key < n_roles:
                index.open[key] = postings
            else:
                index.by_subject[key - n_roles] = postings
        return index

    # -- stored vectors ------------------------------------------------------------------
    def drop_vectors(self) -> None:
        """Forget cached vectors (a vector was written since they were read)."""
        self._vectors.clear()

    def has_vectors(self, model: str) -> bool:
        """Whether `model`'s vectors are cached for every indexed document."""
        found = self._vectors.get(model)
        return found is not None and len(found[1]) >= len(self.ids)

    def _load_vectors(
        self, stored: StoredVectors
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """Every indexed document's stored vector, L2-normalised; cached when `stored`
        was read at the embeddings version this index is at."""
        rows = stored.rows
        dim = len(np.frombuffer(rows[0][1], dtype=np.float32)) if rows else 0
        matrix = np.zeros((len(self.ids), dim), dtype=np.float32)
        has = np.zeros(len(self.ids), dtype=bool)
        for doc_id, blob in rows:
            o = self.ordinal.get(doc_id)
            vec = np.frombuffer(blob, dtype=np.float32)
            if o is None or len(vec) != dim:
                continue
            norm = float(np.linalg.norm(vec))
            matrix[o] = vec / norm if norm else vec
            has[o] = True
        if stored.version == self.embeddings_version:
            self._vectors[stored.model] = (matrix, has)
        return matrix, has

    def top_k_vectors(
        self,
        scope: Scope,
        query: npt.NDArray[np.float32],
        model: str,
        stored: StoredVectors | None,
        k: int,
    ) -> list[tuple[str, float]] | None:
        """Cosine similarity over the authorized documents with a vector in `model`'s space.

        Args:
            query: the query's vector (normalised here).
            stored: the model's stored vectors, read by the caller outside the
                index's lock when `has_vectors` said they are not cached (None: they are).

        Returns:
            The matches, or None when the vectors are needed: `stored` is None and
            they were dropped (a vector was written) since the caller looked.
        """
        if scope.role is None or k <= 0:
            return []
        norm = float(np.linalg.norm(query))
        if not norm:
            return []
        if self.has_vectors(model):
            matrix, has = self._vectors[model]
        elif stored is not None:
            matrix, has = self._load_vectors(stored)
        else:  # dropped since the caller looked: the caller reads them again
            return None
        ords = self._authorized_ordinals(scope)
        ords = ords[has[ords]]
        if not len(ords):
            return []
        scores = (matrix[ords] @ (np.asarray(query, dtype=np.float32) / norm)).astype(np.float32)
        return _best(ords, scores, k, self.ids)

    def _ordinal(self, doc_id: str) -> int:
        o = self.ordinal.get(doc_id)
        if o is None:
            o = len(self.ids)
            self.ids.append(doc_id)
            self.ordinal[doc_id] = o
            self.cols.ensure(o + 1)
        return o

    def _subject(self, subject: str) -> int:
        s = self.subject_ids.get(subject)
        if s is None:
            s = len(self.subject_ids)
            self.subject_ids[subject] = s
            if s >= len(self.subject_stats):
                grown = np.zeros((2 * s, self.n_roles, 3), dtype=np.int64)
                grown[: len(self.subject_stats)] = self.subject_stats
                self.subject_stats = grown
                changed = np.zeros(2 * s, dtype=np.int64)
                changed[: len(self.subject_changed)] = self.subject_changed
                self.subject_changed = changed
        return s

    def _place(
        self,
        o: int,
        body: str | None,
        state: str | None,
        terms: str | None,
        version: int | None = None,
    ) -> dict[int, int]:
        """Set a document's columns from its label row (`IN_FORCE_SQL`) and terms; its
        term counts."""
        cols = self.cols
        cols.acl[o], cols.subject[o] = 0, -1
        cols.version[o] = -1 if version is None else int(version)
        if body is None:
            cols.kind[o] = NO_LABEL
        elif state != LabelState.APPROVED.value:
            cols.kind[o] = NOT_APPROVED
        else:
            try:
                raw = json.loads(body)
            except ValueError:  # a row edited outside the store: denied, never fatal
                raw = None
            label, _ = self.gate.check_label(raw)
            if label is None:
                cols.kind[o] = INVALID
            else:
                cols.kind[o] = VALID
                bits = 0
                for role in label.permitted_receiver_roles:
                    bits |= self.gate.role_bit[role]
                cols.acl[o] = bits
                if self.gate.tier_requires[label.sensitivity_tier] and label.subject is not None:
                    cols.subject[o] = self._subject(label.subject)
        counts: dict[int, int] = {}
        words = _terms(terms)
        if words is None:
            cols.has_terms[o], cols.length[o] = False, 0
        else:
            cols.has_terms[o], cols.length[o] = True, len(words)
            vocab = self.vocab
            for word, tf in Counter(words).items():
                t = vocab.get(word)
                if t is None:
                    t = vocab[word] = len(vocab)
                counts[t] = tf
        return counts

    def _partitions(self, o: int) -> Iterable[tuple[int | None, int]]:
        """The partitions a document is in: (None, role) for open[role], (s, -1) for subject s."""
        cols = self.cols
        if cols.kind[o] != VALID:
            return []
        s = int(cols.subject[o])
        if s >= 0:
            return [(s, -1)]
        acl = int(cols.acl[o])
        return [(None, r) for r in range(self.n_roles) if acl >> r & 1]

    def _count(self, o: int, sign: int) -> None:
        """Add (+1) or remove (-1) a document's share of every statistic and aggregate."""
        cols = self.cols
        kind = int(cols.kind[o])
        if kind == NO_LABEL:
            return
        self.kinds[kind] += sign
        if kind != VALID:
            return
        ranked, length = int(cols.has_terms[o]) * sign, int(cols.length[o]) * sign
        acl = int(cols.acl[o])
        s = int(cols.subject[o])
        for r in range(self.n_roles):
            if not acl >> r & 1:
                continue
            self.acl_count[r] += sign
            if s >= 0:
                self.waiting[r] += sign
                stats = self.subject_stats[s, r]
            else:
                stats = self.open_stats[r]
            stats[COUNT] += sign
            stats[RANKED] += ranked
            stats[LENGTH] += length

    # -- moving forward ------------------------------------------------------------------
    def apply(self, db: Database, doc_ids: Iterable[str]) -> None:
        """Re-read these documents' labels and terms and move them (caller holds the lock)."""
        wanted = sorted(set(doc_ids))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = Database.placeholders(len(chunk))
            labels = {
                d: (b, s, v)
                for d, b, s, v in db.query(
                    f"SELECT l.doc_id, {IN_FORCE_SQL} FROM labels l WHERE l.doc_id IN ({marks})",
                    chunk,
                )
            }
            terms: dict[str, str] = dict(
                db.query(f"SELECT doc_id, terms FROM doc_terms WHERE doc_id IN ({marks})", chunk)
            )
            for doc_id in chunk:
                o = self._ordinal(doc_id)
                for part, role in self._partitions(o):
                    self._postings(part, role).discard(o)
                self._count(o, -1)
                body, state, version = labels.get(doc_id, (None, None, None))
                counts = self._place(o, body, state, terms.get(doc_id), version)
                self._count(o, +1)
                for part, role in self._partitions(o):
                    self._postings(part, role).add(o, counts)

    def _postings(self, part: int | None, role: int) -> Postings:
        if part is None:
            return self.open[role]
        self.changes += 1
        self.subject_changed[part] = self.changes
        found = self.by_subject.get(part)
        if found is None:
            found = self.by_subject[part] = Postings()
        return found

    # -- reading ---------------------------------------------------------------------------
    def scope(self, requester: Requester) -> Scope:
        """The requester's authorized set, as partitions and counts (caller holds the lock)."""
        gate = self.gate
        not_approved = int(self.kinds[NOT_APPROVED])
        labelled = int(self.kinds[NOT_APPROVED] + self.kinds[INVALID] + self.kinds[VALID])
        role = requester.active_role
        early: Rule | None = None
        if role is None or role not in requester.roles:
            early = Rule.NO_ACTIVE_ROLE
        elif gate.role_context.get(role) is None or gate.role_context[role] != (
            requester.active_context
        ):
            early = Rule.ROLE_NOT_AUTHORITATIVE
        if early is not None or role is None:
            rule = early or Rule.NO_ACTIVE_ROLE
            withheld = {rule: labelled - not_approved}
            if not_approved:
                withheld[Rule.INVALID_LABEL] = not_approved
            kept = {k: v for k, v in withheld.items() if v}
            return Scope(None, rule, (), 0, 0, 0, kept, not_approved, requester.id)
        r = self.roles.index(role)
        subjects = tuple(
            s
            for s in (self.subject_ids.get(name) for name in requester.assignments)
            if s is not None
        )
        self.work += 1 + len(subjects)
        stats = self.open_stats[r].copy()
        if subjects:
            stats += self.subject_stats[list(subjects), r].sum(axis=0)
        unlocked = int(stats[COUNT] - self.open_stats[r, COUNT])
        withheld = {
            Rule.INVALID_LABEL: not_approved + int(self.kinds[INVALID]),
            Rule.ROLE_NOT_PERMITTED: int(self.kinds[VALID] - self.acl_count[r]),
            Rule.ASSIGNMENT_REQUIRED: int(self.waiting[r]) - unlocked,
        }
        return Scope(
            r,
            None,
            subjects,
            int(stats[COUNT]),
            int(stats[RANKED]),
            int(stats[LENGTH]),
            {k: v for k, v in withheld.items() if v},
            not_approved,
            requester.id,
        )

    def _parts(self, scope: Scope) -> list[tuple[Postings, int]]:
        """The requester's partitions, with the ACL bit to check (0: none needed).

        From `MERGE_FROM` assigned subjects on, their partitions come merged into one,
        restricted to the role's ACL, and kept per requester: a later request
        applies only the subjects assigned or unassigned since, and those whose
        documents changed.
        """
        assert scope.role is not None
        parts = [(self.open[scope.role], 0)]
        bit = 1 << scope.role
        mine = [s for s in scope.subjects if s in self.by_subject]
        if len(mine) < MERGE_FROM:
            return parts + [(self.by_subject[s], bit) for s in mine]
        key = (scope.role, scope.who)
        merged = self._merged.pop(key, None)
        if merged is None:
            merged = _Merged(Postings(), {}, -1)
        self._merged_size -= merged.size
        wanted = set(mine)
        held = np.fromiter(merged.members, dtype=np.int64, count=len(merged.members))
        stale = set(held[self.subject_changed[held] > merged.built_at].tolist()) & wanted
        acl = self.cols.acl
        for s in (merged.members.keys() - wanted) | stale:
            for o in merged.members.pop(s).tolist():
                merged.postings.discard(o)
        for s in (wanted - merged.members.keys()) | stale:
            source = self.by_subject[s]
            docs = source.documents()
            self.work += 1 + len(docs)
            docs = docs[(acl[docs] & np.uint64(bit)) != 0]
            for o, counts in source.counts_of(docs).items():
                merged.postings.add(o, counts)
            merged.members[s] = docs
        merged.built_at = self.changes
        merged.size = len(merged.postings.docs) + sum(
            len(c) for c in merged.postings.delta.values()
        )
        self._merged[key] = merged
        self._merged_size += merged.size
        while self._merged_size > MERGED_BUDGET and len(self._merged) > 1:
            _, dropped = self._merged.popitem(last=False)
            self._merged_size -= dropped.size
        return [*parts, (merged.postings, 0)]

    def authorized(self, scope: Scope) -> list[str]:
        """The authorized documents' ids, sorted (work in proportion to the set)."""
        ids = self.ids
        return sorted(ids[int(o)] for o in self._authorized_ordinals(scope))

    def _authorized_ordinals(self, scope: Scope) -> npt.NDArray[np.int32]:
        if scope.role is None:
            return np.zeros(0, dtype=np.int32)
        out: list[npt.NDArray[np.int32]] = []
        acl = self.cols.acl
        for postings, bit in self._parts(scope):
            docs = postings.documents()
            self.work += 1 + len(docs)
            if bit:
                docs = docs[(acl[docs] & np.uint64(bit)) != 0]
            out.append(docs)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int32)

    def top_k(self, scope: Scope, query: str, k: int) -> list[tuple[str, float]]:
        """BM25 over the authorized set only; the `k` best positive scores, ties by id."""
        if scope.role is None or not scope.ranked or k <= 0:
            return []
        # A term no stored document holds is looked up like any other (id -1 matches
        # nothing): skipping it would make the work depend on the whole store's words.
        tokens = [self.vocab.get(t, -1) for t in tokenize(query)]
        if not tokens:
            return []
        parts = self._parts(scope)
        acl, length = self.cols.acl, self.cols.length
        n, avg = scope.ranked, np.float64(scope.length) / scope.ranked
        norm: dict[int, tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]] = {}
        for term in dict.fromkeys(tokens):
            got_docs, got_tfs = [], []
            for postings, bit in parts:
                docs, tfs = postings.postings(term)
                self.work += 1 + len(docs)
                if bit and len(docs):
                    keep = (acl[docs] & np.uint64(bit)) != 0
                    docs, tfs = docs[keep], tfs[keep]
                if len(docs):
                    got_docs.append(docs)
                    got_tfs.append(tfs)
            if not got_docs:
                continue
            docs = np.concatenate(got_docs)
            tf = np.concatenate(got_tfs).astype(np.float32)
            df = len(docs)
            idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
            # bm25s: float64 length normalisation, float32 per-term score
            tfc = tf / (K1 * ((1 - B) + B * length[docs] / avg) + tf)
            norm[term] = (docs, (idf * tfc).astype(np.float32))
        if not norm:
            return []
        every = np.concatenate([docs for docs, _ in norm.values()])
        uniq, where = np.unique(every, return_inverse=True)
        scores = np.zeros(len(uniq), dtype=np.float32)
        slots: dict[int, npt.NDArray[np.intp]] = {}
        at = 0
        for term, (docs, _) in norm.items():
            slots[term] = where[at : at + len(docs)]
            at += len(docs)
        for term in tokens:  # repeats count, in query order, as bm25s sums them
            if term in norm:
                scores[slots[term]] += norm[term][1]
        return _best(uniq, scores, k, self.ids)

    def decide_ids(
        self, scope: Scope, doc_ids: Sequence[str]
    ) -> tuple[list[Rule], list[int | None]]:
        """The gate's deciding rule for each id and its label version (None:
        no label), from the index's columns, in the order of Algorithm 1 as the
        store applies it (a document without a label in force is an invalid label).

        Every id costs the same whether the store holds it or not: one dictionary
        lookup and the same vectorised column reads (an unknown id reads a
        placeholder row), so a batch's work says nothing about which ids exist.
        """
        cols = self.cols
        n = len(doc_ids)
        ords = np.fromiter((self.ordinal.get(d, -1) for d in doc_ids), dtype=np.int64, count=n)
        known = ords >= 0
        at = np.where(known, ords, 0)
        kind = np.where(known, cols.kind[at], NO_LABEL)
        version = np.where(known, cols.version[at], -1)
        acl = np.where(known, cols.acl[at], np.uint64(0))
        subject = np.where(known, cols.subject[at], -1)
        rules = np.full(n, Rule.PERMIT, dtype=np.uint8)
        in_force = (kind == INVALID) | (kind == VALID)
        rules[~in_force] = Rule.INVALID_LABEL
        if scope.role is None:
            rules[in_force] = scope.rule or Rule.NO_ACTIVE_ROLE
        else:
            valid = kind == VALID
            rules[kind == INVALID] = Rule.INVALID_LABEL
            on_acl = (acl & np.uint64(1 << scope.role)) != 0
            rules[valid & ~on_acl] = Rule.ROLE_NOT_PERMITTED
            unlocked = np.isin(subject, np.array(scope.subjects, dtype=np.int32))
            rules[valid & on_acl & (subject >= 0) & ~unlocked] = Rule.ASSIGNMENT_REQUIRED
        self.work += n
        return (
            [Rule(r) for r in rules.tolist()],
            [v if v >= 0 else None for v in version.tolist()],
        )

    def listed(self, scope: Scope) -> list[tuple[str, Rule]]:
        """Every labelled document outside the authorized set, with its rule, by id.

        Work in proportion to the whole store: only for callers that asked to list
        withheld documents (an operator's explanation), never on the plain path.
        """
        n = len(self.ids)
        cols = self.cols
        kind = cols.kind[:n]
        rules = np.zeros(n, dtype=np.uint8)
        rules[kind == NOT_APPROVED] = Rule.INVALID_LABEL
        approved = (kind == INVALID) | (kind == VALID)
        if scope.role is None:
            rules[approved] = scope.rule or Rule.NO_ACTIVE_ROLE
        else:
            rules[kind == INVALID] = Rule.INVALID_LABEL
            valid = kind == VALID
            on_acl = (cols.acl[:n] & np.uint64(1 << scope.role)) != 0
            rules[valid & ~on_acl] = Rule.ROLE_NOT_PERMITTED
            waiting = valid & on_acl & (cols.subject[:n] >= 0)
            unlocked = np.isin(cols.subject[:n], np.array(scope.subjects, dtype=np.int32))
            rules[waiting & ~unlocked] = Rule.ASSIGNMENT_REQUIRED
        ids = self.ids
        out = [(ids[int(o)], Rule(int(rules[o]))) for o in np.flatnonzero(rules)]
        return sorted(out)


def _terms(stored: str | None) -> list[str] | None:
    """A document's stored index terms; None when it has none, or when the stored value
    is not a JSON list of strings (a row edited outside the store: the document is then
    not ranked, rather than every request failing)."""
    if stored is None:
        return None
    try:
        words = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        return None
    return words


def _ints(buffer: array[int]) -> npt.NDArray[np.integer[Any]]:
    """A build buffer as an array of its own width (no copy)."""
    out: npt.NDArray[np.integer[Any]] = np.frombuffer(
        buffer, dtype=np.uint16 if buffer.typecode == "H" else np.int32
    )
    return out


def embeddings_version(db: Database) -> str:
    """The counter `put_embedding` bumps (empty before the first vector)."""
    row = db.query_one("SELECT value FROM meta WHERE key = 'embeddings_version'")
    return str(row[0]) if row else ""


def _best(
    ordinals: npt.NDArray[np.int64] | npt.NDArray[np.int32],
    scores: npt.NDArray[np.float32],
    k: int,
    ids: Sequence[str],
) -> list[tuple[str, float]]:
    """The `k` highest positive scores, best first; equal scores ordered by document id."""
    positive = np.flatnonzero(scores > 0)
    if not len(positive):
        return []
    if len(positive) > k:
        # every document scoring at least the k-th best (ties at the cut included)
        kth = np.partition(scores[positive], len(positive) - k)[len(positive) - k]
        positive = positive[scores[positive] >= kth]
    ranked = sorted(
        ((-float(scores[i]), ids[int(ordinals[i])]) for i in positive.tolist()),
    )
    return [(doc_id, -neg) for neg, doc_id in ranked[:k]]
