"""Regression tests of the service's hardening (issue 11): each class of attack or
careless input that once got through, on SQLite and PostgreSQL.

1. authority without a stored agent; 2. context not bound to the store; 3. existence
and count leaks; 4. unbounded model work; 5. bodies read before authentication;
6. audit amplification by batches; 11. token lifetime and path-free 5xx;
13. token edge cases (expiry on a cache hit, missing or null ``exp``).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jwt
import pytest
from fastapi.testclient import TestClient

from privacy_ci.conductor import Corpus, Gate
from privacy_ci.llm import Completion, GenerationSettings, LLMClient, Message
from privacy_ci.llm.testing import TEST_DOUBLE_PROVIDER, ScriptedTestBackend
from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.service._auth import AuthError, TokenCache
from privacy_ci.service._limits import Rate
from privacy_ci.store import DocumentStore, batch_decisions
from tests.service._serving import serving, wait_for
from tests.store.backends import drop_audit_guards

KEY = b"hardening-test-key-0123456789abcdef-0123456789"


def _auth(agent: str, role: str, context: str, **kw: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(KEY, agent, role, context, **kw)}"}


DOCTOR = _auth("D01", "Doctor", "Medical")
NURSE = _auth("N01", "Nurse", "Medical")
AUTHORITY = _auth("PA1", "Policy Authority", "Administrative", authority=True)


def _client(store: DocumentStore, **settings: Any) -> TestClient:
    return TestClient(create_app(store, ServiceSettings(jwt_key=KEY, **settings)))


# -- 1. authority without an agent ---------------------------------------------------------
def test_a_signed_token_for_no_stored_agent_gets_nothing(riverside: DocumentStore) -> None:
    ghost = _auth("GHOST", "Policy Authority", "Administrative", authority=True)
    before = len(riverside.history())
    with _client(riverside) as c:
        calls = [
            ("GET", "/v1/labels", None),
            ("GET", "/v1/status", None),
            ("POST", "/v1/labels/RMC-LAB-003/revoke", {"note": "x"}),
            ("POST", "/v1/labels/RMC-LAB-003/approve", None),
            ("POST", "/v1/decide", {"doc_id": "RMC-LAB-003"}),
            ("POST", "/v1/decide/batch", {"doc_ids": ["RMC-LAB-003"]}),
            ("POST", "/v1/retrieve", {"query": "lipid"}),
            ("POST", "/v1/ask", {"question": "lipid?"}),
            ("POST", "/v1/judge", {"event": "A clinic sends a record.", "method": "dp"}),
        ]
        for method, path, body in calls:
            r = c.request(method, path, json=body, headers=ghost)
            assert r.status_code == 403, (path, r.text)
            assert "unknown agent 'GHOST'" in r.json()["error"]
    assert len(riverside.history()) == before  # nothing was revoked or approved
    assert riverside.label("RMC-LAB-003").state.value == "approved"


def test_label_administration_needs_the_stored_policy_authority_role(
    riverside: DocumentStore,
) -> None:
    with _client(riverside) as c:
        # a real agent with the authority claim, acting in its own (non-authority) role
        doctor_claiming = _auth("D01", "Doctor", "Medical", authority=True)
        r = c.post("/v1/labels/RMC-LAB-003/revoke", headers=doctor_claiming)
        assert r.status_code == 403 and "'Policy Authority'" in r.json()["error"]
        # claiming a role the store does not give the agent
        r = c.get("/v1/labels", headers=_auth("D01", "Policy Authority", "Administrative"))
        assert r.status_code == 403 and "does not hold role 'Policy Authority'" in r.text
        # the stored authority, but a token minted without the claim
        r = c.get("/v1/labels", headers=_auth("PA1", "Policy Authority", "Administrative"))
        assert r.status_code == 403 and "authority: true" in r.json()["error"]
        # the stored authority in another context than the store records
        r = c.get("/v1/labels", headers=_auth("PA1", "Policy Authority", "Medical", authority=True))
        assert r.status_code == 403 and "in context 'Administrative'" in r.json()["error"]
        r = c.post("/v1/labels/RMC-LAB-003/revoke", headers=AUTHORITY)
        assert r.status_code == 200 and r.json()["updated_by"] == "PA1"
        # the authority administers labels; it receives no document
        r = c.post("/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=AUTHORITY)
        assert r.json()["decision"] == "deny"
    assert riverside.history("RMC-LAB-003")[-1].actor == "PA1"


# -- 2. context bound to the store ---------------------------------------------------------
def test_a_role_moved_to_another_context_invalidates_old_tokens(
    riverside: DocumentStore,
) -> None:
    old = _auth("D01", "Doctor", "Medical")
    with _client(riverside) as c:
        assert c.post("/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=old).json()[
            "decision"
        ] == ("permit")
        riverside.put_agent("D01", "Dr. Helen Marsh", {"Doctor": "Administrative"}, "admin")
        for path, body in [
            ("/v1/decide", {"doc_id": "RMC-LAB-001"}),
            ("/v1/retrieve", {"query": "lipid panel", "k": 5}),
        ]:
            r = c.post(path, json=body, headers=old)
            assert r.status_code == 403, r.text
            assert "holds role 'Doctor' in context 'Administrative'" in r.json()["error"]
        # a token for the context the store now records is accepted, and the gate
        # then finds the role not authoritative there: nothing is retrieved
        new = _auth("D01", "Doctor", "Administrative")
        r = c.post("/v1/retrieve", json={"query": "lipid panel", "k": 5}, headers=new)
        assert r.status_code == 200 and r.json()["documents"] == []
        assert riverside.audit.records()[-1].context == "Administrative"


# -- 3. existence and count leaks ----------------------------------------------------------
def _without_ids(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("request_id", "store_version")}


def _add_unauthorized_documents(store: DocumentStore, corpus: Corpus, n: int) -> list[str]:
    """n approved HR documents the doctor may not receive, full of the query's words."""
    base = corpus.label("RMC-SAL-001").model_dump(mode="json")
    ids = []
    for i in range(n):
        doc_id = f"RMC-XTRA-{i:03d}"
        store.propose_label({**base, "doc_id": doc_id, "title": f"Lipid panel memo {i}"}, "t")
        store.approve_label(doc_id, "t")
        store.put_document(doc_id, "lipid panel cholesterol results " * (i + 1), "t")
        ids.append(doc_id)
    return ids


