"""What the adapter tests share: tokens, a requester's gated source in either mode,
and the service's leakage checks (tests/service) applied to what an adapter returns.

The attack set is the service's own: `LEAK_QUERIES` (words that fill the
unauthorized documents `_add_unauthorized_documents` adds) and `PROBE_QUERIES`
(what the requester may not see, and injections), from tests/service.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from privacy_ci.adapters import GatedSource, HttpGatedSource, LocalGatedSource
from privacy_ci.conductor import Corpus, Gate
from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.store import DocumentStore
from tests.service._serving import serving
from tests.service.test_hardening import LEAK_QUERIES, _add_unauthorized_documents
from tests.service.test_service import PROBE_QUERIES

__all__ = ["_add_unauthorized_documents"]

KEY = b"adapters-test-key-0123456789abcdef-0123456789"
QUERIES = [*LEAK_QUERIES, *PROBE_QUERIES]
VOLATILE = ("request_id",)  # differs between any two requests
UNKNOWN_ID = "RMC-NONE-999"


def token(agent: str, role: str, context: str, **kw: Any) -> str:
    return issue_token(KEY, agent, role, context, **kw)


DOCTOR = token("D01", "Doctor", "Medical")
FORGED = DOCTOR[:-4] + "AAAA"  # the doctor's token, its signature altered


@dataclass
class Mode:
    """One way of reaching the gate: in-process over the store, or the HTTP service."""

    name: str
    store: DocumentStore
    url: str | None = None

    def source(self, bearer: str = DOCTOR) -> GatedSource:
        if self.url is not None:
            return HttpGatedSource(self.url, bearer, timeout=20)
        return LocalGatedSource(self.store, KEY, bearer)


@pytest.fixture(params=["local", "http"])
def mode(request: pytest.FixtureRequest, riverside: DocumentStore) -> Iterator[Mode]:
    """The doctor's gate in-process, and through the real service on 127.0.0.1."""
    if request.param == "local":
        yield Mode("local", riverside)
        return
    with serving(create_app(riverside, ServiceSettings(jwt_key=KEY))) as url:
        yield Mode("http", riverside, url)


def permitted_ids(corpus: Corpus, gate: Gate, agent: str = "D01") -> set[str]:
    """What the gate permits `agent` on the packaged labels (the spec side)."""
    requester = corpus.requester(agent)
    return {lab.doc_id for lab in corpus.labels if gate.decide(requester, lab).permitted}


def stable(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An adapter's documents without the fields that differ between any two requests."""
    return [{k: v for k, v in d.items() if k not in VOLATILE} for d in docs]


def assert_no_leak(
    before: list[list[dict[str, Any]]],
    after: list[list[dict[str, Any]]],
    extra: list[str],
    permitted: set[str],
) -> None:
    """What an adapter returned for `QUERIES` before and after `extra` (25 approved
    documents the requester may not see, full of the queries' words) were added:
    the same documents, order, scores and metadata; none foreign; no count."""
    assert len(before) == len(after) == len(QUERIES)
    assert before == after
    seen = {d["doc_id"] for docs in after for d in docs}
    assert seen and seen <= permitted and not seen & set(extra)
    for docs in after:
        for d in docs:
            assert (d["decision"], d["rule"]) == ("permit", "permit")
            assert not [k for k in d if "withheld" in k or "count" in k], d


def assert_denial_reads_as_unknown(denied: dict[str, Any], unknown: dict[str, Any]) -> None:
    """A denied document and an id that does not exist: the same answer."""
    strip = ("request_id", "doc_id")
    assert (denied["decision"], denied["rule"]) == ("deny", "not_available")
    assert {k: v for k, v in denied.items() if k not in strip} == {
        k: v for k, v in unknown.items() if k not in strip
    }


def check_leakage(
    fetch: Callable[[str], list[dict[str, Any]]],
    decide: Callable[[str], dict[str, Any]],
    store: DocumentStore,
    corpus: Corpus,
    permitted: set[str],
) -> None:
    """The service's leakage tests through an adapter: what `fetch` returns for `QUERIES`
    (as flat documents) before and after 25 documents the requester may not see are
    added (`assert_no_leak`), and `decide` on one of them and on an unknown id
    (`assert_denial_reads_as_unknown`)."""
    before = [stable(fetch(q)) for q in QUERIES]
    extra = _add_unauthorized_documents(store, corpus, 25)
    after = [stable(fetch(q)) for q in QUERIES]
    assert_no_leak(before, after, extra, permitted)
    assert_denial_reads_as_unknown(decide(extra[0]), decide(UNKNOWN_ID))
