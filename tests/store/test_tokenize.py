"""The store's index terms and bm25-plus are two configurations of one tokenizer."""

from __future__ import annotations

from privacy_ci import _tokenize
from privacy_ci.retrieval import LEAVES_CONFIG, PLUS_CONFIG, Tokenizer
from privacy_ci.store import tokenize

TEXT = "The HIV_test of a 1-year-old: Straße, ﬁnance and about results"


def test_one_tokenizer_serves_the_store_and_the_retrievers() -> None:
    assert Tokenizer is _tokenize.Tokenizer
    assert PLUS_CONFIG.tokenizer == _tokenize.BM25_PLUS_TOKENIZER
    assert LEAVES_CONFIG.tokenizer == _tokenize.LEAVES_TOKENIZER
    assert tokenize(TEXT) == _tokenize.STORE_TOKENIZER(TEXT)


def test_the_configurations_differ_as_documented() -> None:
    # store: lower(), 2+ word characters (underscore kept), the 33 short stop words
    assert tokenize(TEXT) == ["hiv_test", "year", "old", "straße", "ﬁnanc", "about", "result"]
    # bm25-plus: NFKC + casefold, letters and digits, the 179 long stop words
    assert _tokenize.BM25_PLUS_TOKENIZER(TEXT) == [
        "hiv",
        "test",
        "1",
        "year",
        "old",
        "strass",
        "financ",
        "result",
    ]
    assert _tokenize.LEAVES_TOKENIZER("The Court's ORDER") == ["the", "court's", "order"]


def test_the_fields_keep_retrieval_index_keys() -> None:
    # retrieval hashes these fields into its cache keys: names and values must stay
    assert PLUS_CONFIG.index_key() == "64dfbd3c70cf164c"
    assert LEAVES_CONFIG.index_key() == "6da86048c1979ecd"


def test_the_ascii_fast_path_finds_the_same_terms() -> None:
    samples = [
        "Lipid panel: LDL 130 mg/dL, HDL_ratio=3.2; a b cd e-fg x1 _ __ a_ 2x",
        "Patient P001's discharge summary (2024-03-01)\n\tRx: atorvastatin 20mg",
        "  trailing_ underscores__ and ALL CAPS WORDS, I a A I'm o'clock  ",
        "",
    ]
    for text in samples:
        lowered = text.lower()
        assert _tokenize._ASCII_TERMS.findall(lowered) == _tokenize._TERMS.findall(lowered)
    # text that is not ASCII takes the Unicode pattern: ä, ü are word characters there
    assert tokenize("Ärztin Müller") == list(
        _tokenize._stemmer("english").stemWords(["ärztin", "müller"])
    )
