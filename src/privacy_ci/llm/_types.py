"""Values shared by every LLM backend: messages, generation settings, completions.

One interface for every model: ``await backend.complete(messages, settings)``
returns a `Completion`. Backends do one attempt; retries, caching, concurrency
and accounting live in `LLMClient`, so they behave the same for every provider.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from privacy_ci.errors import PrivacyCIError

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message."""

    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def system(content: str) -> Message:
    return Message("system", content)


def user(content: str) -> Message:
    return Message("user", content)


@dataclass(frozen=True, slots=True)
class GenerationSettings:
    """Everything that shapes a completion, sent explicitly to every provider.

    Args:
        temperature: sampling temperature (0 = greedy; the default, for reproducibility).
        top_p: nucleus sampling mass.
        max_tokens: completion length limit.
        seed: sampling seed, passed where the provider accepts one.
        stop: stop sequences.
        json_schema: when set, ask for structured output matching this JSON schema
            and parse it into `Completion.parsed`.
        schema_name: a name for the schema (some providers require one).
        grammar: a GBNF grammar constraining the output (embedded model and llama.cpp
            servers; e.g. `choice_grammar`). Exclusive with `json_schema`.
        repeat_penalty: a repetition penalty to send explicitly (llama.cpp's server
            defaults to 1.1, the in-process model to 1.0); None sends nothing.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    grammar: str | None = None
    repeat_penalty: float | None = None

    def __post_init__(self) -> None:
        if self.grammar is not None and self.json_schema is not None:
            # a programming error: LLMConfig sets neither, code sets at most one
            raise ValueError("GenerationSettings: pass either a grammar or a json_schema, not both")

    def cache_key_part(self) -> dict[str, Any]:
        data = asdict(self)
        data["stop"] = list(self.stop)
        return data


class FinishReason(StrEnum):
    STOP = "stop"
    LENGTH = "length"
    TOOL = "tool"
    ERROR = "error"
    OTHER = "other"


@dataclass(slots=True)
class Completion:
    """The result of one model call (or its explicit failure).

    Args:
        text: the raw text the model returned ("" on failure).
        parsed: the structured output, when a schema was requested and it parsed.
        finish_reason: why generation stopped.
        prompt_tokens / completion_tokens: token counts reported by the backend.
        latency_s: wall time of the successful attempt (0 for cache hits).
        retries: attempts that failed before this result.
        cached: whether it came from the cache.
        provider / model: which backend produced it.
        error: a failure message, set only when the call itself failed after all
            retries (such completions are never cached).
        parse_error: why requested structured output did not parse; the call
            succeeded, `text` keeps the raw output and `parsed` is None.
    """

    text: str
    provider: str
    model: str
    parsed: Any = None
    finish_reason: FinishReason = FinishReason.STOP
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    retries: int = 0
    cached: bool = False
    error: str | None = None
    parse_error: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "parsed": self.parsed,
            "finish_reason": self.finish_reason.value,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_s": round(self.latency_s, 4),
            "retries": self.retries,
            "cached": self.cached,
            "provider": self.provider,
            "model": self.model,
            "error": self.error,
            "parse_error": self.parse_error,
        }


class LLMError(PrivacyCIError):
    """A model call failed.

    Args:
        message: what happened.
        retryable: whether the same call may succeed later (429, 5xx, timeout,
            dropped connection).
        retry_after: seconds the server asked us to wait, if it said.
        status: the HTTP status, when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


class ContextOverflowError(PrivacyCIError):
    """The prompt does not fit the model's context window: the input is too long.

    Deliberately not an `LLMError`: no retry or other attempt can succeed, so the
    client raises it to the caller (the CLI exits 2 with this one line) instead of
    returning a failed `Completion`.

    Args:
        prompt_tokens: the prompt's size in tokens (a lower bound when `at_least`).
        n_ctx: the context window in tokens.
        model: the model's label.
        at_least: `prompt_tokens` counts the messages' text only (the chat template
            adds more).
    """

    def __init__(
        self, prompt_tokens: int, n_ctx: int, model: str, *, at_least: bool = False
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.n_ctx = n_ctx
        self.model = model
        size = f"{'at least ' if at_least else ''}{prompt_tokens:,} tokens"
        super().__init__(
            f"input too long for model {model}: the prompt is {size}, its context window"
            f" holds {n_ctx:,} tokens; shorten the input or raise n_ctx ([llm] n_ctx in"
            " privacy-ci.toml, or PRIVACY_CI_LLM_N_CTX)"
        )


@runtime_checkable
class Backend(Protocol):
    """A model provider. `complete` makes exactly one attempt.

    Raises `LLMError` on failure (with `retryable` set), `ContextOverflowError`
    when the prompt cannot fit the model; returns a `Completion` otherwise.
    Structured output that does not parse is NOT an exception: the completion
    carries the raw text and `parse_error`.
    """

    provider: str
    model: str
    base_url: str

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion: ...

    async def aclose(self) -> None: ...


def parse_structured(text: str) -> tuple[Any, str | None]:
    """Parse a model's JSON output, tolerating a fenced code block around it.

    Returns:
        (value, None) on success, (None, reason) when it does not parse.
    """
    candidate = text.strip()
    if candidate.startswith("```"):
        lines = candidate.splitlines()
        if lines and lines[0].startswith("```"):
            lines = lines[1:]
        if lines and lines[-1].strip().startswith("```"):
            lines = lines[:-1]
        candidate = "\n".join(lines).strip()
    if not candidate:
        return None, "empty output where JSON was expected"
    try:
        return json.loads(candidate), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def messages_key(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [m.as_dict() for m in messages]


def stable_hash(payload: Any) -> str:
    """sha256 of canonical JSON (cache keys, prompt hashes)."""
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
