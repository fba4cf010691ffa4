"""Download a rendered eCFR part page (the input of `parse_ecfr_html`).

The saved pages in ``hipaa/ecfr/`` are the pages at their canonical URLs, e.g.
``https://www.ecfr.gov/current/title-45/subtitle-A/subchapter-C/part-164``;
``/current/title-45/part-164`` redirects there, so `fetch_cfr_part` asks for the
short URL and follows redirects. The page is written to the cache directory
(never the data directory, which holds pinned, verified files only), through a
temporary file that is renamed into place only once the reply looks like a
complete eCFR part page.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    import httpx

__all__ = ["DEFAULT_ECFR_URL", "EcfrFetchError", "ecfr_cache_dir", "fetch_cfr_part", "part_url"]

DEFAULT_ECFR_URL = "https://www.ecfr.gov"
"""The eCFR site."""

_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_USER_AGENT = "privacy-ci (regulation tree builder; +https://www.ecfr.gov/developers)"


class EcfrFetchError(PrivacyCIError):
    """An eCFR page could not be downloaded, or what came back is not a complete part page."""


def ecfr_cache_dir() -> Path:
    """Where fetched eCFR pages go by default.

    Returns:
        ``<cache_dir>/ecfr`` (see `privacy_ci.data.cache_dir`).
    """
    from privacy_ci.data import cache_dir

    return cache_dir() / "ecfr"


def part_url(title: int, part: int, base_url: str = DEFAULT_ECFR_URL, hierarchy: str = "") -> str:
    """The URL of the current rendering of one CFR part.

    Args:
        title: CFR title, e.g. 45.
        part: part number, e.g. 164.
        base_url: the site (a local mirror in tests).
        hierarchy: the levels between title and part, e.g. ``subtitle-A/subchapter-C``
            (the canonical URL of the saved pages); empty for the short URL.

    Returns:
        E.g. ``https://www.ecfr.gov/current/title-45/part-164`` (which the site
        redirects to the canonical ``.../subtitle-A/subchapter-C/part-164``).
    """
    middle = f"/{hierarchy.strip('/')}" if hierarchy.strip("/") else ""
    return f"{base_url.rstrip('/')}/current/title-{title}{middle}/part-{part}"


def _check_page(body: bytes, url: str, part: int) -> None:
    text = body.decode("utf-8", errors="replace")
    if not re.search(r"</html>\s*$", text[-4096:], re.IGNORECASE):
        raise EcfrFetchError(
            f"GET {url}: the reply is incomplete ({len(body)} bytes, no closing </html>)"
        )
    if not re.search(rf"""<div[^>]*\bid=["']part-{part}["']""", text):
        raise EcfrFetchError(
            f'GET {url}: the reply is not the eCFR page of part {part} (no <div id="part-{part}">)'
        )


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError):
        return False
    return True


def fetch_cfr_part(
    title: int,
    part: int,
    dest: Path | None = None,
    *,
    base_url: str = DEFAULT_ECFR_URL,
    client: httpx.Client | None = None,
    timeout: float = 30.0,
    retries: int = 3,
    backoff: float = 1.0,
    filename: str | None = None,
    hierarchy: str = "",
) -> Path:
    """Download the rendered page of one CFR part into the cache directory.

    Args:
        title: CFR title, e.g. 45.
        part: part number, e.g. 164.
        dest: the folder to write to (default `ecfr_cache_dir()`); it must not be
            inside the data directory.
        base_url: the site, e.g. ``http://127.0.0.1:8000`` for a local mirror.
        client: an `httpx.Client` to use (one with ``timeout`` and redirects is made
            if None).
        timeout: seconds per network operation, for a client made here.
        retries: extra attempts after connection errors, timeouts and 408/429/5xx.
        backoff: seconds before the first retry, doubled after each.
        filename: the file name (default ``title-<title>_part-<part>.html``).
        hierarchy: ask for the canonical URL directly, e.g. ``subtitle-A/subchapter-C``
            for the HIPAA parts (see `part_url`).

    Returns:
        The path of the saved page.

    Raises:
        EcfrFetchError: the download failed (the message names the URL and the
            HTTP status or network error), retries ran out, the reply is not a
            complete part page, or ``dest`` is inside the data directory.
    """
    import httpx

    from privacy_ci.data import data_dir

    folder = Path(dest) if dest is not None else ecfr_cache_dir()
    if _inside(folder, data_dir()):
        raise EcfrFetchError(
            f"refusing to write {folder}: it is inside the data directory {data_dir()}, "
            "which holds pinned files only; fetch into the cache directory instead"
        )
    url = part_url(title, part, base_url, hierarchy)
    own = client is None
    http = client or httpx.Client(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        follow_redirects=True,
        headers={"User-Agent": _USER_AGENT, "Accept": "text/html"},
    )
    try:
        body = _get(http, url, retries=retries, backoff=backoff)
    finally:
        if own:
            http.close()
    _check_page(body, url, part)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (filename or f"title-{title}_part-{part}.html")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def _get(client: httpx.Client, url: str, *, retries: int, backoff: float) -> bytes:
    import httpx

    delay = backoff
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(delay)
            delay *= 2
        try:
            response = client.get(url, follow_redirects=True)
        except httpx.TimeoutException as exc:
            last = f"timed out ({type(exc).__name__})"
            continue
        except httpx.TransportError as exc:
            last = f"{type(exc).__name__}: {exc}".rstrip(": ")
            continue
        if response.status_code == 200:
            return response.content
        status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
        if response.status_code in _RETRY_STATUS:
            last = status
            continue
        raise EcfrFetchError(f"GET {url} failed: {status}")
    raise EcfrFetchError(f"GET {url} failed after {retries + 1} attempt(s): {last}")
