"""LLM configuration from `privacy-ci.toml`, the environment and CLI flags.

Precedence (later wins): built-in defaults, the `[llm]` table of
`privacy-ci.toml` (current directory, else `$PRIVACY_CI_CONFIG`), environment
variables `PRIVACY_CI_LLM_*`, then explicit overrides (CLI flags). API keys are
never stored in the file: the config names the environment variable that holds one.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm._types import GenerationSettings

Provider = Literal["embedded", "openai-compatible", "openai", "anthropic"]
StructuredMode = Literal[
    "auto", "response_format", "json_object", "guided_json", "grammar", "tool", "none"
]

ENV_PREFIX = "PRIVACY_CI_LLM_"
DEFAULT_API_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "openai-compatible": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "embedded": "",
}


class PriceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class LLMConfig(BaseModel):
    """Which model to call and how.

    Args:
        provider: ``embedded`` (default: a small GGUF model in-process, no network),
            ``openai-compatible`` (vLLM, Ollama, llama.cpp server, SGLang),
            ``openai`` or ``anthropic``.
        model: model name (for embedded: a label; the file is `model_path`).
        base_url: server URL for OpenAI-compatible providers.
        api_key_env: the environment variable holding the API key.
        model_path: a GGUF file for the embedded provider (default: the packaged SmolLM2).
        structured_mode: how to request JSON-schema output (auto picks per provider).
    """

    model_config = ConfigDict(extra="forbid")

    provider: Provider = "embedded"
    model: str = "smollm2-135m-instruct"
    base_url: str | None = None
    api_key_env: str | None = None
    model_path: str | None = None
    structured_mode: StructuredMode = "auto"
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(512, ge=1)
    seed: int | None = 0
    concurrency: int = Field(4, ge=1)
    timeout: float = Field(120.0, gt=0)
    retries: int = Field(4, ge=0)
    cache: bool = True
    cache_path: str | None = None
    n_ctx: int = Field(8192, ge=256)
    n_threads: int | None = None
    prices: dict[str, PriceConfig] = Field(default_factory=dict)

    def generation_settings(self) -> GenerationSettings:
        """The sampling settings this configuration asks for (temperature, top_p, ...)."""
        return GenerationSettings(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            seed=self.seed,
        )

    def api_key(self) -> str | None:
        """The API key from the environment (None when unset)."""
        name = self.api_key_env or DEFAULT_API_KEY_ENV.get(self.provider, "")
        return os.environ.get(name) if name else None


_ENV_FIELDS = {
    "provider", "model", "base_url", "api_key_env", "model_path", "structured_mode",
    "temperature", "top_p", "max_tokens", "seed", "concurrency", "timeout", "retries",
    "cache", "cache_path", "n_ctx", "n_threads",
}  # fmt: skip


def _config_file(explicit: Path | None) -> Path | None:
    if explicit is not None:
        if not explicit.exists():
            raise PrivacyCIError(f"config file {explicit} does not exist")
        return explicit
    env = os.environ.get("PRIVACY_CI_CONFIG")
    if env:
        return Path(env) if Path(env).exists() else None
    local = Path("privacy-ci.toml")
    return local if local.exists() else None


def _file_table(path: Path) -> dict[str, Any]:
    """The ``[llm]`` table of a privacy-ci.toml file.

    Raises:
        PrivacyCIError: the file is too large, not UTF-8 or not valid TOML (naming it).
    """
    from privacy_ci._files import read_user_file
    from privacy_ci._structured import MAX_INPUT_BYTES_ENV, max_input_bytes

    data = read_user_file(path, limit=max_input_bytes(), env=MAX_INPUT_BYTES_ENV)
    try:
        table = tomllib.loads(data.decode("utf-8")).get("llm", {})
    except tomllib.TOMLDecodeError as exc:
        raise PrivacyCIError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PrivacyCIError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except ValueError as exc:  # an integer of thousands of digits
        raise PrivacyCIError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise PrivacyCIError(f"{path}: invalid TOML: values nested too deeply") from None
    if not isinstance(table, dict):
        raise PrivacyCIError(f"{path}: [llm] must be a table")
    return table


MODEL_FIELDS = ("provider", "model", "base_url", "model_path")
"""The settings that choose a model (the others only tune how it is called)."""


def model_configured(
    overrides: dict[str, Any] | None = None, config_file: Path | None = None
) -> bool:
    """Whether someone chose a model: a provider, model, server or model file set by an
    override (a CLI flag), a ``PRIVACY_CI_LLM_*`` variable or the ``[llm]`` table of
    privacy-ci.toml, rather than left at the built-in default (the embedded model).

    Raises:
        PrivacyCIError: the config file cannot be read.
    """
    if any((overrides or {}).get(name) is not None for name in MODEL_FIELDS):
        return True
    if any(os.environ.get(ENV_PREFIX + name.upper()) for name in MODEL_FIELDS):
        return True
    path = _config_file(config_file)
    return path is not None and any(_file_table(path).get(n) is not None for n in MODEL_FIELDS)


def load_llm_config(
    overrides: dict[str, Any] | None = None, config_file: Path | None = None
) -> LLMConfig:
    """Merge defaults, `privacy-ci.toml`, `PRIVACY_CI_LLM_*` and `overrides`.

    Raises:
        PrivacyCIError: naming the file or variable and the field that is wrong.
    """
    merged: dict[str, Any] = {}
    source = "defaults"
    path = _config_file(config_file)
    if path is not None:
        merged.update(_file_table(path))
        source = str(path)
    for name in _ENV_FIELDS:
        value = os.environ.get(ENV_PREFIX + name.upper())
        if value is not None and value != "":
            merged[name] = value
            source = f"{source} + environment"
    for key, value in (overrides or {}).items():
        if value is not None:
            merged[key] = value
    try:
        return LLMConfig.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise PrivacyCIError(f"LLM configuration ({source}): {problems}") from None
