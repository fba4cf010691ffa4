"""`privacy-ci llm ...` and `privacy-ci cache ...`: call a model; manage the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from privacy_ci.cli._common import console, err_console, escape, print_json, user_errors

app = typer.Typer(
    help="Call a configured model (embedded, OpenAI-compatible, OpenAI, Anthropic).",
    no_args_is_help=True,
)
cache_app = typer.Typer(help="Inspect or clear the LLM response cache.", no_args_is_help=True)

# The model options every command that calls a model takes (shared defaults).
ProviderOpt = typer.Option(
    None, help="embedded | openai-compatible | openai | anthropic (default: config)."
)
ModelOpt = typer.Option(None, help="Model name.")
BaseUrlOpt = typer.Option(None, "--base-url", help="Server URL (OpenAI-compatible).")
TemperatureOpt = typer.Option(None, help="Sampling temperature (default 0).")
MaxTokensOpt = typer.Option(None, "--max-tokens")
SeedOpt = typer.Option(None, help="Sampling seed (default 0).")
NoCacheOpt = typer.Option(False, "--no-cache", help="Do not read or write the cache.")
ConfigOpt = typer.Option(None, "--config", help="A privacy-ci.toml file.")


def llm_overrides(
    provider: str | None,
    model: str | None,
    base_url: str | None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    concurrency: int | None = None,
    no_cache: bool = False,
) -> dict[str, Any]:
    """CLI flags as config overrides (None means 'not given')."""
    out: dict[str, Any] = {
        "provider": provider,
        "model": model,
        "base_url": base_url,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "seed": seed,
        "concurrency": concurrency,
    }
    if no_cache:
        out["cache"] = False
    return out


@app.command()
def ask(
    prompt: str = typer.Argument(..., help="The user message."),
    system_prompt: str | None = typer.Option(None, "--system", help="A system message."),
    provider: str | None = ProviderOpt,
    model: str | None = ModelOpt,
    base_url: str | None = BaseUrlOpt,
    temperature: float | None = TemperatureOpt,
    max_tokens: int | None = MaxTokensOpt,
    seed: int | None = SeedOpt,
    schema: Path | None = typer.Option(
        None, help="A JSON-schema file: ask for structured output matching it."
    ),
    no_cache: bool = NoCacheOpt,
    config_file: Path | None = ConfigOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the completion as JSON."),
) -> None:
    """Send one prompt to the configured model and print the answer with its accounting."""
    with user_errors():
        from dataclasses import replace

        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.llm import load_llm_config, make_client, system, user

        config = load_llm_config(
            llm_overrides(provider, model, base_url, temperature, max_tokens, seed, None, no_cache),
            config_file,
        )
        settings = config.generation_settings()
        if schema is not None:
            from privacy_ci._structured import DuplicateKeyError, load_json

            try:
                settings = replace(settings, json_schema=load_json(schema.read_text()))
            except (OSError, json.JSONDecodeError, DuplicateKeyError) as exc:
                raise PrivacyCIError(f"{schema}: not a readable JSON schema ({exc})") from None

        def note_retry(attempt: int, error: Exception, delay: float) -> None:
            err_console.print(
                f"[yellow]retry {attempt}[/] in {delay:.1f}s: {escape(str(error))}",
                highlight=False,
            )

        client = make_client(config, on_retry=note_retry)
        messages = ([system(system_prompt)] if system_prompt else []) + [user(prompt)]
        completion = client.complete_sync(messages, settings)
        payload = {
            **completion.as_dict(),
            "settings": settings.cache_key_part(),
            "usage": client.usage.as_dict(),
        }
        if as_json:
            print_json(payload)
        else:
            if completion.ok:
                console.print(completion.text, markup=False, highlight=False)
            else:
                err_console.print(
                    f"[bold red]failed:[/] {escape(completion.error or '')}", highlight=False
                )
            if completion.parse_error:
                err_console.print(
                    f"[yellow]structured output did not parse:[/] {escape(completion.parse_error)}",
                    highlight=False,
                )
            model_name = escape(f"{completion.provider}:{completion.model}")
            console.print(
                f"[dim]{model_name}  {completion.prompt_tokens}+"
                f"{completion.completion_tokens} tokens  {completion.latency_s:.2f}s"
                f"  retries {completion.retries}  cached {completion.cached}[/]"
            )
        if not completion.ok:
            raise typer.Exit(1)


@app.command("config")
def show_config(
    config_file: Path | None = ConfigOpt,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Print the effective LLM configuration (API keys are never printed)."""
    with user_errors():
        from privacy_ci.llm import load_llm_config

        config = load_llm_config(None, config_file)
        data = config.model_dump()
        data["api_key_set"] = config.api_key() is not None
        if as_json:
            print_json(data)
        else:
            for key, value in data.items():
                console.print(f"{key:16} {value}", highlight=False, markup=False)


def _cache(path: Path | None) -> Any:
    from privacy_ci.llm import ResponseCache, default_cache_path, load_llm_config

    if path is None:
        cfg = load_llm_config()
        path = Path(cfg.cache_path) if cfg.cache_path else default_cache_path()
    return ResponseCache(path)


@cache_app.command("stats")
def cache_stats(
    path: Path | None = typer.Option(None, help="Cache database (default: from config)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """How many completions are cached, per provider and model."""
    with user_errors():
        stats = _cache(path).stats()
        if as_json:
            print_json(stats)
            return
        console.print(
            f"{stats['path']}: {stats['entries']} entries, {stats['bytes']:,} bytes",
            markup=False,
            highlight=False,
        )
        for row in stats["by_model"]:
            console.print(
                f"  {row['provider']}:{row['model']}  {row['entries']}",
                markup=False,
                highlight=False,
            )


@cache_app.command("clear")
def cache_clear(
    path: Path | None = typer.Option(None, help="Cache database (default: from config)."),
    model: str | None = typer.Option(None, help="Only this model's entries."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Delete cached completions."""
    with user_errors():
        removed = _cache(path).clear(model)
        if as_json:
            print_json({"removed": removed})
        else:
            console.print(f"removed {removed} cached completion(s)")
