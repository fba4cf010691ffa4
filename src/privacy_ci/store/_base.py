"""What every record kind of the store builds on: the database and the store version."""

from __future__ import annotations

from privacy_ci.store._sql import Database, StoreError


class StoreBase:
    """The database handle the record kinds share (`DocumentStore` sets it up).

    Attributes:
        db: the store's database.
    """

    db: Database

    def version(self) -> int:
        """The store version: bumped by every write except audit appends."""
        row = self.db.query_one("SELECT version FROM store_version WHERE id = 1")
        if row is None:
            raise StoreError(f"store {self.db.name} is not initialised: run privacy-ci store init")
        return int(row[0])
