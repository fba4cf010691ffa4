"""`AnthropicBackend`: Claude through the Messages API (official ``anthropic`` SDK).

One attempt per `complete` (``max_retries=0``: `LLMClient` retries). System
messages are concatenated into the ``system`` parameter. Settings sent explicitly:
``max_tokens``, ``temperature``, ``stop_sequences`` (when there are any: an empty
list says nothing and is not worth a validation risk), and ``top_p`` only when it
is not 1.0 — several newer Claude models reject ``temperature`` and ``top_p``
together, and some reject sampling parameters altogether (such a model answers
400, which is reported, not retried; use a model that accepts them or change the
settings). The installed SDK (2.x) no longer has ``temperature``/``top_p``
arguments at all, so they travel in ``extra_body``. The Messages API has no seed;
none is sent.

Structured output (`GenerationSettings.json_schema`), by `structured_mode`:

- ``auto`` / ``tool``: one tool whose ``input_schema`` is the schema, forced with
  ``tool_choice={"type": "tool", "name": ...}``; `Completion.parsed` is the
  ``tool_use`` block's ``input`` and the text its JSON dump. A schema whose top
  level is not an object is wrapped as ``{"value": ...}`` and unwrapped again;
- ``response_format``: Anthropic structured outputs,
  ``output_config={"format": {"type": "json_schema", "schema": ...}}``;
- ``none``: the prompt alone asks for JSON.

When the model answers in text instead of calling the tool, the text is parsed;
output that does not parse comes back with `Completion.parse_error`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anthropic
from anthropic.types import Message as AnthropicMessage
from anthropic.types import MessageParam, ToolChoiceToolParam, ToolParam

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

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
NO_KEY_PLACEHOLDER = "not-needed"
"""Sent as the key to an Anthropic-compatible proxy configured without one."""

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL,
}
_MODES = ("auto", "tool", "response_format", "none")
_WRAP_KEY = "value"


class AnthropicBackend:
    """One Messages API call per `complete`, errors mapped to `LLMError`.

    Args:
        model: the Claude model name.
        base_url: the API root (default ``https://api.anthropic.com``).
        api_key: the key (None sends `NO_KEY_PLACEHOLDER`, for proxies).
        structured_mode: ``auto``/``tool``, ``response_format`` or ``none``.
        timeout: seconds for each phase of the request.

    Like the OpenAI backend, the SDK client is created per running event loop and
    closed when that loop shuts down, so `LLMClient.complete_sync` works.
    """

    provider = "anthropic"
    capabilities = Capabilities(frozenset({Capability.JSON_SCHEMA, Capability.TOOLS}))

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        structured_mode: StructuredMode = "auto",
        timeout: float = 120.0,
    ) -> None:
        if structured_mode not in _MODES:
            raise LLMError(
                f"structured_mode {structured_mode!r} is not available for anthropic"
                f" (use one of {', '.join(_MODES)})",
                retryable=False,
            )
        self.model = model
        self.base_url = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
        self.structured_mode: StructuredMode = structured_mode
        self.timeout = timeout
        self._api_key = api_key or NO_KEY_PLACEHOLDER
        self._pool: LoopClients[anthropic.AsyncAnthropic] = LoopClients(self._new_client)

    @classmethod
    def from_config(cls, config: LLMConfig) -> AnthropicBackend:
        """The backend for an `LLMConfig` with provider anthropic.

        Raises:
            LLMError: no API key for the Anthropic API itself, or an unusable
                structured_mode.
        """
        key = config.api_key()
        if not key and config.base_url is None:
            name = config.api_key_env or "ANTHROPIC_API_KEY"
            raise LLMError(f"provider 'anthropic' needs an API key: set {name}", retryable=False)
        return cls(
            model=config.model,
            base_url=config.base_url,
            api_key=key,
            structured_mode=config.structured_mode,
            timeout=config.timeout,
        )

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
        )

    # -- request ---------------------------------------------------------------------
    def request_options(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` (for inspection)."""
        system_parts = [m.content for m in messages if m.role == "system"]
        chat: list[MessageParam] = []
        for m in messages:
            if m.role == "assistant":
                chat.append({"role": "assistant", "content": m.content})
            elif m.role == "user":
                chat.append({"role": "user", "content": m.content})
        sampling: dict[str, Any] = {"temperature": settings.temperature}
        if settings.top_p != 1.0:
            sampling["top_p"] = settings.top_p
        options: dict[str, Any] = {
            "model": self.model,
            "messages": chat,
            "max_tokens": settings.max_tokens,
            "extra_body": sampling,
            "timeout": self.timeout,
        }
        if settings.stop:
            options["stop_sequences"] = list(settings.stop)
        if system_parts:
            options["system"] = "\n\n".join(system_parts)
        schema = settings.json_schema
        if schema is not None and self.structured_mode in ("auto", "tool"):
            tool: ToolParam = {
                "name": settings.schema_name,
                "description": "Record the answer. Call this tool with the complete answer.",
                "input_schema": _tool_schema(schema),
            }
            choice: ToolChoiceToolParam = {"type": "tool", "name": settings.schema_name}
            options["tools"] = [tool]
            options["tool_choice"] = choice
        elif schema is not None and self.structured_mode == "response_format":
            options["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return options

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        """One attempt. Raises `LLMError` (``retryable`` set) on failure."""
        if settings.grammar is not None:
            raise LLMError(
                "anthropic: GBNF grammars are not supported; use a json_schema instead",
                retryable=False,
            )
        client = await self._pool.get()
        options = self.request_options(messages, settings)
        start = time.perf_counter()
        try:
            response: object = await client.messages.create(**options)
        except anthropic.APIError as exc:
            raise self._map_error(exc) from exc
        except ValueError as exc:  # a 200 whose JSON body does not decode
            raise LLMError(
                f"anthropic ({self.base_url}): malformed response body: {exc}",
                retryable=True,
                status=200,
            ) from exc
        except anthropic.AnthropicError as exc:  # raised by the SDK before any request
            raise LLMError(f"anthropic ({self.base_url}): {exc}", retryable=False) from exc
        latency = time.perf_counter() - start
        return self._to_completion(response, settings, latency)

    def _to_completion(
        self, response: object, settings: GenerationSettings, latency: float
    ) -> Completion:
        schema = settings.json_schema
        use_tool = schema is not None and self.structured_mode in ("auto", "tool")
        try:
            if not isinstance(response, AnthropicMessage):
                raise TypeError(f"expected a message, got {type(response).__name__}")
            texts: list[str] = []
            tool_input: Any = None
            found_tool = False
            for block in response.content:
                if block.type == "text":
                    texts.append(block.text)
                elif (
                    block.type == "tool_use"
                    and use_tool
                    and not found_tool
                    and block.name == settings.schema_name
                ):
                    tool_input, found_tool = block.input, True
            finish = _FINISH.get(str(response.stop_reason), FinishReason.OTHER)
            prompt_tokens = int(response.usage.input_tokens)
            completion_tokens = int(response.usage.output_tokens)
            raw = {"id": response.id, "model": response.model, "stop_reason": response.stop_reason}
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise LLMError(
                f"anthropic ({self.base_url}): malformed response body:"
                f" {type(exc).__name__}: {exc}",
                retryable=True,
                status=200,
            ) from exc
        completion = Completion(
            text="".join(texts),
            provider=self.provider,
            model=self.model,
            finish_reason=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            raw=raw,
        )
        if found_tool and schema is not None:
            value = tool_input
            if _is_wrapped(schema) and isinstance(value, dict):
                value = value.get(_WRAP_KEY)
            completion.parsed = value
            completion.text = json.dumps(value, ensure_ascii=False)
        elif schema is not None:
            completion.parsed, completion.parse_error = parse_structured(completion.text)
        return completion

    def _map_error(self, exc: anthropic.APIError) -> LLMError:
        return map_sdk_error(exc, anthropic, f"anthropic ({self.base_url})", self.timeout)

    async def aclose(self) -> None:
        """Close the client of the running event loop (if one was created)."""
        await self._pool.aclose()


def _is_wrapped(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") != "object"


def _tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Tool input must be an object: wrap any other schema as ``{"value": schema}``."""
    if not _is_wrapped(schema):
        return schema
    return {"type": "object", "properties": {_WRAP_KEY: schema}, "required": [_WRAP_KEY]}
