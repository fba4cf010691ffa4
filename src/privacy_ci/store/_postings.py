"""`Postings`: an inverted index over one set of documents, changed one document at a time.

The store keeps one `Postings` per access partition (see `privacy_ci.store._index`).
Most of a partition lives in one compacted segment (CSR: sorted term ids, offsets,
then document ordinals and term frequencies); recent changes sit in a small delta
(added documents) and a removed set (documents of the segment no longer in the
partition). A change costs what it changes; the delta is folded into the segment
once it grows past a fraction of the partition, so reading a term's postings never
scans more than that fraction besides the term's own postings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
Ints = npt.NDArray[np.integer[Any]]  # ordinals in int32, frequencies in uint16 or int32
_EMPTY = np.zeros(0, dtype=np.int32)
_EMPTY.flags.writeable = False
_ZERO_OFFSETS = np.zeros(1, dtype=np.int64)
_ZERO_OFFSETS.flags.writeable = False

MAX_DELTA = 1024
"""A partition's delta is folded into its segment past this many changes (or 1/8 of it)."""


def _width(top: int) -> type[np.integer[Any]]:
    """The narrowest unsigned or signed integer type holding 0..top."""
    if top <= 0xFFFF:
        return np.uint16
    return np.int32 if top < 2**31 else np.int64