# queries whose words fill the unauthorized documents (also run through tests/adapters)
LEAK_QUERIES = ["lipid panel cholesterol", "salary letter", "results", "Helen Marsh"]


def test_responses_do_not_depend_on_unauthorized_documents(
    riverside: DocumentStore, corpus: Corpus
) -> None:
    queries = LEAK_QUERIES
    with _client(riverside) as c:
        before = [
            c.post("/v1/retrieve", json={"query": q, "k": 10}, headers=DOCTOR).json()
            for q in queries
        ]
        ask_before = c.post("/v1/ask", json={"question": "lipid panel"}, headers=PA_FREE).json()
        extra = _add_unauthorized_documents(riverside, corpus, 25)
        after = [
            c.post("/v1/retrieve", json={"query": q, "k": 10}, headers=DOCTOR).json()
            for q in queries
        ]
        ask_after = c.post("/v1/ask", json={"question": "lipid panel"}, headers=PA_FREE).json()
        assert [_without_ids(b) for b in before] == [_without_ids(b) for b in after]
        assert all(b["withheld"] is None for b in after)
        assert _without_ids(ask_before) == _without_ids(ask_after)
        # an unknown id and a denied id: the same status and the same answer
        denied = c.post("/v1/decide", json={"doc_id": extra[0]}, headers=DOCTOR)
        unknown = c.post("/v1/decide", json={"doc_id": "RMC-NONE-999"}, headers=DOCTOR)
        assert denied.status_code == unknown.status_code == 200
        strip = ("request_id", "doc_id")
        assert {k: v for k, v in denied.json().items() if k not in strip} == {
            k: v for k, v in unknown.json().items() if k not in strip
        }
        batch = c.post(
            "/v1/decide/batch", json={"doc_ids": [extra[1], "RMC-NONE-1"]}, headers=DOCTOR
        ).json()
        d_denied, d_unknown = batch["decisions"]
        assert {k: v for k, v in d_denied.items() if k != "doc_id"} == {
            k: v for k, v in d_unknown.items() if k != "doc_id"
        }
        assert batch["permitted"] == []
    # the authority still sees what happened, in the audit log
    rules = [r for r in riverside.audit.records() if r.action == "decide"]
    assert {r.doc_id: r.rule for r in rules} == {
        extra[0]: "role_not_permitted",
        "RMC-NONE-999": "invalid_label",
    }


