"""`AuditLog`: the store's ``audit`` table, append-only and hash-chained.

The chain itself (record layout, hashes, verification) is `privacy_ci.store._audit`;
this module reads and writes it through the database layer only, so the audit log
depends on no other record kind of the store.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from contextlib import closing
from typing import Any

from privacy_ci.store._audit import (
    COLUMNS,
    COLUMNS_SQL,
    GENESIS,
    AuditEntry,
    AuditRecord,
    AuditReport,
    parse_head,
    verify_records,
)
from privacy_ci.store._sql import Database, StoreError, utc_now


class AuditLog:
    """The store's append-only, hash-chained decision log (see `privacy_ci.store._audit`).

    Args:
        db: the store's database (its ``audit`` table and the head in ``meta``).
    """

    def __init__(self, db: Database) -> None:
        self.db = db

    def append(self, entries: Sequence[AuditEntry]) -> list[AuditRecord]:
        """Append decisions as one transaction, chained after the current head.

        Returns:
            The sealed records, with sequence numbers and hashes.
        """
        if not entries:
            return []
        with self.db.write() as db:
            head = db.query_one("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")
            seq, prev = (int(head[0]), str(head[1])) if head else (0, GENESIS)
            at = utc_now()
            records = []
            for entry in entries:
                seq += 1
                record = AuditRecord.seal(seq, at, entry, prev)
                prev = record.hash
                records.append(record)
            db.executemany(
                f"INSERT INTO audit ({COLUMNS_SQL}) VALUES ({Database.placeholders(len(COLUMNS))})",
                [r.row() for r in records],
            )
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('audit_head', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (f"{seq}:{prev}",),
            )
        return records

    def records(self, after: int = 0, limit: int | None = None) -> list[AuditRecord]:
        """Stored records in sequence order, typed (see `AuditRecord.from_row`).

        Args:
            after: only records with a larger sequence number.
            limit: at most this many.

        Returns:
            The records.

        Raises:
            StoreError: a stored value has the wrong type (use `verify` to locate it).
        """
        sql = f"SELECT {COLUMNS_SQL} FROM audit WHERE seq > ? ORDER BY seq"
        params: list[Any] = [after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [AuditRecord.from_row(r) for r in self.db.query(sql, params)]

    def iter_records(self, batch: int = 5000) -> Iterable[AuditRecord]:
        """Every record in sequence order, read in batches (typed, as `records`)."""
        after = 0
        while True:
            chunk = self.records(after, batch)  # a retyped seq raises here, typed
            yield from chunk
            if len(chunk) < batch:
                return
            after = chunk[-1].seq

    def raw_rows(self, batch: int = 5000) -> Generator[tuple[Any, ...], None, None]:
        """Every stored row in ``seq`` order, values exactly as stored (for `verify`).

        Call inside ``store.db.read()`` and close the iterator before it ends.
        """
        return self.db.stream(f"SELECT {COLUMNS_SQL} FROM audit ORDER BY seq", (), batch)

    def recorded_head(self) -> tuple[int, str] | None:
        """The head (seq, hash) written to the meta table with the last append.

        Raises:
            StoreError: the stored head is not ``SEQ:HASH`` (it was changed).
        """
        row = self.db.query_one("SELECT value FROM meta WHERE key = 'audit_head'")
        if row is None:
            return None
        head = parse_head(row[0]) if isinstance(row[0], str) else None
        if head is None:
            raise StoreError(
                f"the audit log's recorded head is {row[0]!r}, not SEQ:HASH"
                " (run privacy-ci audit verify)"
            )
        return head

    def verify(self, expect_head: str | None = None) -> AuditReport:
        """Re-compute the hash chain over the whole log, from the rows as stored.

        Args:
            expect_head: a head hash kept outside the database, which the log must end with.

        Returns:
            The report; ``first_bad_seq`` names the first edited, deleted, reordered,
            inserted or retyped record.
        """
        with self.db.read() as db:
            row = db.query_one("SELECT value FROM meta WHERE key = 'audit_head'")
            # the stored text goes to the verifier unparsed: a garbled head is reported
            head: tuple[int, str] | str = (0, GENESIS) if row is None else str(row[0])
            with closing(self.raw_rows()) as rows:
                return verify_records(rows, recorded_head=head, expect_head=expect_head)
