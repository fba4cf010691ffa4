"""The browser harness itself: a local page opens, and a request off the machine is caught."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests._browser import open_page


def test_browser_opens_a_local_file_and_records_external_requests(
    browser: Any, tmp_path: Path
) -> None:
    page_file = tmp_path / "p.html"
    page_file.write_text("<h1>x</h1><img src='https://example.com/a.png'>")
    page, requests = open_page(browser, page_file.as_uri())
    assert page.inner_text("h1") == "x"
    page.wait_for_load_state("load")
    assert requests.external == ["https://example.com/a.png"]
    page.context.close()
