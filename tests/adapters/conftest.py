"""Store fixtures over SQLite and (when PRIVACY_CI_TEST_PG_URL is set) PostgreSQL, and
the requester's gated source in-process or over HTTP (the service on 127.0.0.1)."""

from tests.adapters._gated import mode
from tests.store.backends import backend, riverside, riverside_template, sqlite_riverside

__all__ = ["backend", "mode", "riverside", "riverside_template", "sqlite_riverside"]
