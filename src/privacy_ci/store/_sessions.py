"""Signed-out tokens: the revocation list every process sharing the store reads.

Signing out of the review page (``POST /review/logout``) adds the session's token
here, named by `privacy_ci.service._auth.token_id` (a hash: the token itself is
never stored), and the service refuses it from the next request on, on every
endpoint and in every process over this store, until it expires anyway. A row is
kept until its token's ``exp`` plus `GRACE_S` (any clock-skew leeway a service
tolerates), and expired rows are pruned whenever a token is revoked, so the table
holds at most the tokens signed out within a day or so.

The list is not part of the store version: revoking a token changes no access
decision, so no snapshot is rebuilt for it; each request looks its token up
(one primary-key read).
"""

from __future__ import annotations

import time

from privacy_ci.store._base import StoreBase
from privacy_ci.store._sql import REVOKED_TOKENS_TABLE, Database, utc_now

GRACE_S = 3600
"""How long past its expiry a revoked token stays listed (a service's leeway on
``exp`` could otherwise make it valid again for a moment)."""


def ensure_sessions_table(db: Database) -> None:
    """Create the revocation list in a store made before it existed (idempotent)."""
    db.run_script([REVOKED_TOKENS_TABLE])


class SessionsMixin(StoreBase):
    """`DocumentStore`'s revocation list of signed-out tokens."""

    def revoke_token(self, token_id: str, expires_at: int, by: str) -> None:
        """List a token as revoked until it expires; prune rows that expired.

        Args:
            token_id: the token's name (`privacy_ci.service._auth.token_id`).
            expires_at: the token's ``exp`` (Unix seconds).
            by: who revoked it (the agent signing out).

        Raises:
            StoreError: the store cannot be written.
        """
        now = int(time.time())
        with self.db.write() as db:
            db.execute("DELETE FROM revoked_tokens WHERE expires_at < ?", (now - GRACE_S,))
            db.execute(
                "INSERT INTO revoked_tokens (token_hash, expires_at, revoked_at, revoked_by)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (token_hash) DO NOTHING",
                (token_id, int(expires_at), utc_now(), by),
            )

    def token_revoked(self, token_id: str) -> bool:
        """Whether the token named `token_id` was revoked (read now, never cached).

        Raises:
            StoreError: the store cannot be read.
        """
        row = self.db.query_one("SELECT 1 FROM revoked_tokens WHERE token_hash = ?", (token_id,))
        return row is not None
