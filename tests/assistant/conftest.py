"""Store fixtures over SQLite and (when PRIVACY_CI_TEST_PG_URL is set) PostgreSQL."""

from tests.store.backends import (
    backend,
    empty_store,
    riverside,
    riverside_template,
    sqlite_riverside,
)

__all__ = ["backend", "empty_store", "riverside", "riverside_template", "sqlite_riverside"]
