"""What the review page's tests share, over TestClient (`test_review_page`) and in the
browser (`test_review_browser`): the authority's tokens and drafts to review."""

from __future__ import annotations

import time
from typing import Any

from privacy_ci.service import issue_token
from privacy_ci.store import DocumentStore

WIDER = ["Billing Specialist", "Doctor", "Nurse"]  # B01 is assigned to P03 and P04


def authority_token(key: bytes, agent: str = "PA1", **kw: Any) -> str:
    """A Policy Authority's token (``authority: true``), signed with `key`."""
    return issue_token(key, agent, "Policy Authority", "Administrative", authority=True, **kw)


def expired_authority_token(key: bytes, ago: int) -> str:
    """PA1's token, a minute long, issued `ago` seconds ago."""
    return authority_token(key, ttl=60, now=int(time.time()) - ago)


def forged(token: str, chars: int) -> str:
    """`token` with its last `chars` characters (of its signature) changed."""
    tail = "A" * chars if not token.endswith("A" * chars) else "B" * chars
    return token[:-chars] + tail


def propose(
    store: DocumentStore, doc_id: str, by: str = "model:test", note: str = "drafted", **fields: Any
) -> int:
    """Propose `doc_id`'s approved label with `fields` changed; returns the draft's version."""
    body = {**store.label(doc_id).body, **fields}
    return store.propose_label(body, by, note).version
