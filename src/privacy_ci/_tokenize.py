"""The one BM25 tokenizer of the package, and its named configurations.

Two BM25 indexes exist, and their tokenisations genuinely differ, so they are
two configurations of the same `Tokenizer` rather than two implementations:

* `STORE_TOKENIZER` (the Privacy Conductor's document store, `privacy_ci.store`):
  ``str.lower()``, runs of two or more word characters (``\\b\\w\\w+\\b``, the
  scikit-learn pattern: underscores kept inside a term, one-letter words dropped),
  the 33 bm25s ``STOPWORDS_EN`` removed, Snowball stems. Stores hold these terms
  (the ``doc_terms`` table, written once at ingest), so changing this
  configuration would make queries disagree with every existing store.
* `BM25_PLUS_TOKENIZER` (``bm25-plus`` over regulation trees, `privacy_ci.retrieval`):
  NFKC normalisation and Unicode case folding, runs of letters and digits
  (``[^\\W_]+``: underscores split, one-letter words kept), the 179 bm25s
  ``STOPWORDS_EN_PLUS`` removed, Snowball stems.

`LEAVES_TOKENIZER` is ``bm25-leaves`` (our first reading of the paper's BM25):
``text.lower().split()`` only.

The retrieval package hashes a tokenizer's fields into its index cache keys, so
the fields keep their original names and values (``stopwords=True`` still means
the long list): existing cached indexes stay valid.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from privacy_ci.errors import PrivacyCIError

__all__ = ["BM25_PLUS_TOKENIZER", "LEAVES_TOKENIZER", "STORE_TOKENIZER", "Tokenizer"]

_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
_TERMS = re.compile(r"(?u)\b\w\w+\b")
# `_TERMS` on lower-cased ASCII text (where ``\w`` is ``[0-9_a-z]``): the same runs,
# found about four times faster (bulk loads tokenize every document)
_ASCII_TERMS = re.compile(r"[0-9_a-z]{2,}")


@lru_cache(maxsize=4)
def _stopwords(language: str, long_list: bool) -> frozenset[str]:
    if language != "english":  # pragma: no cover - only English is configured
        raise PrivacyCIError(f"no stop-word list for {language!r}")
    # bm25s ships no type hints: imported as an untyped module.
    lists = importlib.import_module("bm25s.stopwords")
    return frozenset(lists.STOPWORDS_EN_PLUS if long_list else lists.STOPWORDS_EN)


@lru_cache(maxsize=4)
def _stemmer(language: str) -> Any:
    try:
        stemmer = importlib.import_module("Stemmer")  # PyStemmer: no type hints
    except ImportError as exc:  # pragma: no cover - PyStemmer is a dependency
        raise PrivacyCIError("stemming needs PyStemmer (`pip install PyStemmer`)") from exc
    return stemmer.Stemmer(language)


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """Text -> tokens, the same for documents and queries.

    Args:
        split: ``whitespace`` (``text.lower().split()``: the paper baseline);
            ``words`` (runs of letters and digits after Unicode case folding and
            NFKC normalisation); or ``terms`` (runs of two or more word characters,
            underscore included, after ``str.lower()``: the store's index terms).
        stopwords: ``True`` drops bm25s ``STOPWORDS_EN_PLUS`` (179 words); ``"en"``
            drops bm25s ``STOPWORDS_EN`` (33 words); ``False`` keeps every token.
        stem: Snowball-stem with PyStemmer.
        language: the stemmer / stop-word language.
    """

    split: Literal["whitespace", "words", "terms"] = "words"
    stopwords: bool | Literal["en"] = True
    stem: bool = True
    language: str = "english"

    def __call__(self, text: str) -> list[str]:
        """Tokenise.

        Args:
            text: any text.

        Returns:
            The tokens, in order, repeats kept (they are term frequencies).
        """
        if self.split == "whitespace":
            tokens = text.lower().split()
        elif self.split == "terms":
            lowered = text.lower()
            tokens = (_ASCII_TERMS if lowered.isascii() else _TERMS).findall(lowered)
        else:
            tokens = _WORDS.findall(unicodedata.normalize("NFKC", text).casefold())
        if self.stopwords:
            stop = _stopwords(self.language, self.stopwords is True)
            tokens = [t for t in tokens if t not in stop]
        if self.stem and tokens:
            tokens = list(_stemmer(self.language).stemWords(tokens))
        return tokens


STORE_TOKENIZER = Tokenizer(split="terms", stopwords="en", stem=True)
"""The document store's index terms (see the module docstring)."""

BM25_PLUS_TOKENIZER = Tokenizer(split="words", stopwords=True, stem=True)
"""``bm25-plus`` over regulation trees (see the module docstring)."""

LEAVES_TOKENIZER = Tokenizer(split="whitespace", stopwords=False, stem=False)
"""``bm25-leaves``: lower-cased, split on whitespace, nothing removed or stemmed."""
