"""`privacy-ci mcp serve`: the gate as an MCP server over stdio, for one requester.

Named ``mcp_server`` so that the ``mcp`` package is not shadowed when this folder
is on ``sys.path`` (``python src/privacy_ci/cli/main.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from privacy_ci.cli._common import user_errors

app = typer.Typer(
    help="The gate as an MCP server (tools: retrieve, decide) for one requester.",
    no_args_is_help=True,
)

TOKEN_ENV = "PRIVACY_CI_TOKEN"


def _read_token(token_file: Path | None) -> str:
    from privacy_ci.errors import PrivacyCIError

    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise PrivacyCIError(
                f"cannot read the token file {token_file}: {exc.strerror}"
            ) from None
        if not token:
            raise PrivacyCIError(f"the token file {token_file} is empty")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise PrivacyCIError(
            f"no requester token: give --token-file FILE or set ${TOKEN_ENV}"
            " (make one: privacy-ci token mint AGENT --key-file KEY)"
        )
    return token


@app.command("serve")
def mcp_serve(
    db: str | None = typer.Option(
        None,
        "--db",
        envvar="PRIVACY_CI_DB",
        help="In-process: the store (sqlite:///FILE, a path, postgresql://...); needs"
        " --jwt-key-file.",
    ),
    jwt_key_file: Path | None = typer.Option(
        None,
        "--jwt-key-file",
        envvar="PRIVACY_CI_JWT_KEY_FILE",
        help="In-process: the service's HS256 key, to verify the token.",
    ),
    url: str | None = typer.Option(
        None, "--url", help="Over HTTP: the running service, e.g. http://127.0.0.1:8000."
    ),
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        envvar="PRIVACY_CI_TOKEN_FILE",
        help=f"The requester's token (else ${TOKEN_ENV}). It fixes who the agent acts for.",
    ),
) -> None:
    """Serve the tools `retrieve` and `decide` over stdio for the token's requester.

    The requester comes from the token only; no tool argument can change it. Give
    --db and --jwt-key-file to run the gate in-process, or --url to call the service.
    A token that fails is one error before serving, in both modes; one that stops
    working while serving (expired, revoked by signing out, refused by the service)
    stops the server with one error line (exit 2). Nothing but the MCP protocol is
    written to stdout.
    """
    with user_errors():
        from privacy_ci.adapters import HttpGatedSource, LocalGatedSource
        from privacy_ci.adapters.mcp import serve_stdio
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.service import load_key
        from privacy_ci.store import DocumentStore

        if (db is None) == (url is None):
            raise PrivacyCIError(
                "give either --db (with --jwt-key-file) to gate in-process, or --url to call"
                " the service"
                + (", not both (--db may come from $PRIVACY_CI_DB)" if db and url else "")
            )
        token = _read_token(token_file)
        if url is not None:
            with HttpGatedSource(url, token) as remote:
                remote.check()  # a token the service refuses fails here, before serving
                serve_stdio(remote)
            return
        assert db is not None
        if jwt_key_file is None:
            raise PrivacyCIError("--db needs --jwt-key-file (the key the tokens are signed with)")
        key = load_key(jwt_key_file)
        DocumentStore(db, readonly=True).close()  # a mistyped --db is an error, not a new store
        store = DocumentStore(db)
        try:
            serve_stdio(LocalGatedSource(store, key, token))  # a bad token fails before serving
        finally:
            store.close()
