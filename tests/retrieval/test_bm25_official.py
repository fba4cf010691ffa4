"""``bm25-paper`` reproduces the Privacy Checklist's released BM25 (issue 14).

The reference below is the published formula written out plainly, term by term
(IDF ``ln(N - n + 0.5) - ln(n + 0.5)``, negative values replaced by 0.25 x the
mean IDF; every query token counted; a stable sort by score), independent of the
vectorised implementation under test.
"""

from __future__ import annotations

import math

import pytest

from privacy_ci.retrieval import EmptyQueryError, RetrievalError, build_retriever
from privacy_ci.retrieval._bm25_official import OfficialBM25, OfficialBM25Retriever
from tests._shared import data_dir, require_files


def reference_scores(corpus: list[list[str]], query: list[str]) -> list[float]:
    n_docs = len(corpus)
    avgdl = sum(len(d) for d in corpus) / n_docs
    df: dict[str, int] = {}
    for doc in corpus:
        for word in dict.fromkeys(doc):
            df[word] = df.get(word, 0) + 1
    idf = {w: math.log(n_docs - n + 0.5) - math.log(n + 0.5) for w, n in df.items()}
    mean = sum(idf.values()) / len(idf)
    idf = {w: (0.25 * mean if v < 0 else v) for w, v in idf.items()}
    out = []
    for doc in corpus:
        score = 0.0
        for word in query:
            tf = doc.count(word)
            if tf:
                norm = tf + 1.5 * (1 - 0.75 + 0.75 * len(doc) / avgdl)
                score += idf[word] * tf * 2.5 / norm
        out.append(score)
    return out


def words(text: str) -> list[str]:
    return text.split(" ")


CORPUS = [
    words("a covered entity may disclose protected health information"),
    words("a covered entity may use protected health information for treatment"),
    words("a business associate may disclose health information as the contract permits"),
    words("the Secretary may require a covered entity to disclose"),
    words("psychotherapy notes need an authorization"),
]


def test_scores_equal_the_formula() -> None:
    bm25 = OfficialBM25(CORPUS)
    for query in (
        words("covered entity disclose"),
        words("health health information treatment"),  # a repeat counts twice
        words("Covered Entity"),  # no case folding: nothing matches
        words("a a a may"),  # words in most documents: the epsilon IDF
    ):
        expected = reference_scores(CORPUS, query)
        assert bm25.scores(query).tolist() == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_negative_idf_is_a_fraction_of_the_mean() -> None:
    bm25 = OfficialBM25(CORPUS)
    # "a" is in 4 of 5 documents: ln(1.5) - ln(4.5) < 0
    assert math.log(5 - 4 + 0.5) - math.log(4 + 0.5) < 0
    assert bm25.idf["a"] == pytest.approx(0.25 * bm25.average_idf)
    assert bm25.average_idf > 0 and bm25.idf["psychotherapy"] == pytest.approx(
        math.log(5 - 1 + 0.5) - math.log(1 + 0.5)
    )


def test_repeats_count_and_case_matters() -> None:
    bm25 = OfficialBM25(CORPUS)
    once = bm25.scores(["treatment"])[1]
    assert bm25.scores(["treatment", "treatment"])[1] == pytest.approx(2 * once)
    assert bm25.scores(["Treatment"]).sum() == 0.0


def test_ties_keep_corpus_order_and_k_is_always_filled() -> None:
    corpus = [["x", "y"], ["q", "r"], ["y", "x"], ["z", "w"], ["v", "u"]]
    bm25 = OfficialBM25(corpus)
    top = bm25.top(["x"], 4)
    assert [i for i, _ in top] == [0, 2, 1, 3]  # two equal scores, then zeros in order
    assert top[0][1] == top[1][1] > 0 and top[-1][1] == 0.0
    assert [i for i, _ in bm25.top(["nothing"], 3)] == [0, 1, 2]


def test_an_empty_corpus_is_an_error() -> None:
    with pytest.raises(RetrievalError):
        OfficialBM25([])


def test_query_is_split_on_single_spaces() -> None:
    tokens = OfficialBM25Retriever.query_tokens("a  covered\tentity\nmay")
    assert tokens == ["a", "", "covered\tentity\nmay"]
    assert OfficialBM25Retriever.document_tokens(" \n§ 164.502 Uses\nand\tdisclosures ") == [
        "§",
        "164.502",
        "Uses",
        "and",
        "disclosures",
    ]


