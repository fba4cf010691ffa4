"""`OpenAICompatibleBackend`: OpenAI and every server speaking its chat API.

vLLM, llama.cpp server, Ollama, SGLang and OpenAI itself, over the official
``openai.AsyncOpenAI`` client. One attempt per `complete` (the SDK's own retries
are off: `LLMClient` retries, with backoff that honours ``Retry-After``). Every
generation setting is sent explicitly (temperature, top_p, max tokens, seed,
stop), and the base URL always is too, so ``OPENAI_BASE_URL`` in the environment
never silently redirects a run.

Structured output (`GenerationSettings.json_schema`), by `structured_mode`:

- ``response_format`` (and ``auto``): ``{"type": "json_schema", "json_schema":
  {"name", "schema", "strict": true}}`` (OpenAI, llama.cpp server, recent vLLM);
- ``guided_json``: vLLM's ``extra_body={"guided_json": schema}`` (older vLLM; newer
  releases prefer ``response_format``);
- ``grammar``: llama.cpp server's ``extra_body={"json_schema": schema}`` (converted
  to a GBNF grammar by the server);
- ``tool``: a forced function call whose parameters are the schema;
- ``none``: nothing is sent; the prompt alone asks for JSON.

Output that does not parse is returned with `Completion.parse_error` and the raw
text, never raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, Literal

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageParam,
    ChatCompletionNamedToolChoiceParam,
    ChatCompletionToolUnionParam,
)
from openai.types.chat.completion_create_params import ResponseFormat

from privacy_ci.llm._capabilities import Capabilities, Capability
from privacy_ci.llm._config import LLMConfig, StructuredMode
from privacy_ci.llm._transport import (
    LoopClients,
    map_sdk_error,
)
from privacy_ci.llm._types import (
    Completion,
    FinishReason,
    GenerationSettings,
    LLMError,
    Message,
    parse_structured,
)

OPENAI_BASE_URL = "https://api.openai.com/v1"
NO_KEY_PLACEHOLDER = "not-needed"
"""Sent as the API key to local servers that need none (the SDK insists on one)."""

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL,
    "function_call": FinishReason.TOOL,
}
_log = logging.getLogger(__name__)
_MODES = ("auto", "response_format", "json_object", "guided_json", "grammar", "tool", "none")


class OpenAICompatibleBackend:
    """One chat-completions call per `complete`, errors mapped to `LLMError`.

    Args:
        model: the model name the server expects.
        base_url: the API root (``.../v1``); None means OpenAI itself.
        api_key: the key; None sends `NO_KEY_PLACEHOLDER` (local servers).
        provider: ``"openai"`` or ``"openai-compatible"``; OpenAI gets
            ``max_completion_tokens``, other servers ``max_tokens``.
        structured_mode: how a JSON schema is requested (see the module docstring).
        timeout: seconds for each phase of the request (connect, write, read).

    The `openai.AsyncOpenAI` client is created lazily, one per running event loop,
    and closed when that loop shuts down (``asyncio.run`` finalises async
    generators, which is how we hook in), so `LLMClient.complete_sync`, which runs a
    fresh loop per call, works and leaks no connections. `aclose` closes the
    current loop's client.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: Literal["openai", "openai-compatible"] = "openai-compatible",
        structured_mode: StructuredMode = "auto",
        timeout: float = 120.0,
    ) -> None:
        # ValueError: programming errors (LLMConfig validates both fields from users)
        if provider not in ("openai", "openai-compatible"):
            raise ValueError(f"provider must be 'openai' or 'openai-compatible', not {provider!r}")
        if structured_mode not in _MODES:
            raise ValueError(f"unknown structured_mode {structured_mode!r}")
        if base_url is None and provider == "openai-compatible":
            raise LLMError(
                "provider 'openai-compatible' needs base_url (e.g. http://127.0.0.1:8000/v1"
                " for vLLM, http://127.0.0.1:8080/v1 for llama.cpp server)",
                retryable=False,
            )
        self.provider: str = provider
        # OpenAI-compatible servers (llama.cpp, vLLM) take a GBNF grammar; OpenAI does not
        features = {Capability.JSON_SCHEMA, Capability.TOOLS}
        if provider == "openai-compatible":
            features.add(Capability.GRAMMAR)
        self.capabilities = Capabilities(frozenset(features))
        self.model = model
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self.structured_mode: StructuredMode = structured_mode
        self.timeout = timeout
        self._api_key = api_key or NO_KEY_PLACEHOLDER
        self._pool: LoopClients[openai.AsyncOpenAI] = LoopClients(self._new_client)

    @classmethod
    def from_config(cls, config: LLMConfig) -> OpenAICompatibleBackend:
        """The backend for an `LLMConfig` with provider openai or openai-compatible.

        Raises:
            LLMError: base_url missing for openai-compatible, or no API key for OpenAI.
        """
        if config.provider not in ("openai", "openai-compatible"):  # make_backend routes it
            raise ValueError(f"not an OpenAI-style provider: {config.provider!r}")
        key = config.api_key()
        if config.provider == "openai" and not key and config.base_url is None:
            name = config.api_key_env or "OPENAI_API_KEY"
            raise LLMError(f"provider 'openai' needs an API key: set {name}", retryable=False)
        return cls(
            model=config.model,
            base_url=config.base_url,
            api_key=key,
            provider="openai" if config.provider == "openai" else "openai-compatible",
            structured_mode=config.structured_mode,
            timeout=config.timeout,
        )

    def _new_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
        )

    # -- request ---------------------------------------------------------------------
    def request_options(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` (for inspection)."""
        chat: list[ChatCompletionMessageParam] = []
        for m in messages:
            if m.role == "system":
                chat.append({"role": "system", "content": m.content})
            elif m.role == "assistant":
                chat.append({"role": "assistant", "content": m.content})
            else:
                chat.append({"role": "user", "content": m.content})
        options: dict[str, Any] = {
            "model": self.model,
            "messages": chat,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "seed": settings.seed,
            "stop": list(settings.stop) or None,
        }
        if self.provider == "openai":
            options["max_completion_tokens"] = settings.max_tokens
        else:
            options["max_tokens"] = settings.max_tokens
        extra: dict[str, Any] = {}
        if settings.repeat_penalty is not None:
            extra["repeat_penalty"] = settings.repeat_penalty
        if settings.grammar is not None:
            extra["grammar"] = settings.grammar  # llama.cpp servers take GBNF as "grammar"
        schema = settings.json_schema
        mode = self.structured_mode
        if schema is not None and mode == "json_object":
            # llama-cpp-python's server: a schema-constrained JSON object
            options["response_format"] = {"type": "json_object", "schema": schema}
        elif schema is not None and mode != "none":
            if mode in ("auto", "response_format"):
                response_format: ResponseFormat = {
                    "type": "json_schema",
                    "json_schema": {"name": settings.schema_name, "schema": schema, "strict": True},
                }
                options["response_format"] = response_format
            elif mode == "guided_json":
                extra["guided_json"] = schema
            elif mode == "grammar":
                extra["json_schema"] = schema  # llama.cpp's native llama-server
            else:  # tool
                tools: list[ChatCompletionToolUnionParam] = [
                    {
                        "type": "function",
                        "function": {
                            "name": settings.schema_name,
                            "parameters": schema,
                            "description": "Return the answer in this structure.",
                        },
                    }
                ]
                choice: ChatCompletionNamedToolChoiceParam = {
                    "type": "function",
                    "function": {"name": settings.schema_name},
                }
                options["tools"] = tools
                options["tool_choice"] = choice
        if extra:
            options["extra_body"] = extra
        return options

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        """One attempt. Raises `LLMError` (``retryable`` set) on failure."""
        client = await self._pool.get()
        start = time.perf_counter()
        try:
            response = await self._create(client, self.request_options(messages, settings))
        except LLMError as error:
            if not self._json_schema_rejected(error, settings):
                raise
            # A server without json_schema response_format (llama-cpp-python's answers
            # 500 "Input should be 'text' or 'json_object'"): use its schema-constrained
            # json_object from now on, and ask again at once.
            _log.warning(
                "%s does not accept response_format json_schema; using json_object", self.base_url
            )
            self.structured_mode = "json_object"
            response = await self._create(client, self.request_options(messages, settings))
        latency = time.perf_counter() - start
        return self._to_completion(response, settings, latency)

    def _json_schema_rejected(self, error: LLMError, settings: GenerationSettings) -> bool:
        return (
            self.structured_mode == "auto"
            and self.provider == "openai-compatible"
            and settings.json_schema is not None
            and error.status in (400, 422, 500)
            and "json_schema" in str(error)
        )

    async def _create(self, client: openai.AsyncOpenAI, options: dict[str, Any]) -> object:
        try:
            response: object = await client.chat.completions.create(**options)
        except openai.APIError as exc:
            raise self._map_error(exc) from exc
        except ValueError as exc:  # a 200 whose JSON body does not decode
            raise LLMError(
                f"{self.provider} ({self.base_url}): malformed response body: {exc}",
                retryable=True,
                status=200,
            ) from exc
        except openai.OpenAIError as exc:  # raised by the SDK before any request
            raise LLMError(f"{self.provider} ({self.base_url}): {exc}", retryable=False) from exc
        return response

    def _to_completion(
        self, response: object, settings: GenerationSettings, latency: float
    ) -> Completion:
        try:
            if not isinstance(response, ChatCompletion):
                raise TypeError(f"expected a chat completion, got {type(response).__name__}")
            choice = response.choices[0]
            message = choice.message
            text = message.content or ""
            if self.structured_mode == "tool" and settings.json_schema is not None:
                for call in message.tool_calls or []:
                    if call.type == "function":
                        text = call.function.arguments
                        break
            finish = _FINISH.get(str(choice.finish_reason), FinishReason.OTHER)
            usage = response.usage
            prompt_tokens = int(usage.prompt_tokens) if usage is not None else 0
            completion_tokens = int(usage.completion_tokens) if usage is not None else 0
            raw = {
                "id": response.id,
                "system_fingerprint": response.system_fingerprint,
                "model": response.model,
            }
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise LLMError(
                f"{self.provider} ({self.base_url}): malformed response body:"
                f" {type(exc).__name__}: {exc}",
                retryable=True,
                status=200,
            ) from exc
        completion = Completion(
            text=text,
            provider=self.provider,
            model=self.model,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            raw=raw,
        )
        if settings.json_schema is not None:
            completion.parsed, completion.parse_error = parse_structured(text)
        return completion

    def _map_error(self, exc: openai.APIError) -> LLMError:
        return map_sdk_error(exc, openai, f"{self.provider} ({self.base_url})", self.timeout)

    async def aclose(self) -> None:
        """Close the client of the running event loop (if one was created)."""
        await self._pool.aclose()
