"""`privacy_ci.data.fetch` / `verify` and `privacy-ci data ...` against local HTTP servers.

No network: every server here listens on 127.0.0.1 on a random port.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.data import (
    DEFAULT_BASE_URL,
    REPOS,
    SOURCES,
    SOURCES_BY_PATH,
    FetchReport,
    RetriesExhausted,
    Source,
    download_file,
    fetch,
    select,
    verify,
)
from privacy_ci.errors import DataIntegrityError, PrivacyCIError

Route = Callable[[str], tuple[int, bytes]]
"""Maps a request path (percent-decoded, starting with ``/``) to (status, body)."""


@dataclass
class Server:
    """A running local server: its base URL and the paths it was asked for."""

    url: str
    hits: list[str] = field(default_factory=list)


ServeFactory = Callable[[Route], Server]


@contextmanager
def _serve(route: Route) -> Iterator[Server]:
    server = Server(url="")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = unquote(self.path)
            with lock:
                server.hits.append(path)
            status, body = route(path)
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _local_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No proxies for 127.0.0.1, and data/cache dirs that never point at real ones."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path / "cache-env"))


@pytest.fixture
def serve() -> Iterator[ServeFactory]:
    """Start local HTTP servers on 127.0.0.1 (random port) for one test."""
    with ExitStack() as stack:

        def factory(route: Route) -> Server:
            return stack.enter_context(_serve(route))

        yield factory


def flat_route(root: Path) -> Route:
    """Serve ``root`` laid out like the data directory: ``/{path}``."""
    known = {"/" + s.path for s in SOURCES}

    def route(path: str) -> tuple[int, bytes]:
        if path not in known:
            return 404, b"not found"
        return 200, (root / path.lstrip("/")).read_bytes()

    return route


def upstream_route(root: Path) -> Route:
    """Serve ``root`` laid out like raw.githubusercontent.com: ``/{repo}/{commit}/{source}``."""
    table: dict[str, Source] = {f"/{s.repo}/{s.commit}/{s.source_path}": s for s in SOURCES}

    def route(path: str) -> tuple[int, bytes]:
        source = table.get(path)
        if source is None:
            return 404, b"404: Not Found"
        return 200, (root / source.path).read_bytes()

    return route


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".part")]


# --------------------------------------------------------------------------- manifest


def test_manifest_entries_are_well_formed() -> None:
    paths = [s.path for s in SOURCES]
    assert len(paths) == len(set(paths)) == len(SOURCES_BY_PATH) == 34
    hexdigits = set("0123456789abcdef")
    for s in SOURCES:
        assert len(s.sha256) == 64 and set(s.sha256) <= hexdigits, s.path
        assert len(s.commit) == 40 and set(s.commit) <= hexdigits, s.path
        assert s.size > 0 and s.license, s.path
        assert s.repo in {r.name for r in REPOS.values()}, s.path
        assert not s.path.startswith("/") and ".." not in s.path.split("/")
    assert "SOURCES.md" not in SOURCES_BY_PATH
    assert {r.name for r in REPOS.values()} == {s.repo for s in SOURCES}
    jsonl = [s for s in SOURCES if s.path.endswith(".jsonl")]
    assert len(jsonl) == 7
    assert {s.repo for s in jsonl} == {"beefed-up-geek/PrivaCI-Bench"}
    assert {s.commit for s in jsonl} == {"caac7d2cce1fb9ca0ef8e007bf74c0ede1b48652"}
    assert len([s for s in SOURCES if s.path.startswith("licenses/")]) == 4


def test_source_urls() -> None:
    s = SOURCES_BY_PATH["kb/privaci_bench/ai_act.jsonl"]
    assert s.url() == (
        "https://raw.githubusercontent.com/beefed-up-geek/PrivaCI-Bench/"
        "caac7d2cce1fb9ca0ef8e007bf74c0ede1b48652/HF_cache/KBs/AI_ACT/data-00000-of-00001.jsonl"
    )
    assert s.url().startswith(DEFAULT_BASE_URL + "/")
    assert s.url("http://mirror.test/raw/") == s.url().replace(
        DEFAULT_BASE_URL, "http://mirror.test/raw"
    )
    assert s.mirror_url("http://m.test/d/") == "http://m.test/d/kb/privaci_bench/ai_act.jsonl"


def test_manifest_matches_reference_copy(shared_data: Path) -> None:
    on_disk = {
        p.relative_to(shared_data).as_posix()
        for p in shared_data.rglob("*")
        if p.is_file() and p.name != "SOURCES.md"
    }
    assert on_disk == set(SOURCES_BY_PATH)
    assert verify(shared_data) == [(s.path, "ok") for s in SOURCES]


def test_select_by_prefix() -> None:
    assert [s.path for s in select(["cases/goldcoin/real.json"])] == ["cases/goldcoin/real.json"]
    assert all(s.path.startswith("hipaa/") for s in select(["hipaa/"]))
    assert len(select(["hipaa/"])) == 10
    assert select(None) == list(SOURCES)
    with pytest.raises(PrivacyCIError, match="no data file matches 'nope/'"):
        select(["hipaa/", "nope/"])


# --------------------------------------------------------------------------- (a) flat mirror


def test_fetch_everything_from_flat_mirror(
    serve: ServeFactory, shared_data: Path, tmp_path: Path
) -> None:
    server = serve(flat_route(shared_data))
    dest = tmp_path / "data"
    report = fetch(dest, mirror=server.url + "/")
    assert report.ok, report.failed
    assert [f.status for f in report.files] == ["downloaded"] * len(SOURCES)
    assert report.bytes_downloaded == sum(s.size for s in SOURCES)
    assert verify(dest) == [(s.path, "ok") for s in SOURCES]
    assert _leftovers(dest) == []
    assert "34 downloaded" in report.summary()

    # A second run downloads nothing; --force downloads again.
    hits = len(server.hits)
    again = fetch(dest, mirror=server.url, only=["licenses/"])
    assert [f.status for f in again.files] == ["present"] * 4
    assert len(server.hits) == hits
    forced = fetch(dest, mirror=server.url, only=["licenses/"], force=True)
    assert [f.status for f in forced.files] == ["downloaded"] * 4
    assert len(server.hits) == hits + 4


def test_fetch_defaults_to_data_dir_and_local_mirror(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(tmp_path / "env-data"))
    report = fetch(mirror=str(shared_data), only=["law_trees/definitions/"])
    assert report.dest == tmp_path / "env-data"
    assert [f.status for f in report.files] == ["downloaded", "downloaded"]
    assert verify(only=["law_trees/definitions/"]) == [
        ("law_trees/definitions/gdpr.json", "ok"),
        ("law_trees/definitions/ai_act.json", "ok"),
    ]


# --------------------------------------------------------------------------- (b) upstream layout


def test_fetch_subset_from_upstream_layout(
    serve: ServeFactory, shared_data: Path, tmp_path: Path
) -> None:
    server = serve(upstream_route(shared_data))
    only = ["hipaa/ecfr/", "cases/goldcoin/real.json", "kb/privaci_bench/gdpr.jsonl"]
    report = fetch(tmp_path, base_url=server.url, only=only)
    assert report.ok, report.failed
    assert [f.path for f in report.downloaded] == [
        "hipaa/ecfr/subchapter-C_part-160.html",
        "hipaa/ecfr/subchapter-C_part-162.html",
        "hipaa/ecfr/subchapter-C_part-164.html",
        "cases/goldcoin/real.json",
        "kb/privaci_bench/gdpr.jsonl",
    ]
    assert any(h.startswith("/beefed-up-geek/PrivaCI-Bench/caac7d2") for h in server.hits)
    assert all(status == "ok" for _, status in verify(tmp_path, only=only))
    assert not (tmp_path / "hipaa" / "kb_annotated.json").exists()


def test_wrong_commit_is_a_clear_404(
    serve: ServeFactory, shared_data: Path, tmp_path: Path
) -> None:
    server = serve(upstream_route(shared_data))
    s = SOURCES_BY_PATH["hipaa/definitions.json"]
    url = s.url(server.url).replace(s.commit, "0" * 40)
    with pytest.raises(PrivacyCIError, match="404") as info:
        download_file(
            url, tmp_path / "definitions.json", sha256=s.sha256, size=s.size, retries=2, backoff=0.0
        )
    assert url in str(info.value)
    assert len(server.hits) == 1  # a 404 is not retried
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- (c) corruption


def test_corrupt_file_fails_alone_and_leaves_nothing(
    serve: ServeFactory, shared_data: Path, tmp_path: Path
) -> None:
    bad = "licenses/GoldCoin-LICENSE.txt"
    flat = flat_route(shared_data)
    good = (shared_data / bad).read_bytes()
    corrupted = good[:100] + b"X" + good[101:]  # same size, different bytes
    actual = hashlib.sha256(corrupted).hexdigest()

    def route(path: str) -> tuple[int, bytes]:
        status, body = flat(path)
        if path == "/" + bad:
            body = corrupted
        return status, body

    server = serve(route)
    report = fetch(tmp_path, mirror=server.url, only=["licenses/"], retries=2, backoff=0.0)
    by_path = {f.path: f for f in report.files}
    assert by_path[bad].status == "failed"
    assert isinstance(by_path[bad].exception, DataIntegrityError)
    message = by_path[bad].error or ""
    assert bad in message and SOURCES_BY_PATH[bad].sha256 in message
    assert "sha256 mismatch" in message
    assert actual in message
    assert [f.status for f in report.files if f.path != bad] == ["downloaded"] * 3
    assert not (tmp_path / bad).exists()
    assert _leftovers(tmp_path) == []
    assert server.hits.count("/" + bad) == 1  # a hash mismatch is not retried
    with pytest.raises(DataIntegrityError, match="GoldCoin-LICENSE"):
        report.raise_for_failures()

    # Downloading the one file directly raises.
    s = SOURCES_BY_PATH[bad]
    with pytest.raises(DataIntegrityError) as info:
        download_file(s.mirror_url(server.url), tmp_path / "x.txt", sha256=s.sha256, size=s.size)
    assert actual in str(info.value)
    assert list(tmp_path.glob("x.txt*")) == list(tmp_path.glob(".x.txt*")) == []


def test_oversized_body_is_cut_off(serve: ServeFactory, tmp_path: Path) -> None:
    server = serve(lambda path: (200, b"y" * 300_000))
    with pytest.raises(DataIntegrityError, match="more than the expected 10 bytes"):
        download_file(server.url + "/f", tmp_path / "f", sha256="0" * 64, size=10)
    assert list(tmp_path.iterdir()) == []


def test_corrupt_local_file_is_replaced(
    serve: ServeFactory, shared_data: Path, tmp_path: Path
) -> None:
    path = "law_trees/definitions/gdpr.json"
    target = tmp_path / path
    target.parent.mkdir(parents=True)
    target.write_text("{}")
    assert verify(tmp_path, only=[path]) == [(path, "corrupt")]
    server = serve(flat_route(shared_data))
    report = fetch(tmp_path, mirror=server.url, only=[path])
    assert [f.status for f in report.files] == ["downloaded"]
    assert verify(tmp_path, only=[path]) == [(path, "ok")]


# --------------------------------------------------------------------------- (d) HTTP errors


def test_404_is_a_clear_failure(serve: ServeFactory, tmp_path: Path) -> None:
    server = serve(lambda path: (404, b"nope"))
    only = ["licenses/GoldCoin-LICENSE.txt"]
    report = fetch(tmp_path, base_url=server.url, only=only, retries=2, backoff=0.0)
    (result,) = report.files
    assert result.status == "failed"
    assert result.error is not None
    assert "HTTP 404" in result.error and result.url in result.error
    assert result.url.startswith(server.url + "/HKUST-KnowComp/GoldCoin/")
    assert len(server.hits) == 1
    with pytest.raises(PrivacyCIError, match="404"):
        report.raise_for_failures()


def test_500_is_retried(serve: ServeFactory, shared_data: Path, tmp_path: Path) -> None:
    flat = flat_route(shared_data)
    calls: list[str] = []

    def flaky(path: str) -> tuple[int, bytes]:
        calls.append(path)
        return (500, b"oops") if len(calls) <= 2 else flat(path)

    server = serve(flaky)
    report = fetch(
        tmp_path, mirror=server.url, only=["licenses/GoldCoin-LICENSE.txt"], retries=2, backoff=0.0
    )
    assert [f.status for f in report.files] == ["downloaded"]
    assert len(server.hits) == 3


def test_persistent_500_gives_up(serve: ServeFactory, tmp_path: Path) -> None:
    server = serve(lambda path: (503, b"down"))
    report = fetch(tmp_path, mirror=server.url, only=["licenses/"], retries=2, backoff=0.0)
    assert [f.status for f in report.files] == ["failed"] * 4
    assert all("HTTP 503" in (f.error or "") for f in report.files)
    assert all("3 attempt(s)" in (f.error or "") for f in report.files)
    assert len(server.hits) == 12  # a 5xx does not stop the other files
    assert _leftovers(tmp_path) == []
    with pytest.raises(PrivacyCIError, match="4 of 4 data files failed"):
        report.raise_for_failures()


def test_unreachable_host_fails_fast(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()  # nothing listens on this port any more
    report = fetch(
        tmp_path, base_url=f"http://127.0.0.1:{port}", only=["hipaa/"], retries=2, backoff=0.0
    )
    assert len(report.failed) == 10
    first = report.files[0]
    assert isinstance(first.exception, RetriesExhausted) and first.exception.connection
    assert all("skipped" in (f.error or "") for f in report.files[1:])


def test_given_client_is_used_and_not_closed(
    serve: ServeFactory, shared_data: Path, tmp_path: Path
) -> None:
    server = serve(flat_route(shared_data))
    seen: list[str] = []

    def record(request: httpx.Request) -> None:
        seen.append(request.url.path)

    with httpx.Client(event_hooks={"request": [record]}) as client:
        report = fetch(tmp_path, mirror=server.url, only=["licenses/P"], client=client)
        assert not client.is_closed
    assert isinstance(report, FetchReport)
    assert len(report.downloaded) == 2
    assert seen == server.hits


def test_both_base_url_and_mirror_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PrivacyCIError, match="not both"):
        fetch(tmp_path, base_url="http://127.0.0.1:9", mirror="http://127.0.0.1:9")


# --------------------------------------------------------------------------- (f) CLI

runner = CliRunner()


def test_cli_status_json_on_reference_copy(shared_data: Path) -> None:
    result = runner.invoke(
        app, ["data", "status", "--json"], env={"PRIVACY_CI_DATA": str(shared_data)}
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] is True
    assert payload["summary"] == {"ok": 34, "missing": 0, "corrupt": 0}
    assert {f["status"] for f in payload["files"]} == {"ok"}


def test_cli_status_on_empty_dir(tmp_path: Path) -> None:
    result = runner.invoke(app, ["data", "status", "--dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "0 ok, 34 missing, 0 corrupt" in result.stdout
    assert "privacy-ci data fetch" in result.stdout


def test_cli_fetch_json_from_mirror(serve: ServeFactory, shared_data: Path, tmp_path: Path) -> None:
    server = serve(flat_route(shared_data))
    dest = tmp_path / "d"
    args = ["data", "fetch", "--mirror", server.url, "--dir", str(dest), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ok"] is True
    assert payload["summary"]["downloaded"] == 34
    assert payload["dest"] == str(dest)
    assert verify(dest) == [(s.path, "ok") for s in SOURCES]


def test_cli_fetch_with_progress_and_failure(serve: ServeFactory, tmp_path: Path) -> None:
    server = serve(lambda path: (404, b""))
    args = [
        "data",
        "fetch",
        "--base-url",
        server.url,
        "--dir",
        str(tmp_path),
        "--only",
        "hipaa/ecfr/",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "0 downloaded" in result.stdout and "3 failed" in result.stdout
    assert "HTTP 404" in result.stderr


def test_cli_fetch_usage_errors(tmp_path: Path) -> None:
    both = ["data", "fetch", "--dir", str(tmp_path), "--mirror", "x", "--base-url", "http://y"]
    result = runner.invoke(app, both)
    assert result.exit_code == 2 and "not both" in result.stderr
    result = runner.invoke(app, ["data", "fetch", "--dir", str(tmp_path), "--only", "zzz/"])
    assert result.exit_code == 2 and "zzz/" in result.stderr


def test_cli_where(tmp_path: Path) -> None:
    env = {"PRIVACY_CI_DATA": str(tmp_path / "d"), "PRIVACY_CI_CACHE": str(tmp_path / "c")}
    result = runner.invoke(app, ["data", "where", "--json"], env=env)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "data_dir": str(tmp_path / "d"),
        "cache_dir": str(tmp_path / "c"),
    }
    result = runner.invoke(app, ["data", "where"], env=env)
    assert str(tmp_path / "d") in result.stdout and str(tmp_path / "c") in result.stdout
