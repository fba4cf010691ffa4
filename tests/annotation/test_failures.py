"""Malformed answers are re-asked, then recorded as explicit failures with every raw
attempt; an interrupted build resumes without re-asking or losing a leaf; another
build's folder is refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from privacy_ci.annotation import (
    PARSE_RETRIES,
    AnnotationOutputError,
    Annotator,
    BuildRunMismatch,
    load_annotation_run,
    parse_annotation,
    run_annotation,
    select_leaves,
    write_kb_folder,
)
from privacy_ci.knowledge import KnowledgeBase, load_kb_folder
from privacy_ci.llm import LLMError

from . import SUBTREE, answer_of, node_of, published_answers, scripted

NODE = f"{SUBTREE}(iv)"  # references 164.502(a)(5)(i) (exception) and 164.508 (support)
REFS = ["164.502(a)(5)(i)", "164.508"]


def good(published: KnowledgeBase) -> dict[str, object]:
    return answer_of(published.norms[NODE], REFS)


def broken(published: KnowledgeBase) -> dict[str, str]:
    """Four kinds of malformed answer, each valid JSON except the first."""
    unknown_role = good(published)
    unknown_role["Q2"] = {**unknown_role["Q2"], "Receiver Role": "court"}  # type: ignore[dict-item]
    stray_reference = good(published)
    stray_reference["Q5"] = {**stray_reference["Q5"], "164.510": "Support"}  # type: ignore[dict-item]
    missing = good(published)
    del missing["Q3"]
    q2 = dict(missing["Q2"])  # type: ignore[arg-type]
    del q2["Purpose"]
    missing["Q2"] = q2
    return {
        "bad JSON": '{"Q1": "Permit", "Q2": {',
        "unknown role": json.dumps(unknown_role),
        "stray reference": json.dumps(stray_reference),
        "missing fields": json.dumps(missing),
    }


@pytest.mark.parametrize("kind", ["bad JSON", "unknown role", "stray reference", "missing fields"])
def test_a_malformed_answer_is_re_asked_then_an_explicit_failure(
    published: KnowledgeBase, kind: str, tmp_path: Path
) -> None:
    text = broken(published)[kind]
    client, backend = scripted(lambda node, refs: text)
    annotator = Annotator(client, published.tree)
    run = asyncio.run(run_annotation(annotator, tmp_path, [NODE], tree_variant="ecfr"))
    (record,) = run.records
    assert not record.ok and record.annotation is None
    assert len(backend.calls) == PARSE_RETRIES + 1 == len(record.attempts)
    assert all(a["text"] == text for a in record.attempts)  # the raw attempts are kept
    assert all(a["parse_error"] for a in record.attempts)
    expected = {
        "bad JSON": "not JSON",
        "unknown role": "unknown characteristic(s) ['Receiver Role']",
        "stray reference": "['164.510'] not in the node's references",
        "missing fields": "missing ['Q3']",
    }[kind]
    assert record.failure is not None and expected in record.failure
    if kind == "missing fields":
        assert "missing characteristic(s) ['Purpose']" in record.failure
    # the knowledge base leaves it out and says so
    write_kb_folder(run, published.tree, wordnet=None, taxonomy=None)
    assert load_kb_folder(tmp_path).norms == {}
    kb_json = json.loads((tmp_path / "kb.json").read_text())
    assert list(kb_json["summary"]["failures"]) == [NODE]


def test_a_later_answer_that_parses_wins(published: KnowledgeBase, tmp_path: Path) -> None:
    answers = iter(["not json at all", json.dumps(good(published))])
    client, _ = scripted(lambda node, refs: next(answers))
    run = asyncio.run(
        run_annotation(Annotator(client, published.tree), tmp_path, [NODE], tree_variant="ecfr")
    )
    (record,) = run.records
    assert record.ok and len(record.attempts) == 2
    assert record.attempts[0]["parse_error"] and not record.attempts[1]["parse_error"]
    assert dict(record.annotation.references) == {  # type: ignore[union-attr]
        "164.502(a)(5)(i)": "exception",
        "164.508": "support",
    }


def test_a_failed_call_is_a_failure_without_re_asking(
    published: KnowledgeBase, tmp_path: Path
) -> None:
    client, backend = scripted(lambda node, refs: LLMError("quota", retryable=False))
    run = asyncio.run(
        run_annotation(Annotator(client, published.tree), tmp_path, [NODE], tree_variant="ecfr")
    )
    (record,) = run.records
    assert not record.ok and "model call failed" in str(record.failure)
    assert len(backend.calls) == 1


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([], "expected a JSON object"),
        ({"Q1": "Allowed"}, "Q1: 'Allowed' is not one of"),
        ({"Q1": "Permit", "Q6": 1}, "unknown key(s) ['Q6']"),
    ],
)
def test_the_parser_is_strict(value: object, problem: str) -> None:
    with pytest.raises(AnnotationOutputError, match=None) as info:
        parse_annotation(value, REFS)
    assert problem in str(info.value)


def test_the_parser_takes_the_papers_option_spellings(published: KnowledgeBase) -> None:
    answer = good(published)
    answer["Q1"] = "B. Permit by law"
    answer["Q3"] = "not sure"
    parsed = parse_annotation(answer, REFS)
    assert parsed.norm_type == "positive_norm" and parsed.sender_is_subject == "not sure"


class Interrupted(Exception):
    """Stands for a kill: not an LLMError, so nothing catches it."""


def test_an_interrupted_build_resumes_without_redoing_or_losing_leaves(
    published: KnowledgeBase, tmp_path: Path
) -> None:
    leaves = select_leaves(published.tree, SUBTREE)
    answer = published_answers(published)
    calls = {"n": 0}

    def dies_on_the_fourth(node: str, refs: list[str]) -> str:
        calls["n"] += 1
        if calls["n"] == 4:
            raise Interrupted
        result = answer(node, refs)
        assert isinstance(result, str)
        return result

    client, _ = scripted(dies_on_the_fourth)
    annotator = Annotator(client, published.tree)
    with pytest.raises(Interrupted):
        asyncio.run(run_annotation(annotator, tmp_path, leaves, tree_variant="ecfr", concurrency=1))
    first = load_annotation_run(tmp_path)
    finished = [r.node_id for r in first.records]
    assert leaves[3] not in finished and set(leaves[:3]) <= set(finished)
    # a kill in the middle of writing a line leaves half a record: it is dropped
    with (tmp_path / "records.jsonl").open("a") as fh:
        fh.write('{"key": "164.502(a)(1)(iv)#1", "node_id": "164.5')
    client, backend = scripted(answer)
    again = asyncio.run(
        run_annotation(Annotator(client, published.tree), tmp_path, leaves, tree_variant="ecfr")
    )
    asked = [node_of(messages)[0] for messages, _ in backend.calls]
    assert sorted(asked) == sorted(set(leaves) - set(finished))  # only the unfinished
    assert [r.node_id for r in again.records] == leaves and not again.failures()
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(leaves)  # none twice, none lost
    assert len(json.loads((tmp_path / "manifest.json").read_text())["sessions"]) == 2


def test_another_builds_folder_is_refused(published: KnowledgeBase, tmp_path: Path) -> None:
    client, _ = scripted(published_answers(published))
    asyncio.run(
        run_annotation(Annotator(client, published.tree), tmp_path, [NODE], tree_variant="ecfr")
    )
    other, _ = scripted(published_answers(published), model="another-model")
    with pytest.raises(BuildRunMismatch, match="another-model"):
        asyncio.run(
            run_annotation(Annotator(other, published.tree), tmp_path, [NODE], tree_variant="ecfr")
        )
    with pytest.raises(BuildRunMismatch, match="nodes"):
        asyncio.run(
            run_annotation(
                Annotator(client, published.tree),
                tmp_path,
                [NODE, f"{SUBTREE}(v)"],
                tree_variant="ecfr",
            )
        )