class Postings:
    """Term -> (document ordinals, term frequencies) over one set of documents."""

    __slots__ = ("delta", "docs", "members", "offsets", "removed", "terms", "tfs", "top")

    def __init__(self) -> None:
        self.terms: Ints = _EMPTY  # sorted unique term ids of the segment
        self.top = 0x7FFFFFFF  # the largest id the terms' type holds
        self.offsets: Ints = _ZERO_OFFSETS
        self.docs: I32 = _EMPTY  # per term, ascending ordinals
        self.tfs: Ints = _EMPTY
        self.members: I32 = _EMPTY  # the segment's documents, ascending
        self.removed: set[int] = set()
        self.delta: dict[int, Mapping[int, int]] = {}

    def __len__(self) -> int:
        return len(self.members) - len(self.removed) + len(self.delta)

    def add(self, ordinal: int, counts: Mapping[int, int]) -> None:
        """Put a document in (it must not be in already: `discard` it first)."""
        self.delta[ordinal] = counts
        self._settle()

    def discard(self, ordinal: int) -> None:
        """Take a document out (it must be in)."""
        if self.delta.pop(ordinal, None) is None:
            self.removed.add(ordinal)
        self._settle()

    def _settle(self) -> None:
        pending = len(self.delta) + len(self.removed)
        if pending > min(MAX_DELTA, len(self.members) // 8):
            self.compact()

    def compact(self) -> None:
        """Fold the delta and the removals into one segment."""
        term_of, docs, tfs = self.flat()
        self._set(term_of, docs, tfs, self.documents())

    @classmethod
    def merged(cls, parts: Iterable[tuple[Postings, I32 | None]]) -> Postings:
        """One compacted index over several, each restricted to a set of its documents.

        Args:
            parts: (postings, keep) pairs; `keep` lists the documents of that
                postings to take (None: all of them).
        """
        flats, members = [], []
        for postings, keep in parts:
            term_of, docs, tfs = postings.flat()
            mine = postings.documents()
            if keep is not None:
                mask = np.isin(docs, keep)
                term_of, docs, tfs = term_of[mask], docs[mask], tfs[mask]
                mine = mine[np.isin(mine, keep)]
            flats.append((term_of, docs, tfs))
            members.append(mine)
        out = cls()
        if flats:
            out._set(
                np.concatenate([f[0] for f in flats]),
                np.concatenate([f[1] for f in flats]),
                np.concatenate([f[2] for f in flats]),
                np.concatenate(members),
            )
        return out

    @classmethod
    def from_flat(cls, term_of: Ints, docs: Ints, tfs: Ints, members: Ints) -> Postings:
        """A compacted index from flat postings (any order) and its documents."""
        out = cls()
        out._set(term_of, docs, tfs, members)
        return out

    def flat(self) -> tuple[I32, I32, Ints]:
        """Every posting as (term id, ordinal, frequency) arrays, delta and removals applied."""
        term_of = np.repeat(self.terms, np.diff(self.offsets))
        docs, tfs = self.docs, self.tfs
        if self.removed:
            gone = self._gone()
            keep = ~np.isin(docs, gone)
            term_of, docs, tfs = term_of[keep], docs[keep], tfs[keep]
        if self.delta:
            size = sum(len(c) for c in self.delta.values())
            d_terms = np.empty(size, dtype=np.int32)
            d_docs = np.empty(size, dtype=np.int32)
            d_tfs = np.empty(size, dtype=np.int32)
            at = 0
            for ordinal, counts in self.delta.items():
                n = len(counts)
                d_terms[at : at + n] = np.fromiter(counts.keys(), dtype=np.int32, count=n)
                d_tfs[at : at + n] = np.fromiter(counts.values(), dtype=np.int32, count=n)
                d_docs[at : at + n] = ordinal
                at += n
            term_of = np.concatenate([term_of, d_terms])
            docs = np.concatenate([docs, d_docs])
            tfs = np.concatenate([tfs, d_tfs])
        return term_of.astype(np.int32), docs, tfs

    def _set(self, term_of: Ints, docs: Ints, tfs: Ints, members: Ints) -> None:
        # the narrowest types that hold the values: most of the store's memory is here
        order = np.lexsort((docs, term_of))
        term_of, self.docs = term_of[order], docs[order].astype(np.int32, copy=False)
        narrow = np.uint16 if not len(tfs) or int(tfs.max()) <= 0xFFFF else np.int32
        self.tfs = tfs[order].astype(narrow)
        terms, starts = np.unique(term_of, return_index=True)
        # most partitions are one data subject's few documents: 16-bit term ids and
        # offsets halve what their many short posting lists cost
        self.terms = terms.astype(np.uint16 if not len(terms) or terms[-1] <= 0xFFFF else np.int32)
        self.top = int(np.iinfo(self.terms.dtype).max)
        self.offsets = np.append(starts, len(term_of)).astype(_width(len(term_of)))
        self.members = np.sort(members).astype(np.int32)
        self.removed = set()
        self.delta = {}

    def postings(self, term: int) -> tuple[I32, Ints]:
        """The documents holding `term` and its frequency in each."""
        held = 0 <= term <= self.top  # else no stored id can match
        i = int(np.searchsorted(self.terms, term)) if held else len(self.terms)
        if i < len(self.terms) and self.terms[i] == term:
            lo, hi = self.offsets[i], self.offsets[i + 1]
            docs, tfs = self.docs[lo:hi], self.tfs[lo:hi]
            if self.removed:
                gone = self._gone()
                keep = ~np.isin(docs, gone)
                docs, tfs = docs[keep], tfs[keep]
        else:
            docs, tfs = _EMPTY, _EMPTY
        if self.delta:
            extra = [(o, c[term]) for o, c in self.delta.items() if term in c]
            if extra:
                docs = np.concatenate([docs, np.array([o for o, _ in extra], dtype=np.int32)])
                tfs = np.concatenate([tfs, np.array([t for _, t in extra], dtype=np.int32)])
        return docs, tfs

    def _gone(self) -> I32:
        """The removed documents, as an array (for `np.isin`)."""
        return np.fromiter(self.removed, dtype=np.int32, count=len(self.removed))

    def counts_of(self, keep: I32) -> dict[int, dict[int, int]]:
        """Term frequencies of the documents `keep` (ordinal -> term id -> frequency)."""
        out: dict[int, dict[int, int]] = {int(o): {} for o in keep.tolist()}
        if not len(keep):
            return out
        term_of, docs, tfs = self.flat()
        mask = np.isin(docs, keep)
        for t, o, tf in zip(
            term_of[mask].tolist(), docs[mask].tolist(), tfs[mask].tolist(), strict=True
        ):
            out[o][t] = tf
        return out

    def documents(self) -> I32:
        """Every document in the partition (ordinals, unordered)."""
        docs = self.members
        if self.removed:
            gone = self._gone()
            docs = docs[~np.isin(docs, gone)]
        if self.delta:
            added = np.fromiter(self.delta.keys(), dtype=np.int32, count=len(self.delta))
            docs = np.concatenate([docs, added])
        return docs
