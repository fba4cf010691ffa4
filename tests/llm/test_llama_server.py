"""The llama.cpp OpenAI-compatible server (``llama-cpp-python[server]``) serving the
same GGUF, called through `OpenAICompatibleBackend`, agrees with the in-process
`EmbeddedBackend` at temperature 0.

Why the settings below matter (measured with llama-cpp-python 0.3.36, SmolLM2-135M):

- Sampler chain: the server's request default is ``repeat_penalty=1.1`` while
  ``Llama.create_chat_completion`` (our in-process backend) defaults to 1.0; the
  penalty acts even under greedy decoding, so longer answers differ unless both
  sides use the same value. A one-sentence answer is usually unaffected.
- History: the server reuses the KV cache of the previous request's common prefix,
  and an identical prompt sent twice in a row re-evaluates only its last token,
  whose logits differ slightly from a full batch evaluation; the greedy path can
  then change. The tests never send the same prompt twice in a row (the in-process
  backend re-evaluates every prompt, so its output does not depend on history).
- Threads and context size are the same on both sides.

Skips (with the reason) when ``llama_cpp``, its server extras or the model are absent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import GenerationSettings, LLMConfig, user
from privacy_ci.llm._embedded import EmbeddedBackend, embedded_unavailable_reason
from tests.service._serving import free_port, wait_until_answering

SERVER_EXTRAS = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
MODEL = "smollm2-135m-instruct"
N_CTX = 8192
SHORT = "What is the capital of France? Answer in one short sentence."
LONGER = (
    "Name two duties of a hospital privacy officer.",
    "Write a short paragraph about privacy law in hospitals.",
)
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["permitted", "prohibited", "not_related"]}
    },
    "required": ["verdict"],
}


def _skip_reason() -> str | None:
    reason = embedded_unavailable_reason()
    if reason is not None:
        return reason
    missing = [m for m in SERVER_EXTRAS if importlib.util.find_spec(m) is None]
    if missing:
        return f"llama-cpp-python[server] extras missing: {', '.join(missing)}"
    if importlib.util.find_spec("openai") is None:
        return "the openai package is not installed"
    return None


@pytest.fixture(scope="module")
def inprocess() -> EmbeddedBackend:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    backend = EmbeddedBackend(n_ctx=N_CTX)
    backend.load()
    return backend


@pytest.fixture(scope="module")
def server(inprocess: EmbeddedBackend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's ``/v1`` URL; the process is stopped when the module ends."""
    llama: Any = inprocess._loaded().llama
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(inprocess.model_path),
        "--model_alias", MODEL,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(N_CTX),
        "--seed", "0",
        "--n_threads", str(llama.n_threads),
        "--n_threads_batch", str(llama.n_threads_batch),
    ]  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_answering(
                proc,
                f"{base}/models",
                "llama_cpp.server",
                lambda: log_path.read_text("utf-8", "replace")[-2000:],
            )
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def _remote(base: str) -> Any:
    from privacy_ci.llm import OpenAICompatibleBackend

    return OpenAICompatibleBackend.from_config(
        LLMConfig(provider="openai-compatible", base_url=base, model=MODEL)
    )


def test_server_lists_the_model(server: str) -> None:
    models = httpx.get(f"{server}/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == [MODEL]


def test_short_prompt_agrees_with_inprocess_at_temperature_zero(
    inprocess: EmbeddedBackend, server: str
) -> None:
    settings = GenerationSettings(temperature=0.0, seed=0, max_tokens=48)
    local = inprocess.complete_sync([user(SHORT)], settings)
    remote = asyncio.run(_remote(server).complete([user(SHORT)], settings))
    assert remote.ok and remote.provider == "openai-compatible"
    assert "Paris" in local.text
    assert remote.text == local.text
    assert remote.prompt_tokens == local.prompt_tokens
    assert remote.completion_tokens == local.completion_tokens


def test_longer_answers_agree_when_the_repeat_penalty_matches(
    inprocess: EmbeddedBackend, server: str
) -> None:
    """OpenAICompatibleBackend sends no repeat_penalty, so the server uses 1.1: an
    in-process backend with repeat_penalty=1.1 matches it; a raw request with
    repeat_penalty=1.0 matches the default in-process backend."""
    settings = GenerationSettings(temperature=0.0, seed=0, max_tokens=100)
    penalised = EmbeddedBackend(n_ctx=N_CTX, repeat_penalty=1.1)
    remote = _remote(server)
    for prompt in LONGER:
        via_backend = asyncio.run(remote.complete([user(prompt)], settings))
        assert via_backend.text == penalised.complete_sync([user(prompt)], settings).text
        other = prompt + " Be brief."  # never the same prompt twice in a row
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": other}],
            "temperature": 0.0,
            "top_p": 1.0,
            "seed": 0,
            "max_tokens": 100,
            "repeat_penalty": 1.0,
        }
        raw = httpx.post(f"{server}/chat/completions", json=body, timeout=120).json()
        local = inprocess.complete_sync([user(other)], settings)
        assert raw["choices"][0]["message"]["content"] == local.text


def test_schema_constrained_verdict_agrees(inprocess: EmbeddedBackend, server: str) -> None:
    """llama-cpp-python's server takes a schema as response_format
    ``{"type": "json_object", "schema": ...}`` (not OpenAI's ``json_schema`` type)."""
    prompt = "A clinic emails a patient's chart to a journalist. Permitted under HIPAA? JSON."
    settings = GenerationSettings(
        temperature=0.0, seed=0, max_tokens=32, json_schema=VERDICT_SCHEMA
    )
    local = inprocess.complete_sync([user(prompt)], settings)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
        "max_tokens": 32,
        "repeat_penalty": 1.0,
        "response_format": {"type": "json_object", "schema": VERDICT_SCHEMA},
    }
    raw = httpx.post(f"{server}/chat/completions", json=body, timeout=120).json()
    assert raw["choices"][0]["message"]["content"] == local.text
    assert local.parsed["verdict"] in VERDICT_SCHEMA["properties"]["verdict"]["enum"]


def test_auto_structured_mode_falls_back_to_json_object(server: str) -> None:
    """The server rejects ``response_format: json_schema`` (HTTP 500); in ``auto`` mode
    the backend switches to its schema-constrained ``json_object`` once and answers."""
    remote = _remote(server)
    assert remote.structured_mode == "auto"
    settings = GenerationSettings(
        temperature=0.0, seed=0, max_tokens=32, json_schema=VERDICT_SCHEMA
    )
    prompt = "A nurse faxes lab results to the wrong clinic. Permitted under HIPAA? JSON."
    completion = asyncio.run(remote.complete([user(prompt)], settings))
    assert remote.structured_mode == "json_object"
    assert completion.parse_error is None
    assert completion.parsed["verdict"] in VERDICT_SCHEMA["properties"]["verdict"]["enum"]
    # an explicit mode is never second-guessed: the error comes back as it is
    from privacy_ci.llm import OpenAICompatibleBackend

    strict = OpenAICompatibleBackend.from_config(
        LLMConfig(
            provider="openai-compatible",
            base_url=server,
            model=MODEL,
            structured_mode="response_format",
        )
    )
    with pytest.raises(PrivacyCIError, match="json_schema"):
        asyncio.run(strict.complete([user(prompt)], settings))
