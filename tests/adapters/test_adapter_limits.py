"""The in-process adapters apply the service's per-requester decision rate (issue 24).

The outside tester's finding: `LocalGatedSource` made about 13,300 audited decisions
a second for one requester while the service caps a requester at 1,000 (bursts of
2,000). Now a source charges the requester's bucket as the service does (a decision
1, a retrieval k + 1) at the service's default rate unless told otherwise, and every
framework sees the refusal as `RateLimitExceeded`. And a key read with its file's
trailing newline is the same key in-process as in the service.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from privacy_ci.adapters import (
    UNLIMITED,
    HttpGatedSource,
    LocalGatedSource,
    Rate,
    RateLimitExceeded,
    ServiceError,
    service_decision_rate,
)
from privacy_ci.adapters.langchain import GatedLangChainRetriever
from privacy_ci.adapters.llamaindex import GatedLlamaIndexRetriever
from privacy_ci.adapters.mcp import build_server
from privacy_ci.errors import PrivacyCIError
from privacy_ci.service import (
    ServiceSettings,
    check_key,
    create_app,
    issue_token,
    load_key,
    verify_token,
)
from privacy_ci.service._limits import RateLimited
from privacy_ci.store import MAX_K, DocumentStore
from tests.adapters._gated import DOCTOR, KEY, token
from tests.service._serving import serving

SLOW = Rate(per_s=0.001, burst=5.0)  # five decisions, then none for a quarter of an hour


def test_the_default_is_the_services_rate(riverside: DocumentStore) -> None:
    assert service_decision_rate() == ServiceSettings(jwt_key=KEY).decision_rate
    assert LocalGatedSource(riverside, KEY, DOCTOR).rate == service_decision_rate()
    assert LocalGatedSource(riverside, KEY, DOCTOR, rate=SLOW).rate == SLOW
    assert LocalGatedSource(riverside, KEY, DOCTOR, rate=UNLIMITED).rate is None
    with pytest.raises(PrivacyCIError, match="rate must be a Rate"):
        LocalGatedSource(riverside, KEY, DOCTOR, rate="fast")  # type: ignore[arg-type]


def test_a_burst_beyond_the_bucket_is_refused(riverside: DocumentStore) -> None:
    source = LocalGatedSource(riverside, KEY, DOCTOR, rate=SLOW)
    for _ in range(5):
        assert source.decide("RMC-LAB-003")["decision"] == "permit"
    with pytest.raises(RateLimitExceeded, match=r"rate limit: at most 0\.001 audited") as info:
        source.decide("RMC-LAB-003")
    refusal = info.value
    assert isinstance(refusal, RateLimited) and isinstance(refusal, ServiceError)
    assert refusal.status == 429 and refusal.retry_after > 0
    # a retrieval costs k + 1: more than the bucket holds is refused as such
    with pytest.raises(RateLimitExceeded, match="costs 11 audited decisions, more than"):
        LocalGatedSource(riverside, KEY, DOCTOR, rate=Rate(per_s=1, burst=10)).retrieve("x", 10)
    # nothing refused was decided: the audit log holds the five decisions only
    decided = [r for r in riverside.audit.records() if r.action == "decide"]
    assert len(decided) == 5


def test_sources_share_a_requesters_bucket_and_requesters_do_not(riverside: DocumentStore) -> None:
    first = LocalGatedSource(riverside, KEY, DOCTOR, rate=SLOW)
    second = LocalGatedSource(riverside, KEY, DOCTOR, rate=SLOW)  # the same token again
    for source in (first, second, first, second, first):
        source.decide("RMC-LAB-001")
    with pytest.raises(RateLimitExceeded):
        second.decide("RMC-LAB-001")
    nurse = LocalGatedSource(riverside, KEY, token("N01", "Nurse", "Medical"), rate=SLOW)
    assert nurse.decide("RMC-LAB-001")["requester"] == "N01"


def test_the_default_bucket_refuses_a_flood(riverside: DocumentStore) -> None:
    """At the service's default (bursts of 2,000, 1,000 a second), retrievals of
    MAX_K candidates are refused once the burst is spent; unlimited, never."""
    cost = MAX_K + 1
    source = LocalGatedSource(riverside, KEY, DOCTOR)
    spent = 0
    with pytest.raises(RateLimitExceeded, match="at most 1000 audited decisions per second"):
        for _ in range(200):
            source.retrieve("lipid panel cholesterol", MAX_K)
            spent += cost
    assert spent >= service_decision_rate().burst - cost
    batch = LocalGatedSource(riverside, KEY, token("N01", "Nurse", "Medical"), rate=UNLIMITED)
    for _ in range(int(service_decision_rate().burst // cost) + 5):
        batch.retrieve("lipid panel cholesterol", MAX_K)


def test_both_modes_raise_the_same_error(riverside: DocumentStore) -> None:
    slow = ServiceSettings(jwt_key=KEY, decision_rate=SLOW)
    with serving(create_app(riverside, slow)) as url, HttpGatedSource(url, DOCTOR) as remote:
        for _ in range(5):
            remote.decide("RMC-LAB-003")
        with pytest.raises(RateLimitExceeded, match="429") as info:
            remote.decide("RMC-LAB-003")
        assert info.value.status == 429 and info.value.retry_after >= 1


def test_langchain_sees_the_refusal(riverside: DocumentStore) -> None:
    source = LocalGatedSource(riverside, KEY, DOCTOR, rate=Rate(per_s=0.001, burst=8))
    retriever = GatedLangChainRetriever(source=source, k=3)
    assert retriever.invoke("lipid panel")  # 4 decisions
    assert retriever.invoke("lipid panel")  # 8
    with pytest.raises(RateLimitExceeded, match="rate limit"):
        retriever.invoke("lipid panel")
    with pytest.raises(RateLimitExceeded, match="rate limit"):
        anyio.run(retriever.ainvoke, "lipid panel")


def test_llamaindex_sees_the_refusal(riverside: DocumentStore) -> None:
    source = LocalGatedSource(riverside, KEY, DOCTOR, rate=Rate(per_s=0.001, burst=8))
    retriever = GatedLlamaIndexRetriever(source, k=3)
    assert retriever.retrieve("lipid panel")
    assert retriever.retrieve("lipid panel")
    with pytest.raises(RateLimitExceeded, match="rate limit"):
        retriever.retrieve("lipid panel")


def test_mcp_sees_the_refusal_and_keeps_serving(riverside: DocumentStore) -> None:
    source = LocalGatedSource(riverside, KEY, DOCTOR, rate=SLOW)
    stopped: list[object] = []
    server = build_server(source, on_refused=lambda error, request: stopped.append(error))

    async def agent() -> None:
        async with Client(server) as client:
            for _ in range(5):
                ok = await client.call_tool("decide", {"doc_id": "RMC-LAB-003"})
                assert not ok.is_error
            for _ in range(2):  # refused, and the server is still there
                refused = await client.call_tool("decide", {"doc_id": "RMC-LAB-003"})
                block = refused.content[0]
                assert refused.is_error and isinstance(block, TextContent)
                assert block.text.startswith("decide refused: rate limit: at most 0.001")

    anyio.run(agent)
    assert stopped == []  # a rate limit is no reason to stop


def test_a_key_and_token_read_with_their_newlines_are_the_same(
    riverside: DocumentStore, tmp_path: Path
) -> None:
    """A key file's trailing newline once made every token look forged in-process
    (the service strips it when it reads the file); it is no part of the key."""
    key_file = tmp_path / "jwt.key"
    key_file.write_bytes(KEY + b"\n")
    for key in (key_file.read_text(), key_file.read_bytes(), f"  {KEY.decode()}\r\n"):
        source = LocalGatedSource(riverside, key, DOCTOR + "\n")
        assert source.decide("RMC-LAB-003")["decision"] == "permit"
    assert load_key(key_file) == check_key(key_file.read_text()) == KEY
    assert verify_token(issue_token(KEY + b"\n", "D01", "Doctor", "Medical"), KEY).sub == "D01"
