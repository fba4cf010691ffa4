"""`fetch_cfr_part` against a local HTTP server that serves the saved eCFR pages."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from privacy_ci.regulations import ECFR_FILES, parse_ecfr_html
from privacy_ci.regulations._ecfr_fetch import (
    EcfrFetchError,
    ecfr_cache_dir,
    fetch_cfr_part,
    part_url,
)


class _Site:
    """What the fake eCFR serves; tests change it between requests."""

    def __init__(self, pages: dict[int, Path]) -> None:
        self.pages = pages
        self.fail_first: dict[str, int] = {}  # path -> how many 503s before success
        self.truncate = False
        self.requests: list[str] = []


def _handler(site: _Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_GET(self) -> None:
            site.requests.append(self.path)
            if site.fail_first.get(self.path, 0) > 0:
                site.fail_first[self.path] -= 1
                self.send_error(503, "Service Unavailable")
                return
            prefix = "/current/title-45/part-"
            if self.path.startswith(prefix):  # the short URL redirects, like ecfr.gov
                part = self.path.removeprefix(prefix)
                self.send_response(301)
                self.send_header(
                    "Location", f"/current/title-45/subtitle-A/subchapter-C/part-{part}"
                )
                self.end_headers()
                return
            canonical = "/current/title-45/subtitle-A/subchapter-C/part-"
            if self.path.startswith(canonical) and self.path[len(canonical) :].isdigit():
                part = int(self.path[len(canonical) :])
                if part in site.pages:
                    body = site.pages[part].read_bytes()
                    if site.truncate:
                        body = body[: len(body) // 3]
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
            self.send_error(404, "Not Found")

    return Handler


@pytest.fixture
def site(shared_data: Path) -> Iterator[tuple[str, _Site]]:
    pages = {n: shared_data / f"hipaa/ecfr/subchapter-C_part-{n}.html" for n in (160, 162, 164)}
    state = _Site(pages)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_part_url() -> None:
    assert part_url(45, 164) == "https://www.ecfr.gov/current/title-45/part-164"
    assert part_url(45, 160, "http://x/") == "http://x/current/title-45/part-160"
    assert part_url(45, 164, hierarchy="subtitle-A/subchapter-C/") == (
        "https://www.ecfr.gov/current/title-45/subtitle-A/subchapter-C/part-164"
    )


def test_fetch_the_canonical_url(site: tuple[str, _Site], tmp_path: Path) -> None:
    base, state = site
    path = fetch_cfr_part(45, 162, tmp_path, base_url=base, hierarchy="subtitle-A/subchapter-C")
    assert path.read_bytes() == state.pages[162].read_bytes()
    assert state.requests == ["/current/title-45/subtitle-A/subchapter-C/part-162"]


def test_fetch_then_parse_gives_the_same_tree(
    site: tuple[str, _Site], cache: Path, shared_data: Path
) -> None:
    base, state = site
    fetched = [fetch_cfr_part(45, n, base_url=base, backoff=0) for n in (160, 162, 164)]
    assert all(p.parent == ecfr_cache_dir() == cache / "ecfr" for p in fetched)
    assert [p.name for p in fetched] == [f"title-45_part-{n}.html" for n in (160, 162, 164)]
    for n, path in zip((160, 162, 164), fetched, strict=True):
        assert path.read_bytes() == state.pages[n].read_bytes()
    assert "/current/title-45/part-164" in state.requests  # asked for the short URL
    ours = parse_ecfr_html(fetched)
    reference = parse_ecfr_html([shared_data / f for f in ECFR_FILES])
    assert ours.content_hash() == reference.content_hash()
    assert not list(cache.glob("ecfr/.*"))  # no temp files left behind


def test_fetch_with_a_given_client_and_folder(site: tuple[str, _Site], tmp_path: Path) -> None:
    base, _ = site
    with httpx.Client(timeout=5, follow_redirects=True) as client:
        path = fetch_cfr_part(
            45, 164, tmp_path / "out", base_url=base, client=client, filename="p.html"
        )
    assert path == tmp_path / "out" / "p.html"
    assert b'id="part-164"' in path.read_bytes()


def test_retries_after_server_errors(site: tuple[str, _Site], tmp_path: Path) -> None:
    base, state = site
    state.fail_first["/current/title-45/part-160"] = 2
    path = fetch_cfr_part(45, 160, tmp_path, base_url=base, retries=2, backoff=0)
    assert path.is_file()
    assert state.requests.count("/current/title-45/part-160") == 3


def test_retries_run_out(site: tuple[str, _Site], tmp_path: Path) -> None:
    base, state = site
    state.fail_first["/current/title-45/part-160"] = 5
    with pytest.raises(EcfrFetchError, match=r"part-160 failed after 2 attempt\(s\): HTTP 503"):
        fetch_cfr_part(45, 160, tmp_path, base_url=base, retries=1, backoff=0)
    assert not list(tmp_path.iterdir())


def test_not_found_is_not_retried(site: tuple[str, _Site], tmp_path: Path) -> None:
    base, state = site
    with pytest.raises(EcfrFetchError, match=r"GET .*/current/title-45/part-999 failed: HTTP 404"):
        fetch_cfr_part(45, 999, tmp_path, base_url=base, backoff=0)
    assert state.requests.count("/current/title-45/subtitle-A/subchapter-C/part-999") == 1


def test_truncated_reply_is_rejected(site: tuple[str, _Site], tmp_path: Path) -> None:
    base, state = site
    state.truncate = True
    with pytest.raises(EcfrFetchError, match="incomplete"):
        fetch_cfr_part(45, 164, tmp_path, base_url=base, backoff=0)
    assert not list(tmp_path.iterdir())


def test_wrong_page_is_rejected(site: tuple[str, _Site], tmp_path: Path) -> None:
    base, state = site
    state.pages[161] = state.pages[160]  # serves part 160's page for part 161
    with pytest.raises(EcfrFetchError, match="not the eCFR page of part 161"):
        fetch_cfr_part(45, 161, tmp_path, base_url=base, backoff=0)


def test_connection_refused(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EcfrFetchError, match=r"after 2 attempt\(s\): ConnectError"):
        fetch_cfr_part(45, 164, tmp_path, base_url=f"http://127.0.0.1:{port}", retries=1, backoff=0)


def test_never_writes_into_the_data_dir(
    site: tuple[str, _Site], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, state = site
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("PRIVACY_CI_DATA", str(data))
    with pytest.raises(EcfrFetchError, match="inside the data directory"):
        fetch_cfr_part(45, 164, data / "hipaa" / "ecfr", base_url=base)
    assert state.requests == []
    assert not list(data.iterdir())


def test_cli_fetch_cfr(site: tuple[str, _Site], cache: Path) -> None:
    import json

    from typer.testing import CliRunner

    from privacy_ci.cli.main import app

    base, _ = site
    res = CliRunner().invoke(
        app, ["kb", "fetch-cfr", "--part", "164", "--base-url", base, "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["tree"]["internal_nodes"] > 100 and Path(data["path"]).is_relative_to(cache)
