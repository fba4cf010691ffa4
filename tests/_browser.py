"""A real browser for the tests: Debian's Chromium driven by Playwright.

`.ci/run` installs Chromium (`scripts/ci_chromium.sh`); Playwright comes with the
``dev`` extra. Missing either skips the browser tests on a developer's machine and
fails them in CI, like missing data (`tests._shared.missing`).

Use the ``browser`` fixture (one Chromium per test module) and `open_page`, which
records every request the page makes so a test can assert that a report or page
reached nothing outside ``file://`` and loopback.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from tests._shared import missing

# Chromium's own background traffic (updates, sync, field trials) is off: this machine's
# network is closed, and a test must see only the page's requests.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def chromium_path() -> str | None:
    """``$PRIVACY_CI_CHROMIUM``, else ``chromium`` (Debian) or ``chromium-browser`` on PATH."""
    given = os.environ.get("PRIVACY_CI_CHROMIUM", "").strip()
    if given:
        return given if Path(given).is_file() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageRequests:
    """Every URL a page asked for, and those that left file:// and loopback."""

    urls: list[str] = field(default_factory=list)

    @property
    def external(self) -> list[str]:
        out = []
        for url in self.urls:
            parsed = urlparse(url)
            if parsed.scheme in {"file", "data", "blob", "about"}:
                continue
            if parsed.hostname in LOCAL_HOSTS:
                continue
            out.append(url)
        return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (skip locally, fail in CI when absent).

    Module scope, not session: Playwright's sync API keeps an event loop running in the
    thread while it is open, and a later test's `asyncio.run` would refuse to start.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the dev extra (pip install -e '.[dev]')", "Playwright is not installed")
    executable = chromium_path()
    if executable is None:
        missing("PATH or $PRIVACY_CI_CHROMIUM", "Chromium (apt-get install chromium) is not found")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def open_page(
    browser: Any, url: str, *, width: int = 1280, height: int = 800
) -> tuple[Any, PageRequests]:
    """A new page at ``width`` x ``height`` that has loaded ``url``, and its requests.

    Requests to anything but file://, data: and loopback are aborted (and recorded),
    so a page that tries to reach the network fails visibly instead of hanging.
    """
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    requests = PageRequests()

    def _route(route: Any) -> None:
        requests.urls.append(route.request.url)
        parsed = urlparse(route.request.url)
        if parsed.scheme in {"file", "data", "blob"} or parsed.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            route.abort()

    page.route("**/*", _route)
    page.goto(url)
    return page, requests
