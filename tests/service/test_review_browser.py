"""The review page in a real browser: Debian's Chromium, driven by Playwright, against
the service on a real uvicorn on 127.0.0.1 (nothing else is reachable: `open_page`
aborts and records any request off loopback).

Set ``PRIVACY_CI_REVIEW_SCREENSHOTS=DIR`` to save the screenshots the README shows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.store import DocumentStore, LabelState
from tests._browser import open_page
from tests.service._review import WIDER, authority_token, expired_authority_token, forged, propose
from tests.service._serving import serving

KEY = b"review-browser-test-key-0123456789abcdef-01"
AUTHORITY = authority_token(KEY)
BILLING = {
    "Authorization": f"Bearer {issue_token(KEY, 'B01', 'Billing Specialist', 'Administrative')}"
}
SCREENSHOTS = os.environ.get("PRIVACY_CI_REVIEW_SCREENSHOTS", "").strip()


@pytest.fixture
def served(sqlite_riverside: DocumentStore) -> Iterator[str]:
    """The service on a real uvicorn on 127.0.0.1; yields its base URL."""
    with serving(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))) as url:
        yield url


def _propose(store: DocumentStore, doc_id: str, **fields: Any) -> int:
    return propose(store, doc_id, "model:smollm2-135m", "drafted by the labeler", **fields)


def _follow(page: Any, selector: str) -> None:
    """Click a link or a form button and wait for the page it leads to (a click alone
    returns before the form's POST and redirect have loaded the next page)."""
    with page.expect_navigation():
        page.click(selector)


def _retrieved(base: str, query: str) -> list[str]:
    r = httpx.post(f"{base}/v1/retrieve", json={"query": query, "k": 5}, headers=BILLING)
    assert r.status_code == 200
    return [d["doc_id"] for d in r.json()["documents"]]


def _shot(page: Any, name: str, **kw: Any) -> None:
    """Save a screenshot, reduced to a small palette (the README's images stay small)."""
    if not SCREENSHOTS:
        return
    from PIL import Image  # Pillow comes with matplotlib

    path = Path(SCREENSHOTS) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), **kw)
    image = Image.open(path).convert("RGB")
    image.quantize(96, Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)


