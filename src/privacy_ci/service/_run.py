"""Run the service with uvicorn (shared by ``privacy-ci serve`` and ``python -m``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from privacy_ci.assistant import DenialMode
from privacy_ci.service._auth import load_key


def serve_forever(
    db: str,
    jwt_key_file: Path | str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    denial_mode: DenialMode | str = DenialMode.WITHHOLD,
    log_level: str = "warning",
    access_log: bool = False,
) -> None:
    """Open the store and serve the app until interrupted.

    Args:
        db: the store URL (``sqlite:///FILE``, a path, or ``postgresql://...``).
        jwt_key_file: a file holding the HS256 key.
        host / port: where to listen.
        denial_mode: ``withhold`` or ``explain``.
        log_level: uvicorn's log level.
        access_log: log every request.
    """
    import uvicorn

    from privacy_ci.service._app import ServiceSettings, create_app
    from privacy_ci.store import DocumentStore

    key = load_key(jwt_key_file)
    store = DocumentStore(db)
    app = create_app(store, ServiceSettings(jwt_key=key, denial_mode=DenialMode(denial_mode)))
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=access_log)
    finally:
        store.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m privacy_ci.service --db URL --jwt-key-file F [--host H] [--port N]``."""
    parser = argparse.ArgumentParser(prog="python -m privacy_ci.service")
    parser.add_argument("--db", required=True)
    parser.add_argument("--jwt-key-file", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--denial-mode", default="withhold", choices=[m.value for m in DenialMode])
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    serve_forever(
        args.db,
        args.jwt_key_file,
        host=args.host,
        port=args.port,
        denial_mode=args.denial_mode,
        log_level=args.log_level,
    )
