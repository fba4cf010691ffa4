"""AnthropicBackend against the fake server: Messages API request, tool-use output, errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from privacy_ci.llm import (
    AnthropicBackend,
    FinishReason,
    GenerationSettings,
    LLMClient,
    LLMConfig,
    LLMError,
    Message,
    RetryPolicy,
    make_backend,
    system,
    user,
)
from tests.llm.fake_openai_server import (
    FakeLLMServer,
    Fault,
    expected_answer,
    running_server,
    schema_instance,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["allow", "deny"]},
        "reason": {"type": "string"},
    },
    "required": ["verdict", "reason"],
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[FakeLLMServer, str]]:
    fake = FakeLLMServer()
    with running_server(fake.app) as url:
        yield fake, url


@pytest.fixture
def fake(served: tuple[FakeLLMServer, str]) -> FakeLLMServer:
    served[0].reset()
    return served[0]


@pytest.fixture
def url(served: tuple[FakeLLMServer, str], fake: FakeLLMServer) -> str:
    return served[1]


def backend(url: str, **kw: Any) -> AnthropicBackend:
    kw.setdefault("timeout", 5.0)
    return AnthropicBackend(model="claude-fake", base_url=url, api_key="sk-ant-test", **kw)


CHAT = [
    system("rule one"),
    system("rule two"),
    user("first"),
    Message("assistant", "noted"),
    user("hello claude"),
]


def call(b: AnthropicBackend, settings: GenerationSettings | None = None) -> Any:
    async def go() -> Any:
        try:
            return await b.complete(CHAT, settings or GenerationSettings())
        finally:
            await b.aclose()

    return asyncio.run(go())


def failure(b: AnthropicBackend) -> LLMError:
    with pytest.raises(LLMError) as info:
        call(b)
    return info.value


def test_request_carries_every_setting(fake: FakeLLMServer, url: str) -> None:
    c = call(
        backend(url), GenerationSettings(temperature=0.2, max_tokens=99, stop=("END",), seed=3)
    )
    body = fake.bodies[-1]
    assert fake.requests[-1].path == "/v1/messages"
    assert body["model"] == "claude-fake" and body["max_tokens"] == 99
    assert body["temperature"] == 0.2 and body["stop_sequences"] == ["END"]
    assert "top_p" not in body  # 1.0 is not sent: newer models reject it with temperature
    assert "seed" not in body  # the Messages API has none
    assert body["system"] == "rule one\n\nrule two"
    assert body["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "hello claude"},
    ]
    assert "tools" not in body
    assert c.ok and c.text == expected_answer("hello claude")
    assert c.finish_reason is FinishReason.STOP and c.provider == "anthropic"
    assert c.prompt_tokens == 8 and c.completion_tokens == 3  # words, as the fake counts
    assert c.raw["id"].startswith("msg_")


def test_defaults_sent_and_top_p_when_not_one(fake: FakeLLMServer, url: str) -> None:
    call(backend(url))
    body = fake.bodies[-1]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 512
    assert "stop_sequences" not in body  # none given: nothing to send
    call(backend(url), GenerationSettings(top_p=0.8))
    assert fake.bodies[-1]["top_p"] == 0.8


def test_tool_use_structured_output(fake: FakeLLMServer, url: str) -> None:
    c = call(backend(url), GenerationSettings(json_schema=SCHEMA, schema_name="decision"))
    body = fake.bodies[-1]
    assert body["tools"] == [
        {"name": "decision", "description": body["tools"][0]["description"], "input_schema": SCHEMA}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "decision"}
    expected = schema_instance(SCHEMA, "hello claude")
    assert c.ok and c.parsed == expected and c.parse_error is None
    assert c.finish_reason is FinishReason.TOOL
    assert c.text.startswith("{") and '"verdict": "allow"' in c.text


def test_non_object_schema_is_wrapped_and_unwrapped(fake: FakeLLMServer, url: str) -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    c = call(backend(url), GenerationSettings(json_schema=schema))
    sent = fake.bodies[-1]["tools"][0]["input_schema"]
    assert sent == {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    assert c.parsed == ["hello claude"]


def test_text_instead_of_tool_use_is_parsed_or_reported(fake: FakeLLMServer, url: str) -> None:
    fake.push(Fault.content('{"verdict": "deny", "reason": "r"}'), Fault.content("I refuse {"))
    good = call(backend(url), GenerationSettings(json_schema=SCHEMA))
    bad = call(backend(url), GenerationSettings(json_schema=SCHEMA))
    assert good.parsed == {"verdict": "deny", "reason": "r"} and good.parse_error is None
    assert bad.ok and bad.parsed is None and bad.parse_error and bad.text == "I refuse {"


def test_response_format_mode_uses_output_config(fake: FakeLLMServer, url: str) -> None:
    call(backend(url, structured_mode="response_format"), GenerationSettings(json_schema=SCHEMA))
    body = fake.bodies[-1]
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "tools" not in body


def test_unsupported_structured_mode_is_refused() -> None:
    with pytest.raises(LLMError, match="guided_json"):
        AnthropicBackend(model="m", structured_mode="guided_json")


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("tool_use", FinishReason.TOOL),
        ("refusal", FinishReason.OTHER),
    ],
)
def test_stop_reason_mapping(
    fake: FakeLLMServer, url: str, stop: str, expected: FinishReason
) -> None:
    fake.push(Fault.content("x y", finish=stop))
    assert call(backend(url)).finish_reason is expected


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
        (429, True),
        (500, True),
        (503, True),
        (529, True),
    ],
)
def test_status_errors_are_mapped(
    fake: FakeLLMServer, url: str, status: int, retryable: bool
) -> None:
    fake.push(Fault.http(status, f"nope {status}", {"retry-after": "2"} if retryable else None))
    err = failure(backend(url))
    assert err.status == status and err.retryable is retryable
    assert f"HTTP {status}" in str(err) and f"nope {status}" in str(err)
    assert err.retry_after == (2.0 if retryable else None)
    assert isinstance(err.__cause__, anthropic.APIStatusError)


def test_overloaded_529_is_retried_by_the_client(fake: FakeLLMServer, url: str) -> None:
    fake.push(Fault.overloaded(), Fault.rate_limit_ms(100))
    delays: list[float] = []

    async def sleep(d: float) -> None:
        delays.append(d)

    client = LLMClient(backend(url), retry=RetryPolicy(base_delay=0.01, jitter=0.0), sleep=sleep)
    c = client.complete_sync([user("hi")])
    assert c.ok and c.retries == 2 and c.text == expected_answer("hi")
    assert delays == [0.01, 0.1] and len(fake.requests) == 3


def test_timeout_and_dropped_connection_are_retryable(fake: FakeLLMServer, url: str) -> None:
    fake.push(Fault.slow(2.0))
    err = failure(backend(url, timeout=0.2))  # the error type shows the timeout fired
    assert err.retryable and isinstance(err.__cause__, anthropic.APITimeoutError)
    fake.push(Fault.drop())
    err = failure(backend(url))
    assert err.retryable and type(err.__cause__) is anthropic.APIConnectionError


def test_malformed_body_is_retryable(fake: FakeLLMServer, url: str) -> None:
    fake.push(Fault.malformed_body(), Fault.body({"type": "message"}))
    for _ in range(2):
        err = failure(backend(url))
        assert err.retryable and err.status == 200


def test_complete_sync_twice_in_a_row(fake: FakeLLMServer, url: str) -> None:
    b = backend(url)
    client = LLMClient(b)
    first, second = client.complete_sync([user("a")]), client.complete_sync([user("b")])
    assert (first.text, second.text) == (expected_answer("a"), expected_answer("b"))
    assert len(b._pool) == 0


def test_from_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLMServer, url: str) -> None:
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "sk-ant-env")
    b = make_backend(
        LLMConfig(
            provider="anthropic",
            model="claude-x",
            base_url=url,
            api_key_env="FAKE_ANTHROPIC_KEY",
            timeout=9,
        )
    )
    assert isinstance(b, AnthropicBackend)
    assert (b.provider, b.model, b.base_url, b.timeout) == ("anthropic", "claude-x", url, 9)
    c = call(b)
    assert c.ok
    headers = fake.requests[-1].headers
    assert "sk-ant-env" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY"):
        make_backend(LLMConfig(provider="anthropic", model="claude-x"))
