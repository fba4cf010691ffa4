"""`privacy-ci token ...`: signing keys and tokens (JWT HS256) for local use.

Named ``tokens`` so that the stdlib ``token`` module is not shadowed when this
folder is on ``sys.path`` (``python src/privacy_ci/cli/main.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from privacy_ci.cli._common import console, print_json, user_errors
from privacy_ci.cli._store_common import JsonOpt, open_store_readonly

app = typer.Typer(help="Signing keys and tokens (JWT HS256) for local use.", no_args_is_help=True)


@app.command("keygen")
def token_keygen(
    out: Path = typer.Option(..., "--out", help="Write the key to this file (mode 600)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a fresh random HS256 signing key."""
    with user_errors():
        import os

        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.service import generate_key

        if out.exists() and not force:
            raise PrivacyCIError(f"{out} exists (use --force to overwrite)")
        try:
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(generate_key() + "\n")
        except OSError as exc:
            raise PrivacyCIError(f"cannot write the key to {out}: {exc.strerror}") from None
        console.print(f"wrote a 256-bit key to {out}", highlight=False, markup=False)


@app.command("mint")
def token_mint(
    agent_id: str = typer.Argument(..., help="The agent (the token's sub)."),
    key_file: Path = typer.Option(
        ..., "--key-file", envvar="PRIVACY_CI_JWT_KEY_FILE", help="The signing key file."
    ),
    role: str | None = typer.Option(None, "--role", help="Role acted in (default: from --db)."),
    context: str | None = typer.Option(None, "--context", help="Context (default: from --db)."),
    db: str | None = typer.Option(
        None,
        "--db",
        envvar="PRIVACY_CI_DB",
        help="Read the agent's role and context from this store.",
    ),
    ttl: int = typer.Option(
        3600, "--ttl", min=1, max=24 * 3600, help="Seconds until it expires (at most a day)."
    ),
    authority: bool = typer.Option(False, "--authority", help="Add the policy-authority claim."),
    as_json: bool = JsonOpt,
) -> None:
    """Mint a signed token for local use (prints it)."""
    with user_errors():
        from privacy_ci.errors import PrivacyCIError
        from privacy_ci.service import issue_token, load_key

        key = load_key(key_file)
        if (role is None or context is None) and db is not None:
            store = open_store_readonly(db)
            try:
                agent = store.agents().get(agent_id)
            finally:
                store.close()
            if agent is None:
                raise PrivacyCIError(f"unknown agent {agent_id!r} in {db}")
            if role is None:
                if len(agent.roles) != 1:
                    raise PrivacyCIError(
                        f"agent {agent_id!r} holds roles {sorted(agent.roles)}: pass --role"
                    )
                role = next(iter(agent.roles))
            if context is None:
                context = agent.roles.get(role)
        if role is None or context is None:
            raise PrivacyCIError("pass --role and --context, or --db to read them from a store")
        token = issue_token(key, agent_id, role, context, ttl, authority=authority)
        if as_json:
            payload: dict[str, Any] = {
                "token": token,
                "sub": agent_id,
                "role": role,
                "context": context,
                "ttl": ttl,
                "authority": authority,
            }
            print_json(payload)
        else:
            typer.echo(token)
