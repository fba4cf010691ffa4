"""A prompt longer than the model's context window is the caller's input error.

`EmbeddedBackend` counts the prompt's tokens against ``n_ctx()`` before any work on
it and raises `ContextOverflowError` (a `PrivacyCIError`, not an `LLMError`): the
client neither retries it nor turns it into a failed completion. The first tests use
a stand-in for ``llama_cpp.Llama``; the last ones the packaged model when installed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from privacy_ci.conductor import Corpus
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling import Labeler
from privacy_ci.llm import (
    ContextOverflowError,
    GenerationSettings,
    LLMClient,
    LLMError,
    ResponseCache,
    _embedded,
    user,
)
from privacy_ci.llm._embedded import EmbeddedBackend, _LoadedModel
from privacy_ci.llm.testing import ScriptedTestBackend

N_CTX = 256
TEMPLATE_TOKENS = 30  # what the stand-in's chat template adds to the messages


class FakeLlama:
    """`llama_cpp.Llama` as far as the backend uses it: one token per word."""

    def __init__(self, n_ctx: int, error: str | None = None) -> None:
        self._n_ctx = n_ctx
        self.error = error
        self.generations: list[dict[str, Any]] = []

    def n_ctx(self) -> int:
        return self._n_ctx

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(range(len(text.split()) + add_bos))

    def reset(self) -> None:
        return None

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.generations.append(kwargs)
        tokens = sum(len(m["content"].split()) for m in kwargs["messages"]) + TEMPLATE_TOKENS
        if self.error is not None:
            raise ValueError(self.error)
        if tokens >= self._n_ctx:  # llama-cpp-python 0.3's own check, before evaluation
            raise ValueError(f"Requested tokens ({tokens}) exceed context window of {self._n_ctx}")
        return {
            "choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 1},
        }


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every embedded model is a `FakeLlama` (llama_cpp and the GGUF are not needed)."""
    state: dict[str, Any] = {"models": [], "path": tmp_path / "model.gguf"}
    state["path"].write_bytes(b"GGUF")

    def load(path: Path, n_ctx: int, n_threads: int | None, seed: int | None) -> _LoadedModel:
        llama = FakeLlama(n_ctx, state.get("error"))
        state["models"].append(llama)
        return _LoadedModel(llama=llama, load_s=0.0)

    monkeypatch.setattr(_embedded, "_import_llama_cpp", lambda: SimpleNamespace())
    monkeypatch.setattr(_embedded, "_load_model", load)
    return state


def words(n: int) -> str:
    return " ".join(["word"] * n)


def backend(fake: dict[str, Any]) -> EmbeddedBackend:
    return EmbeddedBackend(fake["path"], n_ctx=N_CTX)


def test_refused_before_any_generation(fake: dict[str, Any]) -> None:
    with pytest.raises(ContextOverflowError) as info:
        backend(fake).complete_sync([user(words(150)), user(words(150))])
    exc = info.value
    assert isinstance(exc, PrivacyCIError) and not isinstance(exc, LLMError)
    assert (exc.prompt_tokens, exc.n_ctx) == (300, N_CTX)
    assert str(exc).startswith(
        "input too long for model model: the prompt is at least 300 tokens,"
        " its context window holds 256 tokens; shorten the input or raise n_ctx"
    )
    assert "\n" not in str(exc)
    assert fake["models"][0].generations == []  # nothing computed in vain


def test_at_the_limit_is_refused_too(fake: dict[str, Any]) -> None:
    # llama.cpp needs prompt < n_ctx: a prompt of exactly n_ctx tokens cannot run
    with pytest.raises(ContextOverflowError):
        backend(fake).complete_sync([user(words(N_CTX))])
    assert fake["models"][0].generations == []


def test_the_templated_prompt_over_the_limit(fake: dict[str, Any]) -> None:
    # the messages fit, the chat template pushes them over: llama.cpp's own check says so
    with pytest.raises(ContextOverflowError) as info:
        backend(fake).complete_sync([user(words(240))])
    assert (info.value.prompt_tokens, info.value.n_ctx) == (240 + TEMPLATE_TOKENS, N_CTX)
    assert "the prompt is 270 tokens, its context window holds 256 tokens" in str(info.value)


def test_a_prompt_that_fits_is_answered(fake: dict[str, Any]) -> None:
    completion = backend(fake).complete_sync([user(words(100))])
    assert completion.ok and completion.text == "fine"
    assert completion.prompt_tokens == 100 + TEMPLATE_TOKENS


def test_other_llama_errors_stay_failed_calls(fake: dict[str, Any]) -> None:
    fake["error"] = "bad grammar"
    with pytest.raises(LLMError, match="embedded model: bad grammar") as info:
        backend(fake).complete_sync([user(words(10))])
    assert not isinstance(info.value, ContextOverflowError)


def test_the_client_raises_it_without_retrying_or_caching(
    fake: dict[str, Any], tmp_path: Path
) -> None:
    retries: list[int] = []
    cache = ResponseCache(tmp_path / "cache.sqlite")
    client = LLMClient(backend(fake), cache=cache, on_retry=lambda a, e, d: retries.append(a))
    with pytest.raises(ContextOverflowError):
        client.complete_sync([user(words(400))], GenerationSettings())
    assert retries == [] and client.usage.calls == 0 and client.usage.failures == 0
    assert cache.stats()["entries"] == 0


def test_a_document_too_long_is_a_labeling_failure_not_a_crash(corpus: Corpus) -> None:
    def too_long(messages: Any, settings: Any) -> str:
        raise ContextOverflowError(9000, 8192, "scripted")

    scripted = ScriptedTestBackend(too_long)
    labeler = Labeler(LLMClient(scripted, cache=None), corpus)
    record = asyncio.run(labeler.label("RMC-LAB-001", 1))
    assert not record.ok and record.proposed is None
    assert record.failure is not None and "input too long" in record.failure
    assert "9,000 tokens" in record.failure
    assert len(scripted.calls) == 1  # not re-asked: no answer can fit


# ---------------------------------------------------------------- the packaged model


@pytest.fixture(scope="module")
def small_model() -> EmbeddedBackend:
    reason = _embedded.embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    return EmbeddedBackend(n_ctx=N_CTX)


def test_packaged_model_refuses_an_overlong_prompt(small_model: EmbeddedBackend) -> None:
    with pytest.raises(ContextOverflowError) as info:
        small_model.complete_sync([user(words(2000))])
    assert info.value.n_ctx == N_CTX and info.value.prompt_tokens >= 2000
    assert "at least" in str(info.value)
    # just under the limit in text, over it once the chat template is applied
    llama = small_model._loaded().llama
    text = words(N_CTX - 10)
    assert len(llama.tokenize(text.encode(), add_bos=False, special=True)) < N_CTX
    with pytest.raises(ContextOverflowError) as info:
        small_model.complete_sync([user(text)])
    assert info.value.prompt_tokens >= N_CTX and "at least" not in str(info.value)
    # and a short prompt still runs on the same model
    short = small_model.complete_sync([user("Say hi.")], GenerationSettings(max_tokens=4))
    assert short.ok and 0 < short.prompt_tokens < N_CTX
