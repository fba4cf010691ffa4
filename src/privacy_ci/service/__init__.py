"""The HTTP face of the Privacy Conductor: FastAPI app, token identity, audit.

    from privacy_ci.service import ServiceSettings, create_app, issue_token
    app = create_app(store, ServiceSettings(jwt_key=key))   # serve with uvicorn
    token = issue_token(key, "D01", "Doctor", "Medical", ttl=3600)

``privacy-ci serve --db URL --jwt-key-file F`` (or ``python -m privacy_ci.service``)
runs it with uvicorn.
"""

from privacy_ci.service._app import ServiceSettings, create_app
from privacy_ci.service._auth import (
    ALGORITHM,
    AuthError,
    Forbidden,
    TokenClaims,
    check_key,
    generate_key,
    issue_token,
    load_key,
    requester_from_claims,
    verify_token,
)
from privacy_ci.service._demo import demo_assistant
from privacy_ci.service._run import serve_forever
from privacy_ci.store import AuditLog, AuditReport

__all__ = [
    "ALGORITHM",
    "AuditLog",
    "AuditReport",
    "AuthError",
    "Forbidden",
    "ServiceSettings",
    "TokenClaims",
    "check_key",
    "create_app",
    "demo_assistant",
    "generate_key",
    "issue_token",
    "load_key",
    "requester_from_claims",
    "serve_forever",
    "verify_token",
]