# the Policy Authority's agent acts in no requester role: nothing is admitted, so the
# assistant answers without a model call, and the answer shape can be compared
PA_FREE = _auth("PA2", "Policy Authority", "Administrative")


def test_invalid_label_errors_and_health_reveal_nothing(riverside: DocumentStore) -> None:
    # an approved label whose stored body no longer validates (an unknown role in its ACL),
    # written outside the store (no history row): a process that builds its index after it
    # sees it, as a restarted service would
    riverside.db.execute(
        "UPDATE labels SET in_force = replace(in_force, '\"Doctor\"', '\"Doctor-Secret-ACL\"'),"
        " body = replace(body, '\"Doctor\"', '\"Doctor-Secret-ACL\"') WHERE doc_id = ?",
        ("RMC-LAB-001",),
    )
    riverside.db.execute("UPDATE store_version SET version = version + 1 WHERE id = 1")
    riverside = DocumentStore(riverside.url)
    with _client(riverside) as c:
        r = c.post("/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=DOCTOR).json()
        assert (r["decision"], r["rule"], r["errors"]) == ("deny", "not_available", [])
        assert "Secret" not in str(r)
        health = c.get("/v1/health")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        status = c.get("/v1/status", headers=AUTHORITY).json()
        assert status["documents"] == 105
    with _client(riverside, explain_denials=True) as c:
        r = c.post("/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=DOCTOR).json()
        assert r["rule"] == "invalid_label" and "Doctor-Secret-ACL" in str(r["errors"])


def test_explaining_the_model_needs_explaining_denials() -> None:
    from privacy_ci.assistant import DenialMode
    from privacy_ci.errors import PrivacyCIError

    with pytest.raises(PrivacyCIError, match="explain_denials"):
        ServiceSettings(jwt_key=KEY, denial_mode=DenialMode.EXPLAIN)
    ServiceSettings(jwt_key=KEY, denial_mode=DenialMode.EXPLAIN, explain_denials=True)


# -- 4. bounded model work -----------------------------------------------------------------
class GatedBackend:
    """A test double that answers only when released, and counts cancellations."""

    provider = TEST_DOUBLE_PROVIDER
    model = "gated"
    base_url = "gated://"

    def __init__(self, answer: str = "Choice: B. Permitted") -> None:
        self.release = threading.Event()
        self.inner = ScriptedTestBackend([answer], cycle=True)
        self.started = 0
        self.cancelled = 0
        self.finished = 0

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        self.started += 1
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.finished += 1
        return await self.inner.complete(messages, settings)

    async def aclose(self) -> None:
        return None


JUDGE = {"event": "A hospital sends a patient's lab results to her physician.", "method": "dp"}


def test_model_endpoints_queue_boundedly_and_cheap_endpoints_stay_fast(
    riverside: DocumentStore,
) -> None:
    backend = GatedBackend()
    settings = ServiceSettings(
        jwt_key=KEY,
        llm_client=LLMClient(backend, concurrency=8),
        model_slots=1,
        model_queue=1,
        model_rate=Rate(per_s=100, burst=100),
    )
    app = create_app(riverside, settings)
    with serving(app) as url, ThreadPoolExecutor(4) as pool:
        http = httpx.Client(base_url=url, timeout=30)
        first = pool.submit(http.post, "/v1/judge", json=JUDGE, headers=DOCTOR)
        wait_for(lambda: backend.started == 1, "the first judge to start")
        second = pool.submit(http.post, "/v1/judge", json=JUDGE, headers=NURSE)
        wait_for(lambda: app.state.pools["/v1/judge"].admitted == 2, "the second to queue")
        third = http.post("/v1/judge", json=JUDGE, headers=DOCTOR)
        assert third.status_code == 503 and int(third.headers["retry-after"]) >= 1
        assert "busy" in third.json()["error"]
        # the gate's endpoints answer while every model slot and queue place is taken
        quick = httpx.Client(base_url=url, timeout=5)
        for _ in range(20):
            r = quick.post("/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=DOCTOR)
            assert r.status_code == 200
        r = quick.post("/v1/retrieve", json={"query": "lipid", "k": 3}, headers=DOCTOR)
        assert r.status_code == 200 and r.json()["documents"]
        assert backend.finished == 0  # the model work was still held all along
        backend.release.set()
        assert first.result().status_code == 200 and second.result().status_code == 200
        assert first.result().json()["verdict"] == "permit"
        assert backend.started == 2  # the refused request never reached the model


def test_per_requester_model_rate_limit(riverside: DocumentStore) -> None:
    settings = ServiceSettings(
        jwt_key=KEY,
        llm_client=LLMClient(ScriptedTestBackend(["Choice: B. Permitted"], cycle=True)),
        model_rate=Rate(per_s=0.01, burst=2),
    )
    with TestClient(create_app(riverside, settings)) as c:
        assert [c.post("/v1/judge", json=JUDGE, headers=DOCTOR).status_code for _ in range(2)] == [
            200,
            200,
        ]
        r = c.post("/v1/judge", json=JUDGE, headers=DOCTOR)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 90
        assert c.post("/v1/ask", json={"question": "x"}, headers=DOCTOR).status_code == 429
        # other requesters keep their own budget
        assert c.post("/v1/judge", json=JUDGE, headers=NURSE).status_code == 200


def test_a_dropped_request_is_cancelled_and_frees_its_slot(riverside: DocumentStore) -> None:
    backend = GatedBackend()
    settings = ServiceSettings(
        jwt_key=KEY,
        llm_client=LLMClient(backend),
        model_slots=1,
        model_queue=0,
        model_rate=Rate(per_s=100, burst=100),
    )
    app = create_app(riverside, settings)
    with serving(app) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/v1/judge", json=JUDGE, headers=DOCTOR, timeout=0.5)
        wait_for(lambda: backend.cancelled == 1, "the abandoned job to be cancelled")
        wait_for(lambda: app.state.pools["/v1/judge"].admitted == 0, "its slot to free")
        backend.release.set()
        r = httpx.post(f"{url}/v1/judge", json=JUDGE, headers=DOCTOR, timeout=10)
        assert r.status_code == 200 and backend.finished == 1


def test_a_model_past_its_deadline_is_stopped(riverside: DocumentStore) -> None:
    backend = GatedBackend()
    settings = ServiceSettings(jwt_key=KEY, llm_client=LLMClient(backend), model_timeout_s=0.3)
    with TestClient(create_app(riverside, settings)) as c:
        r = c.post("/v1/judge", json=JUDGE, headers=DOCTOR)
        assert r.status_code == 504 and "0.3 s" in r.json()["error"]
        r = c.post("/v1/ask", json={"question": "lipid panel"}, headers=DOCTOR)
        assert r.status_code == 504
    assert backend.cancelled == 2 and backend.finished == 0


def test_an_event_over_the_limit_never_reaches_the_model(riverside: DocumentStore) -> None:
    backend = ScriptedTestBackend(["Choice: B. Permitted"], cycle=True)
    settings = ServiceSettings(jwt_key=KEY, llm_client=LLMClient(backend), max_event_chars=500)
    with TestClient(create_app(riverside, settings)) as c:
        r = c.post("/v1/judge", json={**JUDGE, "event": "x" * 501}, headers=DOCTOR)
        assert r.status_code == 413 and "at most 500" in r.json()["error"]
        assert backend.calls == []
        r = c.post("/v1/judge", json={**JUDGE, "event": "x" * 500}, headers=DOCTOR)
        assert r.status_code == 200


class OverflowingBackend(GatedBackend):
    """A model whose context every prompt overflows."""

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        from privacy_ci.llm import ContextOverflowError

        self.started += 1
        raise ContextOverflowError(9000, 8192, "tiny-model")


def test_an_input_over_the_models_context_is_413(riverside: DocumentStore) -> None:
    backend = OverflowingBackend()
    settings = ServiceSettings(jwt_key=KEY, llm_client=LLMClient(backend))
    with TestClient(create_app(riverside, settings)) as c:
        r = c.post("/v1/judge", json=JUDGE, headers=DOCTOR)
        assert r.status_code == 413 and "8,192 tokens" in r.json()["error"]
        r = c.post("/v1/ask", json={"question": "lipid panel"}, headers=DOCTOR)
        assert r.status_code == 413 and "does not fit the model" in r.json()["error"]
    assert backend.started == 2


def test_the_assistants_prompt_is_bounded_whatever_k(riverside: DocumentStore) -> None:
    backend = ScriptedTestBackend(["According to [RMC-LAB-003], fine."], cycle=True)
    settings = ServiceSettings(jwt_key=KEY, llm_client=LLMClient(backend), max_context_chars=3000)
    with TestClient(create_app(riverside, settings)) as c:
        r = c.post("/v1/ask", json={"question": "patient results", "k": 20}, headers=DOCTOR)
        assert r.status_code == 200 and len(r.json()["documents"]) > 3
    prompt = backend.calls[0][0][-1].content
    body = prompt.split("Documents:", 1)[1].split("Question:", 1)[0]
    headers = sum(len(line) + 1 for line in body.splitlines() if line.startswith("[RMC-"))
    assert len(body) - headers <= 3000 + 40 * 20  # documents' text plus truncation marks


# -- 5. bodies bounded and authenticated before they are read -----------------------------
def _raw_request(url: str, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send a raw HTTP/1.1 request; return the status and the response bytes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(head.encode("latin-1") + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        # read the rest of the (small) error body
        s.settimeout(2)
        try:
            while chunk := s.recv(65536):
                data += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return int(data.split(b" ", 2)[1]), data


def test_huge_bodies_are_refused_before_they_are_read(riverside: DocumentStore) -> None:
    app = create_app(riverside, ServiceSettings(jwt_key=KEY, max_body_bytes=64 * 1024))
    token = DOCTOR["Authorization"]
    with serving(app) as url:
        # 200 MB announced, not one byte sent: an answer proves nothing was waited for
        status, data = _raw_request(
            url,
            "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 200000000\r\n",
        )
        assert status == 401 and b"missing bearer token" in data
        status, data = _raw_request(
            url,
            "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: {token}\r\nContent-Length: 200000000\r\n",
        )
        assert status == 413 and b"at most 65,536 bytes" in data
        # a chunked body is read only up to the limit
        chunk = b"x" * 16384
        chunks = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * 8
        status, data = _raw_request(
            url,
            "POST /v1/decide/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Authorization: {token}\r\nTransfer-Encoding: chunked\r\n",
            chunks,
        )
        assert status == 413
        # a forged token with a huge body: 401, body unread
        status, _ = _raw_request(
            url,
            "POST /v1/judge HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a.b.c\r\n"
            "Content-Length: 50000000\r\n",
        )
        assert status == 401
        ok = httpx.post(
            f"{url}/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=DOCTOR, timeout=10
        )
        assert ok.status_code == 200


def test_bad_content_length_is_a_400(riverside: DocumentStore) -> None:
    with _client(riverside) as c:
        r = c.post(
            "/v1/decide",
            content=b'{"doc_id": "RMC-LAB-001"}',
            headers={**DOCTOR, "Content-Type": "application/json", "Content-Length": "ten"},
        )
        assert r.status_code == 400


# -- 6. audit amplification ---------------------------------------------------------------
def test_a_batch_is_deduplicated_and_audited_as_one_record(riverside: DocumentStore) -> None:
    with _client(riverside) as c:
        ids = ["RMC-LAB-001"] * 997 + ["RMC-LAB-002", "RMC-SAL-001", "RMC-NOPE"]
        r = c.post("/v1/decide/batch", json={"doc_ids": ids}, headers=NURSE)
        assert r.status_code == 200
        assert [d["doc_id"] for d in r.json()["decisions"]] == [
            "RMC-LAB-001",
            "RMC-LAB-002",
            "RMC-SAL-001",
            "RMC-NOPE",
        ]
    records = riverside.audit.records()
    assert len(records) == 1 and records[0].decision == "batch"
    assert batch_decisions(records[0].detail) == [
        {"doc_id": "RMC-LAB-001", "decision": "permit", "rule": "permit", "label_version": 2},
        {
            "doc_id": "RMC-LAB-002",
            "decision": "deny",
            "rule": "assignment_required",
            "label_version": 2,
        },
        {
            "doc_id": "RMC-SAL-001",
            "decision": "deny",
            "rule": "role_not_permitted",
            "label_version": 2,
        },
        {"doc_id": "RMC-NOPE", "decision": "deny", "rule": "invalid_label", "label_version": None},
    ]
    assert riverside.audit.verify().ok
    # every decision in the batch is under the record's hash: rewriting one is caught
    drop_audit_guards(riverside)
    riverside.db.execute(
        "UPDATE audit SET detail = replace(detail, 'assignment_required', 'permit') WHERE seq = 1"
    )
    report = riverside.audit.verify()
    assert not report.ok and report.first_bad_seq == 1


def test_audited_decisions_are_rate_limited_per_requester(riverside: DocumentStore) -> None:
    with _client(riverside, decision_rate=Rate(per_s=1, burst=50)) as c:
        many = [f"RMC-LAB-{i:03d}" for i in range(1, 41)]
        assert c.post("/v1/decide/batch", json={"doc_ids": many}, headers=NURSE).status_code == 200
        r = c.post("/v1/decide/batch", json={"doc_ids": many}, headers=NURSE)
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 30
        too_big = [f"X-{i}" for i in range(60)]
        r = c.post("/v1/decide/batch", json={"doc_ids": too_big}, headers=DOCTOR)
        assert r.status_code == 429 and "split it" in r.json()["error"]
        # another requester is not slowed down by the first
        assert c.post("/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=DOCTOR).status_code == (
            200
        )
    # the refused requests wrote nothing
    assert len(riverside.audit.records()) == 2


# -- 11. token lifetime, path-free errors ---------------------------------------------------
def test_long_lived_tokens_are_refused(riverside: DocumentStore) -> None:
    now = int(time.time())
    claims = {"sub": "D01", "role": "Doctor", "context": "Medical", "iat": now}
    day_and_a_bit = jwt.encode({**claims, "exp": now + 86_401}, KEY, algorithm="HS256")
    with _client(riverside) as c:
        r = c.post(
            "/v1/decide",
            json={"doc_id": "RMC-LAB-001"},
            headers={"Authorization": f"Bearer {day_and_a_bit}"},
        )
        assert r.status_code == 401 and "at most 86400 s" in r.json()["error"]
    with _client(riverside, max_token_lifetime_s=600) as c:
        hour = {"Authorization": f"Bearer {issue_token(KEY, 'D01', 'Doctor', 'Medical')}"}
        assert c.post("/v1/decide", json={"doc_id": "X"}, headers=hour).status_code == 401
    from privacy_ci.errors import PrivacyCIError

    with pytest.raises(PrivacyCIError, match="between 1 and 86400"):
        issue_token(KEY, "D01", "Doctor", "Medical", ttl=86_401)


def test_a_missing_data_directory_is_a_503_naming_no_path(
    riverside: DocumentStore, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "secret-server-layout" / "data"
    empty.mkdir(parents=True)
    monkeypatch.setenv("PRIVACY_CI_DATA", str(empty))
    settings = ServiceSettings(
        jwt_key=KEY, llm_client=LLMClient(ScriptedTestBackend(["Choice: A"], cycle=True))
    )
    with TestClient(create_app(riverside, settings)) as c:
        r = c.post("/v1/judge", json={**JUDGE, "method": "bm25-content"}, headers=DOCTOR)
    assert r.status_code == 503
    assert "regulation data is not installed" in r.json()["error"]
    assert "/" not in r.json()["error"] and "secret" not in r.text


# -- 13. token edge cases -------------------------------------------------------------------
def test_a_cached_token_is_refused_once_it_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = TokenCache(KEY)
    now = time.time()
    token = issue_token(KEY, "D01", "Doctor", "Medical", ttl=60, now=int(now))
    assert cache.verify(token).sub == "D01"
    assert cache.verify(token).sub == "D01"  # a cache hit
    monkeypatch.setattr(time, "time", lambda: now + 3600)
    with pytest.raises(AuthError, match="expired"):
        cache.verify(token)


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({}, "lacks the 'exp' claim"),
        ({"exp": None}, "lacks the 'exp' claim"),
        ({"exp": "tomorrow"}, "(exp) must be an integer"),
        ({"exp": True}, "expired"),  # PyJWT reads true as 1 (1970)
    ],
    ids=["no-exp", "null-exp", "text-exp", "bool-exp"],
)
def test_signed_tokens_with_a_bad_exp_are_401_not_500(
    riverside: DocumentStore, claims: dict[str, Any], message: str
) -> None:
    now = int(time.time())
    token = jwt.encode(
        {"sub": "D01", "role": "Doctor", "context": "Medical", "iat": now, **claims},
        KEY,
        algorithm="HS256",
    )
    with _client(riverside) as c:
        r = c.post(
            "/v1/decide",
            json={"doc_id": "RMC-LAB-001"},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert r.status_code == 401 and message in r.json()["error"]


def test_gate_decisions_over_http_match_the_gate(
    riverside: DocumentStore, corpus: Corpus, gate: Gate
) -> None:
    """What a permitted requester sees is exactly the gate's answer (no over-hiding)."""
    with _client(riverside) as c:
        for agent in corpus.agents[:6]:
            headers = _auth(agent.id, agent.role, agent.context)
            requester = corpus.requester(agent.id)
            body = c.post(
                "/v1/decide/batch", json={"doc_ids": corpus.labels.ids}, headers=headers
            ).json()
            expected = [
                lab.doc_id for lab in corpus.labels if gate.decide(requester, lab).permitted
            ]
            assert body["permitted"] == expected


SLOW_PATHS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "retrieve_for": ("/v1/retrieve", {"query": "lab results", "k": 3}),
    "decide_for": ("/v1/decide", {"doc_id": "RMC-LAB-002"}),
    "decide_batch_for": ("/v1/decide/batch", {"doc_ids": ["RMC-LAB-001", "RMC-LAB-002"]}),
    "snapshot": ("/v1/decide", {"doc_id": "RMC-LAB-002"}),
    "pending_reviews": ("/review", None),  # the authority's page (a GET)
}
_STORE_METHODS = ("snapshot", "pending_reviews")


@pytest.mark.parametrize("held_name", sorted(SLOW_PATHS))
def test_a_slow_request_does_not_stall_the_other_requests(
    riverside: DocumentStore, monkeypatch: pytest.MonkeyPatch, held_name: str
) -> None:
    """Store work runs off the event loop (issue 15): while one request's retrieval,
    decision, batch, index refresh or review queue is held, health checks and gate
    decisions still answer at once."""
    from privacy_ci.service import _app

    release = threading.Event()
    entered = threading.Event()
    owner: Any = riverside if held_name in _STORE_METHODS else _app
    real = getattr(owner, held_name)

    def held(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():  # only the first call waits: later requests pass
            entered.set()
            assert release.wait(20), "the test never released the held call"
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, held_name, held)
    path, body = SLOW_PATHS[held_name]
    app = create_app(riverside, ServiceSettings(jwt_key=KEY))
    with serving(app) as url, ThreadPoolExecutor(2) as pool:
        http = httpx.Client(base_url=url, timeout=30)
        if body is None:
            authority = issue_token(
                KEY, "PA1", "Policy Authority", "Administrative", authority=True
            )
            bearer = {"Authorization": f"Bearer {authority}"}
            slow = pool.submit(http.get, path, headers=bearer)
        else:
            slow = pool.submit(http.post, path, json=body, headers=DOCTOR)
        assert entered.wait(10), "the held call never started"
        quick = httpx.Client(base_url=url, timeout=5)
        start = time.perf_counter()
        assert quick.get("/v1/health").status_code == 200
        decided = quick.post("/v1/decide", json={"doc_id": "RMC-LAB-001"}, headers=DOCTOR)
        assert decided.status_code == 200
        assert time.perf_counter() - start < 5 and not slow.done()
        release.set()
        assert slow.result(timeout=20).status_code == 200
