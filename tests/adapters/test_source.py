"""The gated source under every adapter: in-process and over HTTP it answers like the
service, refuses bad tokens, unknown requesters and malformed arguments alike."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

from privacy_ci.adapters import (
    AuthError,
    Forbidden,
    GatedSource,
    HttpGatedSource,
    LocalGatedSource,
    ServiceError,
    ValidationFailed,
)
from privacy_ci.errors import PrivacyCIError
from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.service._limits import Rate
from privacy_ci.store import DocumentStore
from tests.adapters._gated import DOCTOR, KEY, UNKNOWN_ID, VOLATILE, Mode, token
from tests.service._serving import serving


def _stable(body: dict[str, object]) -> dict[str, object]:
    out = {k: v for k, v in body.items() if k not in VOLATILE}
    docs = out.get("documents")
    if isinstance(docs, list):
        out["documents"] = [{k: v for k, v in d.items() if k not in VOLATILE} for d in docs]
    return out


def test_in_process_and_http_answer_alike(riverside: DocumentStore) -> None:
    local = LocalGatedSource(riverside, KEY, DOCTOR)
    with (
        serving(create_app(riverside, ServiceSettings(jwt_key=KEY))) as url,
        HttpGatedSource(url, DOCTOR) as http,
    ):
        for query, k in [("lipid panel cholesterol", 5), ("Helen Marsh", 20), ("zzz", 3)]:
            a, b = local.retrieve(query, k), http.retrieve(query, k)
            assert _stable(a.as_dict()) == _stable(b.as_dict())
            assert a.body["withheld"] is None and b.body["withheld"] is None
        lipid = http.retrieve("lipid panel cholesterol", 5)
        assert lipid.doc_ids[0] == "RMC-LAB-003" and lipid.requester == "D01"
        first = lipid.documents[0]
        assert first.metadata["request_id"] == lipid.request_id
        assert {
            "doc_id",
            "title",
            "score",
            "label_version",
            "decision",
            "rule",
            "policy_version",
            "request_id",
            "requester",
            "role",
            "context",
        } <= set(first.metadata)
        assert first.content and "content" not in first.metadata
        for doc_id in ("RMC-LAB-003", "RMC-SAL-001", UNKNOWN_ID):
            a_dec, b_dec = local.decide(doc_id), http.decide(doc_id)
            assert {k: v for k, v in a_dec.items() if k != "request_id"} == {
                k: v for k, v in b_dec.items() if k != "request_id"
            }
    # both modes audit like the service: a scope record and one per candidate
    assert {r.action for r in riverside.audit.records()} == {"retrieve", "decide"}
    assert riverside.audit.verify().ok


OTHER_KEY = b"another-key-0123456789abcdef-0123456789abcdef"


BAD_TOKENS = [
    (issue_token(OTHER_KEY, "D01", "Doctor", "Medical"), AuthError, "signature"),
    ("not-a-jwt", AuthError, "not a well-formed JWT"),
    (token("D01", "Doctor", "Medical", ttl=60, now=int(time.time()) - 600), AuthError, "expired"),
    (token("GHOST", "Doctor", "Medical"), Forbidden, "unknown agent 'GHOST'"),
    (token("D01", "Nurse", "Medical"), Forbidden, "does not hold role 'Nurse'"),
    (token("D01", "Doctor", "Administrative"), Forbidden, "in context 'Medical'"),
]


def test_bad_tokens_and_requesters_are_refused(mode: Mode) -> None:
    for bearer, error, message in BAD_TOKENS:
        with pytest.raises(error, match=message):
            # in-process the source refuses when it is made; over HTTP at the first call
            mode.source(bearer).retrieve("lipid panel", 3)


MALFORMED: list[tuple[Callable[[GatedSource], object], str]] = [
    (lambda s: s.retrieve("", 3), "query: String should have at least 1 character"),
    (lambda s: s.retrieve("x" * 4001, 3), "query: String should have at most 4000"),
    (lambda s: s.retrieve("lipid", 0), "k: Input should be greater than or equal to 1"),
    (lambda s: s.retrieve("lipid", 101), "k: Input should be less than or equal to 100"),
    (lambda s: s.retrieve("lipid", "five"), "k: Input should be a valid integer"),  # type: ignore[arg-type]
    (lambda s: s.decide(""), "doc_id: String should have at least 1 character"),
    (lambda s: s.decide(7), "doc_id: Input should be a valid string"),  # type: ignore[arg-type]
]


def test_malformed_arguments_name_the_field(mode: Mode) -> None:
    source = mode.source()
    for call, message in MALFORMED:
        with pytest.raises(ValidationFailed) as info:
            call(source)
        assert message in str(info.value)


def test_the_requester_is_checked_against_the_store_at_every_call(mode: Mode) -> None:
    source = mode.source()
    assert source.retrieve("lipid panel", 3).doc_ids
    mode.store.put_agent("D01", "Dr. Helen Marsh", {"Doctor": "Administrative"}, "admin")
    with pytest.raises(Forbidden, match="holds role 'Doctor' in context 'Administrative'"):
        source.retrieve("lipid panel", 3)
    with pytest.raises(Forbidden):
        source.decide("RMC-LAB-003")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_errors_are_named(riverside: DocumentStore) -> None:
    with pytest.raises(PrivacyCIError, match="must start with http"):
        HttpGatedSource("127.0.0.1:8000", DOCTOR)
    with (
        HttpGatedSource(f"http://127.0.0.1:{_closed_port()}", DOCTOR, timeout=2) as nowhere,
        pytest.raises(PrivacyCIError, match="cannot reach the service"),
    ):
        nowhere.retrieve("lipid panel", 3)
    slow = ServiceSettings(jwt_key=KEY, decision_rate=Rate(per_s=0.001, burst=4.0))
    with serving(create_app(riverside, slow)) as url, HttpGatedSource(url, DOCTOR) as source:
        with pytest.raises(ServiceError, match="429") as info:
            source.retrieve("lipid panel", 10)  # costs k + 1 decisions
        assert info.value.status == 429
