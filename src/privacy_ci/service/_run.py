"""Run the service with uvicorn (shared by ``privacy-ci serve`` and ``python -m``)."""

from __future__ import annotations

import argparse
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from privacy_ci.assistant import DenialMode
from privacy_ci.errors import PrivacyCIError
from privacy_ci.service._auth import load_key

if TYPE_CHECKING:
    from privacy_ci.service._app import ServiceSettings


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port), bound before uvicorn starts.

    Binding here turns a busy port or a bad address into one clear error instead
    of uvicorn's log lines; IPPROTO_TCP makes asyncio set TCP_NODELAY on accepted
    connections (without it every response waits for the client's delayed ACK).

    Raises:
        PrivacyCIError: the address cannot be resolved or bound.
    """
    try:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise PrivacyCIError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise PrivacyCIError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            + (" (another process is using the port?)" if exc.errno == 98 else "")
        ) from None
    sock.set_inheritable(True)
    return sock


def serve_forever(
    db: str,
    jwt_key_file: Path | str,
    settings: ServiceSettings | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    access_log: bool = False,
) -> None:
    """Open the store and serve the app until interrupted.

    Args:
        db: the store URL (``sqlite:///FILE``, a path, or ``postgresql://...``).
        jwt_key_file: a file holding the HS256 key.
        settings: what the service reveals and how much work it takes on (its
            `jwt_key` is replaced by the file's); default `ServiceSettings()`.
        host / port: where to listen.
        log_level: uvicorn's log level.
        access_log: log every request.

    Raises:
        PrivacyCIError: the key, the store or the address cannot be used.
    """
    import uvicorn

    from privacy_ci.service._app import ServiceSettings, create_app
    from privacy_ci.store import DocumentStore

    key = load_key(jwt_key_file)
    config = ServiceSettings(jwt_key=key) if settings is None else replace(settings, jwt_key=key)
    sock = listen(host, port)
    try:
        store = DocumentStore(db)
    except BaseException:
        sock.close()
        raise
    try:
        app = create_app(store, config)
        server = uvicorn.Server(
            uvicorn.Config(app, log_level=log_level, access_log=access_log, timeout_keep_alive=5)
        )
        server.run(sockets=[sock])
    finally:
        store.close()
        sock.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m privacy_ci.service --db URL --jwt-key-file F [--host H] [--port N]``."""
    parser = argparse.ArgumentParser(prog="python -m privacy_ci.service")
    parser.add_argument("--db", required=True)
    parser.add_argument("--jwt-key-file", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--denial-mode", default="withhold", choices=[m.value for m in DenialMode])
    parser.add_argument("--explain-denials", action="store_true")
    parser.add_argument("--model-slots", type=int, default=2)
    parser.add_argument("--model-queue", type=int, default=8)
    parser.add_argument("--cookie-secure", action="store_true", help="review cookie: HTTPS only")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    from privacy_ci.service._app import ServiceSettings

    try:
        settings = ServiceSettings(
            jwt_key=b"",  # replaced by the key file's
            denial_mode=DenialMode(args.denial_mode),
            explain_denials=args.explain_denials,
            model_slots=args.model_slots,
            model_queue=args.model_queue,
            cookie_secure=args.cookie_secure,
        )
        serve_forever(
            args.db,
            args.jwt_key_file,
            settings,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
        )
    except PrivacyCIError as exc:
        parser.exit(2, f"error: {exc}\n")