def test_review_in_the_browser(browser: Any, served: str, sqlite_riverside: DocumentStore) -> None:
    store = sqlite_riverside
    _propose(store, "RMC-LAB-003", permitted_receiver_roles=WIDER)
    _propose(store, "RMC-LAB-004", permitted_receiver_roles=WIDER)
    _propose(store, "RMC-LAB-001", permitted_receiver_roles=["Doctor"])  # N01 loses it
    lipid, a1c = "lipid panel cholesterol Aiko Tanaka", "hemoglobin A1c Samuel Okoye"
    assert "RMC-LAB-003" not in _retrieved(served, lipid)

    page, requests = open_page(browser, f"{served}/review", width=1200, height=900)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    assert page.url.endswith("/review/login")  # no session: the sign-in form
    page.fill("#token", AUTHORITY)
    _follow(page, "button:has-text('Sign in')")
    assert page.url == f"{served}/review"
    cookie = next(c for c in page.context.cookies() if c["name"] == "privacy_ci_review")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/review"
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script can read the token

    # the queue: widening proposals cannot be selected for bulk approval
    rows = page.locator("table.queue tbody tr")
    assert rows.count() == 3
    offered = page.locator("input[name=item]").evaluate_all("els => els.map(e => e.value)")
    assert offered == ["RMC-LAB-001@3"]
    assert "narrows: 1 lose" in rows.nth(0).inner_text()
    _shot(page, "review-queue.png", clip={"x": 0, "y": 0, "width": 1200, "height": 580})
    store.put_document("XSS-1", "<script>alert(1)</script><img src=x onerror=alert(2)>", "test")
    xss = {**store.label("RMC-LAB-003").body, "doc_id": "XSS-1"}
    store.propose_label({**xss, "title": "<img src=x onerror=alert(3)>"}, "model:x")

    # a proposal: the document beside both labels, and the consequence before approval
    _follow(page, "a:has-text('RMC-LAB-003')")
    assert "LIPID PANEL" in page.locator("pre.doctext").inner_text()
    changed = page.locator("table.fields tr.changed")
    assert changed.count() == 1 and "permitted_receiver_roles" in changed.inner_text()
    assert "+ Billing Specialist" in changed.inner_text()
    consequence = page.locator("section.consequence")
    assert "Widens access" in consequence.inner_text()
    assert "1 gain, 0 lose, 2 keep access" in consequence.inner_text()
    gained = consequence.locator("table.principals").first.inner_text()
    assert "B01" in gained and "Rachel Stein" in gained and "Billing Specialist" in gained
    _shot(page, "review-proposal.png", full_page=True)

    page.fill("#note-approve", "billing reconciles lipid panels")
    _follow(page, "button:has-text('Approve as proposed')")
    assert page.locator(".state").inner_text() == "approved"
    assert "not awaiting review" in page.inner_text("main")
    assert "approve by PA1" in page.locator("section.history").inner_text()
    # the newly permitted agent receives it on its next request
    assert "RMC-LAB-003" in _retrieved(served, lipid)

    # a rejected proposal grants nothing: the label in force before comes back
    _follow(page, "text=← Review queue")
    _follow(page, "a:has-text('RMC-LAB-004')")
    assert "B01" in page.locator("section.consequence table.principals").first.inner_text()
    _follow(page, "button:has-text('Reject')")
    assert page.locator(".state").inner_text() == "approved"
    assert store.label("RMC-LAB-004").body["permitted_receiver_roles"] == ["Doctor", "Nurse"]
    assert "RMC-LAB-004" not in _retrieved(served, a1c)

    # user text is shown as text: nothing runs, nothing is injected
    page.goto(f"{served}/review/label?doc_id=XSS-1")
    assert "<img src=x onerror=alert(3)>" in page.locator("h1").inner_text()
    assert "<script>alert(1)</script>" in page.locator("pre.doctext").inner_text()
    assert page.locator("main img, main script").count() == 0

    # bulk approval of the rest (none widens)
    page.goto(f"{served}/review")
    assert page.locator("input[name=item]").count() == 1  # XSS-1 is new: it widens access
    page.check("input[value='RMC-LAB-001@3']")
    _follow(page, "button:has-text('Approve selected')")
    assert store.label("RMC-LAB-001").state is LabelState.APPROVED
    assert page.locator("table.queue tbody tr").count() == 1  # only XSS-1 is left

    reviews = [r for r in store.audit.records() if r.action == "review"]
    assert [(r.doc_id, r.decision) for r in reviews] == [
        ("RMC-LAB-003", "approve"),
        ("RMC-LAB-004", "reject"),
        ("RMC-LAB-001", "approve"),
    ]
    assert store.audit.verify().ok
    assert dialogs == [] and requests.external == []
    page.context.close()


@pytest.mark.parametrize(
    ("token", "status", "says"),
    [
        (issue_token(KEY, "D01", "Doctor", "Medical"), 403, "for the Policy Authority"),
        (forged(AUTHORITY, 4), 401, "signature"),
        (expired_authority_token(KEY, 3600), 401, "expired"),
    ],
    ids=["no-authority-role", "forged", "expired"],
)
def test_the_browser_is_refused(
    browser: Any, served: str, sqlite_riverside: DocumentStore, token: str, status: int, says: str
) -> None:
    _propose(sqlite_riverside, "RMC-LAB-003", permitted_receiver_roles=WIDER)
    page, requests = open_page(browser, f"{served}/review/login", width=900, height=600)
    page.fill("#token", token)
    with page.expect_response(f"{served}/review/login") as answer:
        page.click("button:has-text('Sign in')")
    assert answer.value.status == status
    assert says in page.inner_text("main")
    assert not [c for c in page.context.cookies() if c["name"] == "privacy_ci_review"]
    page.goto(f"{served}/review/label?doc_id=RMC-LAB-003")
    assert page.url.endswith("/review/login")  # still signed out: nothing shown
    assert requests.external == []
    page.context.close()
