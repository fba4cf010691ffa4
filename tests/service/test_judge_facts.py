"""``/v1/judge`` with ``facts``: validated against the fact model (422 naming the fact or
value), and handed to the method as `Event.facts` (the ci-reasoner takes them as given)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from privacy_ci.ci import Flow
from privacy_ci.llm import LLMClient
from privacy_ci.llm.testing import ScriptedTestBackend
from privacy_ci.reasoning import FactJudge, Facts, apply_law, load_law
from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.store import DocumentStore

KEY = b"service-test-key-0123456789abcdef-0123456789"
DOCTOR = {"Authorization": f"Bearer {issue_token(KEY, 'D01', 'Doctor', 'Medical')}"}
EVENT = "A hospital sent a patient's therapy notes to her employer."
# every fact known (the others at their presumptions): a determined verdict
NOTES = {
    **{s.name: s.presume for s in load_law().schema if s.presume is not None},
    "holder": "covered_entity",
    "information": "psychotherapy_notes",
    "recipient": "employer",
    "purpose": "employment_decision",
}


@pytest.fixture
def client(sqlite_riverside: DocumentStore) -> Iterator[TestClient]:
    scripted = LLMClient(ScriptedTestBackend(["Choice: B. Prohibited"], cycle=True))
    settings = ServiceSettings(jwt_key=KEY, llm_client=scripted)
    with TestClient(create_app(sqlite_riverside, settings)) as c:
        yield c


def _problems(res: Any) -> str:
    return " ".join(res.text.split())


@pytest.mark.parametrize(
    ("facts", "names"),
    [
        ({"holder": "covered_entity", "colour": "blue"}, ["facts.colour", "unknown fact 'colour'"]),
        ({"holder": "hospital"}, ["facts.holder", "unknown value 'hospital'", "covered_entity"]),
        (
            {"colour": "blue", "authorization": "maybe"},
            ["facts.colour", "facts.authorization", "unknown value 'maybe'"],
        ),
    ],
)
def test_unknown_facts_or_values_are_a_422_naming_them(
    client: TestClient, facts: dict[str, str], names: list[str]
) -> None:
    res = client.post(
        "/v1/judge", json={"event": EVENT, "method": "ci-reasoner", "facts": facts}, headers=DOCTOR
    )
    assert res.status_code == 422, res.text
    for name in names:
        assert name in _problems(res)


def test_malformed_facts_are_a_422(client: TestClient) -> None:
    for facts in ({"holder": 1}, ["holder"], "holder=covered_entity"):
        res = client.post("/v1/judge", json={"event": EVENT, "facts": facts}, headers=DOCTOR)
        assert res.status_code == 422, (facts, res.text)
        assert "facts" in _problems(res)


def test_the_ci_reasoner_takes_the_facts_as_given(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given facts decide: nothing is read here (the reader is switched off), so the
    verdict is the law's on the facts of the request."""

    def read_nothing(self: FactJudge, text: str | None, flow: Flow | None = None) -> Facts:
        return Facts(self.schema)

    monkeypatch.setattr(FactJudge, "read", read_nothing)
    want = apply_law(load_law(), Facts.from_mapping(load_law().schema, NOTES))
    assert want.determined
    body = {"event": EVENT, "method": "ci-reasoner", "facts": NOTES}
    res = client.post("/v1/judge", json=body, headers=DOCTOR)
    assert res.status_code == 200, res.text
    data = res.json()
    assert data["verdict"] == want.verdict.value and data["backend"] == "model-free"
    [step] = data["steps"]
    parsed = step["parsed"]
    assert parsed["determined"] is True
    assert parsed["decision"]["rule"]["id"] == want.rule.id
    assert parsed["facts"] == {k: {"value": v, "source": "given"} for k, v in NOTES.items()}
    assert data["cited_ids"] == [want.rule.paragraph]
    # without facts, the same event decides on nothing read: not determined
    res = client.post("/v1/judge", json={"event": EVENT, "method": "ci-reasoner"}, headers=DOCTOR)
    assert res.status_code == 200 and res.json()["steps"][0]["parsed"]["determined"] is False


def test_a_model_method_accepts_facts(client: TestClient) -> None:
    body = {"event": EVENT, "method": "dp", "facts": {"holder": "covered_entity"}}
    res = client.post("/v1/judge", json=body, headers=DOCTOR)
    assert res.status_code == 200, res.text
    data = res.json()
    assert data["verdict"] is not None and [s["name"] for s in data["steps"]] == ["decide"]
    assert "covered_entity" not in data["steps"][0]["prompt"]  # no prompt shows the facts


def test_the_openapi_schema_documents_facts(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    facts = spec["components"]["schemas"]["JudgeRequest"]["properties"]["facts"]
    assert "privacy-ci facts schema" in facts["description"]
