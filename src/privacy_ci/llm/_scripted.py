"""`ScriptedTestBackend`: a stand-in model for unit tests only.

It replays scripted answers or failures. It is never selectable through
configuration (`LLMConfig.provider` has no such value), and every completion it
returns names the provider ``scripted-test-double`` so no number it produces
can pass for model accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from privacy_ci.llm._capabilities import Capabilities, Capability
from privacy_ci.llm._types import (
    Completion,
    GenerationSettings,
    LLMError,
    Message,
    parse_structured,
)

Script = Callable[[Sequence[Message], GenerationSettings], "str | LLMError"]

TEST_DOUBLE_PROVIDER = "scripted-test-double"
"""The provider name every `ScriptedTestBackend` completion carries: never a model."""


def is_test_double(backend: str | None) -> bool:
    """Whether a ``provider:model`` (or a provider) names the scripted test backend."""
    return bool(backend) and str(backend).split(":", 1)[0] == TEST_DOUBLE_PROVIDER


class ScriptedTestBackend:
    """Answers from a list (in order) or a function of the messages.

    Args:
        answers: texts or `LLMError`s to return/raise in turn (cycled when exhausted
            only if `cycle` is true), or a callable computing one per call.
        cycle: repeat the list instead of failing when it runs out.
    """

    provider = TEST_DOUBLE_PROVIDER
    capabilities = Capabilities(frozenset({Capability.GRAMMAR, Capability.JSON_SCHEMA}))
    base_url = "scripted://"

    def __init__(
        self,
        answers: Sequence[str | LLMError] | Script,
        *,
        model: str = "scripted",
        cycle: bool = False,
    ) -> None:
        self.model = model
        self._answers = answers
        self._cycle = cycle
        self.calls: list[tuple[list[Message], GenerationSettings]] = []

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        self.calls.append((list(messages), settings))
        if callable(self._answers):
            answer = self._answers(messages, settings)
        else:
            i = len(self.calls) - 1
            if i >= len(self._answers):
                if not self._cycle or not self._answers:
                    raise LLMError("scripted backend ran out of answers", retryable=False)
                i %= len(self._answers)
            answer = self._answers[i]
        if isinstance(answer, LLMError):
            raise answer
        completion = Completion(
            text=answer,
            provider=self.provider,
            model=self.model,
            prompt_tokens=sum(len(m.content.split()) for m in messages),
            completion_tokens=len(answer.split()),
        )
        if settings.json_schema is not None:
            completion.parsed, completion.parse_error = parse_structured(answer)
        return completion

    async def aclose(self) -> None:
        return None