@pytest.fixture(scope="module")
def hipaa_kb():  # type: ignore[no-untyped-def]
    require_files(data_dir(), ["hipaa/kb_annotated.json"], "the shared data")
    from privacy_ci.knowledge import load_knowledge_base

    return load_knowledge_base("hipaa")


def test_the_hipaa_corpus_is_the_annotated_kb(hipaa_kb) -> None:  # type: ignore[no-untyped-def]
    import json

    raw = json.loads((data_dir() / "hipaa/kb_annotated.json").read_text(encoding="utf-8"))
    retriever = build_retriever("bm25-paper", hipaa_kb)
    assert isinstance(retriever, OfficialBM25Retriever)
    # 591 entries in file order (ids as the tree spells them: a hit is judged on the tree)
    assert len(retriever.ids) == len(raw) == 591
    assert [hipaa_kb.norms[i].source_id.strip() for i in retriever.ids] == [k.strip() for k in raw]
    query = (
        "A hospital disclosed a patient's psychotherapy notes to her employer"
        " without an authorization signed by the patient."
    )
    corpus = [v["text"].strip().replace("\n", " ").split() for v in raw.values()]
    expected = reference_scores(corpus, query.split(" "))
    order = sorted(range(len(corpus)), key=lambda i: expected[i], reverse=True)[:10]
    hits = retriever.retrieve(query, k=10)
    assert [h.node_id for h in hits] == [retriever.ids[i] for i in order]
    assert [h.score for h in hits] == pytest.approx([expected[i] for i in order], rel=1e-12)


def test_bad_queries(hipaa_kb) -> None:  # type: ignore[no-untyped-def]
    retriever = build_retriever("bm25-paper", hipaa_kb)
    with pytest.raises(EmptyQueryError):
        retriever.retrieve("   ")
    with pytest.raises(RetrievalError):
        retriever.retrieve("covered entity", k=0)


def _result(name: str, hits: dict[str, list[str]]) -> object:
    from privacy_ci.retrieval import RetrievalResult, case_metrics

    gold = {"a": ("1",), "b": ("2",), "c": ("3",), "d": ("4",)}
    per_case = [
        case_metrics(cid, gold[cid], ranking, lambda n: (n,)) for cid, ranking in hits.items()
    ]
    return RetrievalResult(
        name, "toy", "text", (10,), len(per_case), 0, {}, {}, 0.0, 0.0, 0.0, per_case
    )


def test_paired_difference() -> None:
    from privacy_ci.retrieval import paired_difference

    base = _result("bm25-paper", {"a": ["1"], "b": ["x"], "c": ["x"], "d": ["x"]})
    better = _result("mine", {"a": ["1"], "b": ["2"], "c": ["3"], "d": ["x"]})
    diff = paired_difference(better, base, "recall@10", resamples=500)
    assert diff.value == pytest.approx(0.5) and diff.cases == 4
    assert 0.0 <= diff.low < diff.value < diff.high <= 1.0  # every paired difference is 0 or 1
    assert paired_difference(base, base, "any_hit@10").as_dict()["high"] == 0.0
    assert diff.text().startswith("+50.0 [")
    with pytest.raises(RetrievalError):
        paired_difference(better, base, "mrr")
    with pytest.raises(RetrievalError):
        paired_difference(better, _result("other", {}), "recall@10")


def test_entries_are_a_document_unit(hipaa_kb) -> None:  # type: ignore[no-untyped-def]
    """Any BM25 or dense recipe can index the annotated entries, as the released code does."""
    from privacy_ci.retrieval import DocumentRecipe, build_documents

    ids, texts = build_documents(hipaa_kb, DocumentRecipe(units="entries", text="own"))
    assert ids == list(hipaa_kb.norms) and len(ids) == 591
    assert texts[0] == hipaa_kb.norms[ids[0]].text
    ids2, texts2 = build_documents(
        hipaa_kb, DocumentRecipe(units="entries", text="own", norm_fields=True)
    )
    assert ids2 == ids and texts2[0].startswith(texts[0]) and len(texts2[0]) > len(texts[0])
