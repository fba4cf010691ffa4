"""A content-addressed cache of completions in SQLite.

The key covers provider, base URL, model, messages, every generation setting
(seed included) and a sample index, so N independent draws are N entries.
Failed calls are never stored.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privacy_ci.llm._types import (
    Completion,
    FinishReason,
    GenerationSettings,
    Message,
    messages_key,
    stable_hash,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL,
    payload TEXT NOT NULL
);
"""


def cache_key(
    provider: str,
    base_url: str,
    model: str,
    messages: Sequence[Message],
    settings: GenerationSettings,
    sample: int,
) -> str:
    """The content address of one call."""
    return stable_hash(
        {
            "v": 1,
            "provider": provider,
            "base_url": base_url,
            "model": model,
            "messages": messages_key(messages),
            "settings": settings.cache_key_part(),
            "sample": sample,
        }
    )


class ResponseCache:
    """SQLite-backed completion cache, safe to share between threads.

    Args:
        path: the database file (created with its folder when missing).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute(
                "SELECT payload FROM completions WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        data: dict[str, Any] = json.loads(row[0])
        return Completion(
            text=data["text"],
            provider=data["provider"],
            model=data["model"],
            parsed=data.get("parsed"),
            finish_reason=FinishReason(data.get("finish_reason", "stop")),
            prompt_tokens=data.get("prompt_tokens", 0),
            completion_tokens=data.get("completion_tokens", 0),
            latency_s=0.0,
            retries=0,
            cached=True,
            parse_error=data.get("parse_error"),
        )

    def put(self, key: str, completion: Completion) -> None:
        """Store a successful completion (failures are ignored)."""
        if not completion.ok:
            return
        payload = json.dumps(completion.as_dict(), ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO completions (key, provider, model, created, payload)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, completion.provider, completion.model, time.time(), payload),
            )

    def stats(self) -> dict[str, Any]:
        with self._lock:
            total = self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
            by_model = self._db.execute(
                "SELECT provider, model, COUNT(*) FROM completions GROUP BY provider, model"
                " ORDER BY 3 DESC"
            ).fetchall()
        size = self.path.stat().st_size if self.path.exists() else 0
        return {
            "path": str(self.path),
            "entries": total,
            "bytes": size,
            "by_model": [{"provider": p, "model": m, "entries": n} for p, m, n in by_model],
        }

    def clear(self, model: str | None = None) -> int:
        """Delete entries (all, or one model's); return how many were removed."""
        with self._lock:
            if model is None:
                cur = self._db.execute("DELETE FROM completions")
            else:
                cur = self._db.execute("DELETE FROM completions WHERE model = ?", (model,))
            self._db.execute("VACUUM")
        return int(cur.rowcount)

    def close(self) -> None:
        with self._lock:
            self._db.close()
