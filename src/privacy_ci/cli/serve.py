"""`privacy-ci serve`: the Privacy Conductor's HTTP service over a document store.

``--db`` takes ``sqlite:///FILE``, a file path or ``postgresql://...`` (default:
``$PRIVACY_CI_DB``).
"""

from __future__ import annotations

from pathlib import Path

import typer

from privacy_ci.cli._common import console, escape, user_errors
from privacy_ci.cli._store_common import DbOpt

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def serve(
    db: str = DbOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    jwt_key_file: Path = typer.Option(
        ...,
        "--jwt-key-file",
        envvar="PRIVACY_CI_JWT_KEY_FILE",
        help="File holding the HS256 signing key (make one: privacy-ci token keygen).",
    ),
    denial_mode: str = typer.Option(
        "withhold",
        "--denial-mode",
        help="What the assistant's model is told about withheld documents: withhold | explain"
        " (explain needs --explain-denials).",
    ),
    explain_denials: bool = typer.Option(
        False,
        "--explain-denials",
        help="Show requesters why a document is denied (the rule, label errors, unknown ids,"
        " withheld counts). For demonstrations and debugging only: it tells a requester"
        " which documents exist and how many it may not see.",
    ),
    max_token_ttl: int = typer.Option(
        24 * 3600, "--max-token-ttl", min=1, help="Refuse tokens living longer (seconds)."
    ),
    model_slots: int = typer.Option(
        2, "--model-slots", min=1, help="Model jobs at once, per model endpoint (judge, ask)."
    ),
    model_queue: int = typer.Option(
        8, "--model-queue", min=0, help="Model jobs waiting, per endpoint (503 beyond)."
    ),
    model_share: int | None = typer.Option(
        None,
        "--model-share",
        min=1,
        help="Model jobs one requester may hold, running and waiting, per endpoint (429"
        " beyond). Default: half of --model-slots plus --model-queue, at least 1.",
    ),
    model_timeout: float = typer.Option(
        120.0, "--model-timeout", min=1.0, help="Seconds a model job may run."
    ),
    max_event_chars: int = typer.Option(
        8000, "--max-event-chars", min=100, help="Longest event /v1/judge accepts."
    ),
    cookie_secure: bool | None = typer.Option(
        None,
        "--cookie-secure/--no-cookie-secure",
        help="Mark the review page's session cookie Secure (HTTPS only). Default: on unless"
        " --host is a loopback address; turn it on behind a TLS proxy.",
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve the Privacy Conductor HTTP API (decide, retrieve, ask, judge, labels) and the
    Policy Authority's label review page (/review) with uvicorn."""
    with user_errors():
        from privacy_ci.assistant import DenialMode
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.service import ServiceSettings, load_key, serve_forever

        if denial_mode not in {m.value for m in DenialMode}:
            raise PrivacyCIError(f"--denial-mode must be withhold or explain, got {denial_mode!r}")
        key = load_key(jwt_key_file)  # fail here, with the file named, before uvicorn starts
        settings = ServiceSettings(
            jwt_key=key,
            denial_mode=DenialMode(denial_mode),
            explain_denials=explain_denials,
            max_token_lifetime_s=max_token_ttl,
            model_slots=model_slots,
            model_queue=model_queue,
            model_share=model_share,
            model_timeout_s=model_timeout,
            max_event_chars=max_event_chars,
            cookie_secure=(host not in LOOPBACK) if cookie_secure is None else cookie_secure,
        )
        mode = "explaining denials (not for production)" if explain_denials else "denials hidden"
        console.print(
            f"serving {escape(db)} on http://{escape(host)}:{port} (OpenAPI: /docs, label"
            f" review: /review); {mode}",
            highlight=False,
        )
        serve_forever(
            db,
            jwt_key_file,
            settings,
            host=host,
            port=port,
            log_level=log_level,
            access_log=log_level in ("debug", "info"),
        )
