"""OpenAICompatibleBackend against the fake server: what is sent, what comes back."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import socket
import time
import warnings
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from privacy_ci.llm import (
    FinishReason,
    GenerationSettings,
    LLMClient,
    LLMConfig,
    LLMError,
    OpenAICompatibleBackend,
    make_backend,
    system,
    user,
)
from privacy_ci.llm._transport import retry_after_seconds
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
        "score": {"type": "integer"},
    },
    "required": ["verdict", "reason", "score"],
    "additionalProperties": False,
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
    return served[1] + "/v1"


def backend(url: str, **kw: Any) -> OpenAICompatibleBackend:
    kw.setdefault("timeout", 5.0)
    return OpenAICompatibleBackend(model="fake-model", base_url=url, **kw)


def call(
    b: OpenAICompatibleBackend,
    settings: GenerationSettings | None = None,
    prompt: str = "hello there",
) -> Any:
    async def go() -> Any:
        try:
            return await b.complete(
                [system("be brief"), user(prompt)], settings or GenerationSettings()
            )
        finally:
            await b.aclose()

    return asyncio.run(go())


def failure(b: OpenAICompatibleBackend, settings: GenerationSettings | None = None) -> LLMError:
    with pytest.raises(LLMError) as info:
        call(b, settings)
    return info.value


# -- what is sent ----------------------------------------------------------------------
def test_every_setting_is_sent_explicitly(fake: FakeLLMServer, url: str) -> None:
    settings = GenerationSettings(
        temperature=0.3, top_p=0.9, max_tokens=77, seed=5, stop=("END", "STOP")
    )
    c = call(backend(url), settings)
    body = fake.bodies[-1]
    assert body["model"] == "fake-model"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there"},
    ]
    assert body["temperature"] == 0.3 and body["top_p"] == 0.9
    assert body["max_tokens"] == 77 and "max_completion_tokens" not in body
    assert body["seed"] == 5 and body["stop"] == ["END", "STOP"]
    assert "response_format" not in body and "tools" not in body
    assert c.ok and c.text == expected_answer("hello there")


def test_defaults_are_sent_too_not_left_to_the_server(fake: FakeLLMServer, url: str) -> None:
    call(backend(url))
    body = fake.bodies[-1]
    for key, value in {
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
        "max_tokens": 512,
        "stop": None,
    }.items():
        assert key in body and body[key] == value, key


def test_openai_provider_uses_max_completion_tokens_and_the_key(
    fake: FakeLLMServer, url: str
) -> None:
    call(backend(url, provider="openai", api_key="sk-test"), GenerationSettings(max_tokens=33))
    body = fake.bodies[-1]
    assert body["max_completion_tokens"] == 33 and "max_tokens" not in body
    assert fake.requests[-1].headers["authorization"] == "Bearer sk-test"


def test_local_server_without_key_gets_a_placeholder(fake: FakeLLMServer, url: str) -> None:
    call(backend(url))
    assert fake.requests[-1].headers["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize(
    "mode", ["auto", "response_format", "guided_json", "grammar", "tool", "none"]
)
def test_structured_modes_produce_the_right_request_fields(
    fake: FakeLLMServer, url: str, mode: Any
) -> None:
    settings = GenerationSettings(json_schema=SCHEMA, schema_name="decision")
    c = call(backend(url, structured_mode=mode), settings)
    body = fake.bodies[-1]
    structured_keys = {"response_format", "guided_json", "json_schema", "tools", "tool_choice"}
    if mode in ("auto", "response_format"):
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "decision", "schema": SCHEMA, "strict": True},
        }
        expected = {"response_format"}
    elif mode == "guided_json":
        assert body["guided_json"] == SCHEMA
        expected = {"guided_json"}
    elif mode == "grammar":
        assert body["json_schema"] == SCHEMA
        expected = {"json_schema"}
    elif mode == "tool":
        assert body["tools"][0]["function"]["name"] == "decision"
        assert body["tools"][0]["function"]["parameters"] == SCHEMA
        assert body["tool_choice"] == {"type": "function", "function": {"name": "decision"}}
        expected = {"tools", "tool_choice"}
    else:
        expected = set()
    assert structured_keys & set(body) == expected
    if mode == "none":  # the fake server answers plain text: a parse error, not an exception
        assert c.ok and c.parsed is None and c.parse_error and c.text.startswith("echo:")
    else:
        assert c.ok and c.parse_error is None
        assert c.parsed == schema_instance(SCHEMA, "hello there")
    if mode == "tool":
        assert c.finish_reason is FinishReason.TOOL


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("tool_calls", FinishReason.TOOL),
        ("content_filter", FinishReason.OTHER),
    ],
)
def test_finish_reason_tokens_and_raw(
    fake: FakeLLMServer, url: str, finish: str, expected: FinishReason
) -> None:
    fake.push(Fault.content("one two three", finish=finish))
    c = call(backend(url))
    assert c.finish_reason is expected
    assert c.text == "one two three"
    assert c.prompt_tokens == 4 and c.completion_tokens == 3  # words, as the fake counts
    assert c.raw["id"].startswith("chatcmpl-") and c.raw["system_fingerprint"] == "fp_fake"
    assert c.latency_s > 0 and c.provider == "openai-compatible" and c.model == "fake-model"


def test_malformed_structured_output_is_a_parse_error_not_an_exception(
    fake: FakeLLMServer, url: str
) -> None:
    fake.push(Fault.content('{"verdict": "allow", "reason": '))
    c = call(backend(url), GenerationSettings(json_schema=SCHEMA))
    assert c.ok and c.parsed is None
    assert c.parse_error is not None and "invalid JSON" in c.parse_error
    assert c.text == '{"verdict": "allow", "reason": '


# -- errors ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
        (408, True),
        (409, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
    ],
)
def test_status_errors_are_mapped(
    fake: FakeLLMServer, url: str, status: int, retryable: bool
) -> None:
    fake.push(Fault.http(status, f"server says no ({status})"))
    err = failure(backend(url))
    assert err.status == status and err.retryable is retryable
    assert f"HTTP {status}" in str(err) and f"server says no ({status})" in str(err)
    assert isinstance(err.__cause__, openai.APIStatusError)


def test_rate_limit_retry_after_seconds_ms_and_date(fake: FakeLLMServer, url: str) -> None:
    fake.push(Fault.rate_limit("1"))
    err = failure(backend(url))
    assert err.retry_after == 1.0 and err.retryable
    assert isinstance(err.__cause__, openai.RateLimitError)
    fake.push(Fault.rate_limit_ms(250))
    assert failure(backend(url)).retry_after == 0.25
    fake.push(Fault.rate_limit(email.utils.formatdate(time.time() + 30, usegmt=True)))
    later = failure(backend(url)).retry_after
    assert later is not None and 27 <= later <= 31


def test_retry_after_parser_edge_cases() -> None:
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"Retry-After": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5


def test_timeout_is_retryable(fake: FakeLLMServer, url: str) -> None:
    fake.push(Fault.slow(2.0))
    err = failure(backend(url, timeout=0.2))  # the error type shows the timeout fired
    assert err.retryable and "timed out" in str(err)
    assert isinstance(err.__cause__, openai.APITimeoutError)


def test_dropped_connection_is_a_retryable_connection_error(fake: FakeLLMServer, url: str) -> None:
    fake.push(Fault.drop())
    err = failure(backend(url))
    assert err.retryable and "connection failed" in str(err)
    assert type(err.__cause__) is openai.APIConnectionError  # not a timeout
    assert len(fake.requests) == 1  # the request did reach the server


def test_refused_connection_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = failure(backend(f"http://127.0.0.1:{port}/v1"))
    assert err.retryable and isinstance(err.__cause__, openai.APIConnectionError)


@pytest.mark.parametrize(
    "fault",
    [
        Fault.malformed_body(),
        Fault.body({"id": "x"}),
        Fault.body({"id": "x", "choices": []}),
        Fault.body([1, 2]),
    ],
)
def test_malformed_200_body_is_retryable(fake: FakeLLMServer, url: str, fault: Fault) -> None:
    fake.push(fault)
    err = failure(backend(url))
    assert err.retryable and err.status == 200 and "malformed response" in str(err)


# -- lifecycle and configuration -------------------------------------------------------
def test_complete_sync_twice_in_a_row_with_fresh_loops(fake: FakeLLMServer, url: str) -> None:
    b = backend(url)
    client = LLMClient(b)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = client.complete_sync([user("one")])
        assert len(b._pool) == 0  # the loop's client was closed when asyncio.run ended
        second = client.complete_sync([user("two")])
        gc.collect()
    assert first.ok and second.ok, (first.error, second.error)
    assert (first.text, second.text) == (expected_answer("one"), expected_answer("two"))
    assert len(b._pool) == 0
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_aclose_closes_the_client(url: str) -> None:
    b = backend(url)

    async def go() -> bool:
        await b.complete([user("x")], GenerationSettings())
        client = await b._pool.get()
        await b.aclose()
        return client.is_closed()

    assert asyncio.run(go()) and len(b._pool) == 0


def test_from_config(monkeypatch: pytest.MonkeyPatch, fake: FakeLLMServer, url: str) -> None:
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")  # must not redirect us
    cfg = LLMConfig(
        provider="openai-compatible",
        model="m",
        base_url=url + "/",
        api_key_env="FAKE_LLM_KEY",
        structured_mode="guided_json",
        timeout=7,
    )
    b = make_backend(cfg)
    assert isinstance(b, OpenAICompatibleBackend)
    assert (b.provider, b.model, b.base_url, b.structured_mode, b.timeout) == (
        "openai-compatible",
        "m",
        url,
        "guided_json",
        7,
    )
    c = call(b)
    assert c.ok and fake.requests[-1].headers["authorization"] == "Bearer sk-from-env"

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        make_backend(LLMConfig(provider="openai", model="gpt-x"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    real = make_backend(LLMConfig(provider="openai", model="gpt-x"))
    assert real.base_url == "https://api.openai.com/v1" and real.provider == "openai"
    with pytest.raises(LLMError, match="base_url"):
        make_backend(LLMConfig(provider="openai-compatible", model="m"))


def test_grammar_repeat_penalty_and_json_object_reach_llama_cpp_servers() -> None:
    b = backend("http://127.0.0.1:9/v1", structured_mode="json_object")
    schema = {"type": "object", "properties": {"v": {"enum": ["a", "b"]}}, "required": ["v"]}
    opts = b.request_options(
        [user("x")], GenerationSettings(json_schema=schema, repeat_penalty=1.0)
    )
    assert opts["response_format"] == {"type": "json_object", "schema": schema}
    assert opts["extra_body"] == {"repeat_penalty": 1.0}
    opts = backend("http://127.0.0.1:9/v1").request_options(
        [user("x")], GenerationSettings(grammar='root ::= "A" | "B"')
    )
    assert opts["extra_body"] == {"grammar": 'root ::= "A" | "B"'}
    with pytest.raises(ValueError, match="not both"):
        GenerationSettings(grammar='root ::= "A"', json_schema=schema)
