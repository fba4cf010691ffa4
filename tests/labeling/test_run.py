"""`run_labeling`: a resumable run folder (manifest.json, records.jsonl) that never
relabels a finished (document, draw) and survives a line cut short by a kill."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.conductor import Corpus
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling import (
    Labeler,
    LabelerPrompt,
    LabelingRun,
    LabelingRunMismatch,
    LabelRecord,
    ProposedLabel,
    analyze_run,
    load_labeling_run,
    run_labeling,
)
from privacy_ci.llm import LLMClient, LLMError

from . import authored_answers, authored_labeler, calls_per_doc, label_json, scripted

DOCS = ["RMC-LAB-001", "RMC-BIL-001", "RMC-MEM-001"]


def run(labeler: Labeler, out: Path, **kwargs: Any) -> LabelingRun:
    kwargs.setdefault("doc_ids", DOCS)
    kwargs.setdefault("draws", 2)
    return asyncio.run(run_labeling(labeler, out, **kwargs))


def lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def test_writes_a_manifest_and_one_record_per_document_and_draw(
    corpus: Corpus, tmp_path: Path
) -> None:
    labeler, backend = authored_labeler(corpus)
    seen: list[LabelRecord] = []
    result = run(labeler, tmp_path / "r", name="authored", on_record=seen.append)
    assert len(backend.calls) == 6 and len(seen) == 6
    records = lines(tmp_path / "r")
    assert sorted(r["key"] for r in records) == sorted(f"{d}#{n}" for d in DOCS for n in (1, 2))
    for r in records:
        assert r["label"] == ProposedLabel.of(corpus.label(r["doc_id"])).as_dict()
        assert r["failure"] is None and len(r["attempts"]) == 1
        assert r["backend"] == "scripted-test-double:scripted"
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    identity = manifest["identity"]
    assert manifest["name"] == "authored"
    assert identity["experiment"] == "conductor-labeling"
    assert identity["backend"] == "scripted-test-double:scripted"
    assert identity["draws"] == 2 and identity["documents"] == DOCS
    assert identity["parse_retries"] == 2
    assert identity["prompts"]["system"]["name"] == "labeler_system"
    assert identity["corpus"]["documents"] == 105
    (session,) = manifest["sessions"]
    assert session["labeled"] == 6 and session["usage"]["calls"] == 6
    assert session["started_at"] <= session["ended_at"]
    # what run_labeling returns is what the folder reads back as
    loaded = load_labeling_run(tmp_path / "r")
    assert result.records == loaded.records and len(loaded.records) == 6
    assert (loaded.name, loaded.backend, loaded.draws) == (
        "authored",
        "scripted-test-double:scripted",
        2,
    )
    assert loaded.missing(DOCS) == [] and loaded.failures() == []
    assert [(r.draw, r.doc_id) for r in loaded.records] == sorted(
        (n, d) for d in DOCS for n in (1, 2)
    )


def test_resume_labels_only_what_is_missing(corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "r"
    labeler, _ = authored_labeler(corpus)
    run(labeler, out)
    before = lines(out)
    kept, lost = before[:4], before[4:]
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    labeler2, backend2 = authored_labeler(corpus)
    result = run(labeler2, out)
    asked = sorted(f"{d}#{s.seed // 3 + 1}" for d, s in _calls(backend2))
    assert asked == sorted(r["key"] for r in lost)  # exactly the lost pairs, once each
    after = lines(out)
    assert after[:4] == kept and len(after) == 6  # finished lines untouched
    assert {r["key"] for r in after} == {r["key"] for r in before}
    assert len(result.records) == 6
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["labeled"] for s in manifest["sessions"]] == [6, 2]
    # a finished run resumed again asks nothing
    labeler3, backend3 = authored_labeler(corpus)
    run(labeler3, out)
    assert backend3.calls == [] and len(lines(out)) == 6


def _calls(backend: Any) -> list[tuple[str, Any]]:
    from . import doc_id_of

    return [(doc_id_of(m), s) for m, s in backend.calls]


def test_a_line_cut_short_by_a_kill_is_discarded_and_relabeled(
    corpus: Corpus, tmp_path: Path
) -> None:
    out = tmp_path / "r"
    labeler, _ = authored_labeler(corpus)
    run(labeler, out)
    raw = (out / "records.jsonl").read_bytes().splitlines(keepends=True)
    last = raw[-1]
    torn = b"".join(raw[:-1]) + last[: len(last) // 2]  # half a JSON line, no newline
    (out / "records.jsonl").write_bytes(torn)
    with pytest.raises(PrivacyCIError, match="unfinished"):
        analyze_run(load_labeling_run(out), corpus, allow_partial=False)
    labeler2, backend2 = authored_labeler(corpus)
    run(labeler2, out)
    lost = json.loads(last)
    assert calls_per_doc(backend2) == {lost["doc_id"]: 1}
    data = (out / "records.jsonl").read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 6
    assert sorted(r["key"] for r in lines(out)) == sorted(json.loads(x)["key"] for x in raw)


def test_a_damaged_line_before_the_last_is_an_error(corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "r"
    labeler, _ = authored_labeler(corpus)
    run(labeler, out)
    raw = (out / "records.jsonl").read_text().splitlines(keepends=True)
    (out / "records.jsonl").write_text(raw[0] + "{not json\n" + "".join(raw[1:]))
    with pytest.raises(PrivacyCIError, match="line 2 is not a run record"):
        load_labeling_run(out)


@pytest.mark.parametrize(
    "change",
    ["draws", "model", "documents", "system prompt", "parse retries"],
)
def test_a_folder_with_another_identity_is_refused(
    change: str, corpus: Corpus, tmp_path: Path
) -> None:
    out = tmp_path / "r"
    labeler, _ = authored_labeler(corpus)
    run(labeler, out)
    kwargs: dict[str, Any] = {}
    if change == "model":
        other, backend = authored_labeler(corpus, model="another-model")
    else:
        client, backend = scripted(authored_answers(corpus))
        other = Labeler(
            client,
            corpus,
            system_prompt=LabelerPrompt("mine", "Label it.") if change == "system prompt" else None,
            parse_retries=1 if change == "parse retries" else 2,
        )
    if change == "draws":
        kwargs["draws"] = 3
    if change == "documents":
        kwargs["doc_ids"] = DOCS[:2]
    with pytest.raises(LabelingRunMismatch, match="holds another labeling run") as info:
        run(other, out, **kwargs)
    assert "use a new folder" in str(info.value)
    assert backend.calls == []  # refused before any call
    assert len(lines(out)) == 6


def test_the_mismatch_names_what_differs(corpus: Corpus, tmp_path: Path) -> None:
    labeler, _ = authored_labeler(corpus)
    run(labeler, tmp_path / "r")
    other, _ = authored_labeler(corpus, model="another-model")
    with pytest.raises(LabelingRunMismatch, match="model: 'scripted' there, 'another-model' now"):
        run(other, tmp_path / "r")


def test_retry_failures_relabels_only_the_failed(corpus: Corpus, tmp_path: Path) -> None:
    out = tmp_path / "r"
    flaky = "RMC-BIL-001"

    def first(doc_id: str) -> str | LLMError:
        if doc_id == flaky:
            return "I cannot label this document."
        return label_json(corpus.label(doc_id))

    client, backend = scripted(first)
    result = run(Labeler(client, corpus), out)
    assert calls_per_doc(backend) == {"RMC-LAB-001": 2, flaky: 6, "RMC-MEM-001": 2}
    assert [(r.doc_id, r.draw) for r in result.failures()] == [(flaky, 1), (flaky, 2)]
    failed = next(r for r in result.records if not r.ok)
    assert failed.failure and "not JSON" in failed.failure
    assert [a["text"] for a in failed.attempts] == ["I cannot label this document."] * 3
    # resumed without --retry-failures: nothing to do, failures stay failures
    labeler2, backend2 = authored_labeler(corpus)
    assert len(run(labeler2, out).failures()) == 2 and backend2.calls == []
    # with it: exactly the two failed pairs are asked again
    labeler3, backend3 = authored_labeler(corpus)
    again = run(labeler3, out, retry_failures=True)
    assert calls_per_doc(backend3) == {flaky: 2}
    assert again.failures() == [] and len(again.records) == 6
    assert {r.doc_id: r.proposed for r in again.records if r.draw == 1}[flaky] == (
        ProposedLabel.of(corpus.label(flaky))
    )
    assert len(lines(out)) == 8  # the failures stay on file; the relabeling wins
    # and once nothing failed, retrying asks nothing
    labeler4, backend4 = authored_labeler(corpus)
    run(labeler4, out, retry_failures=True)
    assert backend4.calls == []


def test_bad_arguments_fail_before_any_call(corpus: Corpus, tmp_path: Path) -> None:
    labeler, backend = authored_labeler(corpus)
    with pytest.raises(PrivacyCIError, match="unknown document 'RMC-NOPE-001'"):
        run(labeler, tmp_path / "a", doc_ids=["RMC-LAB-001", "RMC-NOPE-001"])
    with pytest.raises(ValueError, match="draws"):
        run(labeler, tmp_path / "b", draws=0)
    with pytest.raises(ValueError, match="concurrency"):
        run(labeler, tmp_path / "c", concurrency=0)
    assert backend.calls == []
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_a_folder_without_a_manifest_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(PrivacyCIError, match="not a labeling run"):
        load_labeling_run(tmp_path)
    (tmp_path / "manifest.json").write_text('{"identity": {"experiment": "eval"}}')
    with pytest.raises(PrivacyCIError, match="not a labeling run's"):
        load_labeling_run(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(PrivacyCIError, match="not JSON"):
        load_labeling_run(tmp_path)


@pytest.mark.slow
def test_a_full_run_of_the_authored_labels_reproduces_the_policy(
    corpus: Corpus, tmp_path: Path
) -> None:
    labeler, backend = authored_labeler(corpus)
    result = run(labeler, tmp_path / "r", doc_ids=None, draws=2, concurrency=16)
    assert len(backend.calls) == 210 and len(result.records) == 210
    assert result.missing(corpus.labels.ids) == []
    report = analyze_run(result, corpus)
    c = report.conformance
    assert (c.documents, c.failures) == (105, 0)
    assert (c.privacy_violations, c.over_blocks) == (0, 0)
    assert c.tier_rate == c.acl_rate == 1.0
    assert (c.roles_added, c.roles_omitted, c.over_under) == (0, 0, None)
    assert c.permits == report.authored_permits == 259
    assert (report.flows, report.authored_denies) == (2520, 2261)
    assert report.test_double is True
    assert report.backend == "scripted-test-double:scripted"
    s = report.stability
    assert s is not None
    assert (s.tier_unanimous, s.acl_unanimous, s.all_unanimous) == (105, 105, 105)
    assert (s.unstable_flows, s.unstable_denied) == (0, 0)
    assert report.ensemble is not None and report.ensemble.permits == 259
    assert report.attribution == {"privacy_violations": {}, "over_blocks": {}}
    assert report.inert_field["decisions_changed"] == 0


def test_a_document_listed_twice_is_labeled_once_per_draw(corpus: Corpus, tmp_path: Path) -> None:
    labeler, backend = authored_labeler(corpus)
    result = run(labeler, tmp_path / "r", doc_ids=["RMC-LAB-001", "RMC-PUB-001", "RMC-LAB-001"])
    assert calls_per_doc(backend) == {"RMC-LAB-001": 2, "RMC-PUB-001": 2}
    keys = [r["key"] for r in lines(tmp_path / "r")]
    assert len(keys) == len(set(keys)) == 4 and len(result.records) == 4
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["identity"]["documents"] == ["RMC-LAB-001", "RMC-PUB-001"]


def test_retry_failures_asks_the_model_again_despite_the_cache(
    corpus: Corpus, tmp_path: Path
) -> None:
    """A cached failed answer is not replayed: the retried draw reaches the model."""
    from privacy_ci.llm import ResponseCache
    from privacy_ci.llm.testing import ScriptedTestBackend

    from . import by_document

    out, cache_path = tmp_path / "r", tmp_path / "cache.sqlite"
    flaky = "RMC-BIL-001"
    state = {"broken": True}

    def answer(doc_id: str) -> str:
        if doc_id == flaky and state["broken"]:
            return "not a label"
        return label_json(corpus.label(doc_id))

    def labeler() -> tuple[Labeler, ScriptedTestBackend]:
        backend = ScriptedTestBackend(by_document(answer))
        client = LLMClient(backend, cache=ResponseCache(cache_path))
        return Labeler(client, corpus), backend

    first, _ = labeler()
    assert len(run(first, out, draws=1).failures()) == 1
    state["broken"] = False
    second, backend = labeler()
    again = run(second, out, draws=1, retry_failures=True)
    assert calls_per_doc(backend) == {flaky: 1}
    assert again.failures() == []
