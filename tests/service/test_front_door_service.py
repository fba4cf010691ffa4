"""The service's front door (issue 26, item 5): API docs that work offline with a
favicon, a `store load` summary that counts what is in force after the load, and key
and token files read without their surrounding whitespace everywhere."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from privacy_ci.adapters import HttpGatedSource, LocalGatedSource
from privacy_ci.cli.main import app as cli
from privacy_ci.errors import PrivacyCIError
from privacy_ci.service import ServiceSettings, create_app, issue_token, load_key, verify_token
from privacy_ci.service._docs import docs_assets, operations_page
from privacy_ci.store import DocumentStore
from tests._browser import open_page
from tests.conductor.test_corpus_folder import uncomment_example_labels
from tests.service._serving import serving
from tests.store.backends import store_url

KEY = b"front-door-test-key-0123456789abcdef-0123456789"
runner = CliRunner()

# an absolute URL in an attribute, a script string or a CSS url()
URL = re.compile(r"""(?:https?:)?//[^\s"'<>)]+""", re.IGNORECASE)
ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*'([^']+)'""", re.IGNORECASE)


def ok(*args: str) -> str:
    res = runner.invoke(cli, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def client(sqlite_riverside: DocumentStore) -> Iterator[TestClient]:
    with TestClient(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))) as c:
        yield c


@pytest.fixture
def no_swagger_ui(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the service extra (fastapi-offline) were not installed."""
    monkeypatch.setitem(sys.modules, "fastapi_offline", None)  # import raises ImportError
    assert docs_assets() is None


# ------------------------------------------------------------------ 1. the docs


def _assets_of(page: str) -> list[str]:
    return [a or b for a, b in ASSET.findall(page)]


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_docs_name_no_other_host_and_their_assets_load(client: TestClient, path: str) -> None:
    assert docs_assets() is not None, "the dev extra installs fastapi-offline (service extra)"
    page = client.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert URL.findall(page.text) == [], "every URL on the page is this service's own"
    assets = _assets_of(page.text)
    # the page's script, its style (Swagger UI), the schema and the icon: all served here
    assert "/favicon.ico" in assets and "/openapi.json" in page.text
    assert any(a.endswith(".js") for a in assets)
    assert path == "/redoc" or any(a.endswith(".css") for a in assets)
    for url in [*assets, "/openapi.json"]:
        assert url.startswith("/"), url
        got = client.get(url)
        assert got.status_code == 200 and got.content, url
    assert "fonts.googleapis" not in page.text and "cdn" not in page.text.lower()


def test_the_docs_need_no_token_and_stay_out_of_the_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/docs", "/redoc", "/favicon.ico"} & set(paths)
    # no token: the guard asks for one under /v1/ only
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert client.get("/docs-assets/missing.js").status_code == 404


def test_the_docs_behind_a_path_prefix(sqlite_riverside: DocumentStore) -> None:
    app = create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))
    with TestClient(app, root_path="/privacy") as c:
        page = c.get("/docs").text
    assets = _assets_of(page)
    assert assets and all(a.startswith("/privacy/") for a in assets), assets


def test_the_favicon_is_a_small_icon_of_ours(client: TestClient) -> None:
    from PIL import Image  # Pillow comes with matplotlib

    got = client.get("/favicon.ico")
    assert got.status_code == 200 and got.headers["content-type"] == "image/x-icon"
    assert len(got.content) < 8192
    image = Image.open(io.BytesIO(got.content))
    assert image.format == "ICO" and image.size == (32, 32)
    rgba = image.convert("RGBA")
    assert rgba.getpixel((0, 0))[3] == 0  # a rounded corner: transparent
    assert rgba.getpixel((4, 16))[3] == 255  # the square
    assert rgba.getpixel((16, 12))[:3] == (255, 255, 255)  # the keyhole


def test_without_swagger_ui_the_docs_list_the_operations(
    no_swagger_ui: None, sqlite_riverside: DocumentStore
) -> None:
    app = create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))
    with TestClient(app) as c:
        for path in ("/docs", "/redoc"):
            page = c.get(path)
            assert page.status_code == 200
            text = page.text
            assert "<script" not in text and URL.findall(text) == []
            for op in ("/v1/decide", "/v1/retrieve", "/v1/ask", "/v1/health", "/v1/labels"):
                assert f"<code>{op}</code>" in text
            assert "privacy-ci[service]" in text and 'href="/openapi.json"' in text
            assert all(c.get(a).status_code == 200 for a in _assets_of(text))
        assert c.get("/docs-assets/swagger-ui-bundle.js").status_code == 404
        assert c.get("/favicon.ico").status_code == 200


def test_the_operations_page_escapes_what_it_shows(sqlite_riverside: DocumentStore) -> None:
    app = create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))
    app.description = "<script>alert(1)</script>"
    app.openapi_schema = None
    assert "<script>" not in operations_page(app)


def test_swagger_ui_renders_in_a_browser_offline(
    browser: Any, sqlite_riverside: DocumentStore
) -> None:
    with serving(create_app(sqlite_riverside, ServiceSettings(jwt_key=KEY))) as url:
        page, requests = open_page(browser, f"{url}/docs")
        try:
            page.wait_for_selector(".opblock", timeout=20_000)
            shown = page.locator(".opblock-summary-path").all_inner_texts()
            assert "/v1/decide" in shown and "/v1/retrieve" in shown
            assert requests.external == []
            assert {urlparse(u).path for u in requests.urls} >= {
                "/docs-assets/swagger-ui-bundle.js",
                "/docs-assets/swagger-ui.css",
                "/openapi.json",
            }
        finally:
            page.context.close()


# ------------------------------------------------------ 2. store load's summary


@pytest.fixture
def store_db(backend: str, tmp_path: Path) -> Iterator[str]:
    with store_url(backend, tmp_path) as url:
        yield url


def _starter(tmp_path: Path, *, labelled: bool) -> Path:
    folder = tmp_path / "mycorpus"
    ok("corpus", "init", str(folder))
    if labelled:
        uncomment_example_labels(folder / "labels.yaml")
    return folder


def _load(folder: Path, db: str, *extra: str) -> tuple[str, dict[str, Any]]:
    text = flat(ok("store", "load", str(folder), "--db", db, *extra))
    report = json.loads(ok("store", "load", str(folder), "--db", db, "--json", *extra))
    return text, report


def test_a_second_proposed_load_keeps_the_approved_labels_in_force(
    tmp_path: Path, store_db: str
) -> None:
    folder = _starter(tmp_path, labelled=True)
    first = json.loads(ok("store", "load", str(folder), "--db", store_db, "--json"))
    assert first["labels"] == {"approved": 2, "proposed": 0, "revoked": 0}
    assert first["loaded"] == {"labels": 2, "state": "approved", "new": 2, "replaced": 0}

    text = flat(ok("store", "load", str(folder), "--db", store_db, "--state", "proposed"))
    assert "labels in the store now: 2 in force (approved), 2 awaiting review (proposed)" in text
    assert "this load 2 proposed labels (0 new, 2 replacing a stored label)" in text
    assert "a proposal changes no access until it is approved" in text
    assert "; 2 labels in force in the store" in text  # the headline says it too
    with DocumentStore(store_db) as store:
        assert store.label_counts() == {"in_force": 2, "proposed": 2, "revoked": 0, "total": 2}


def test_a_load_without_labels_names_those_still_in_force(tmp_path: Path, store_db: str) -> None:
    folder = _starter(tmp_path, labelled=True)
    ok("store", "load", str(folder), "--db", store_db)
    # the labels now live in the store (reviewed there), the folder's file is empty again
    (folder / "labels.yaml").write_text("documents: []\n", encoding="utf-8")
    text, report = _load(folder, store_db)
    assert report["labels"] == {"approved": 2, "proposed": 0, "revoked": 0}
    assert report["loaded"]["labels"] == 0
    assert report["unlabelled_ids"] == ["EX-HANDBOOK", "EX-REVIEW-E01"]
    assert report["unlabelled_in_force"] == ["EX-HANDBOOK", "EX-REVIEW-E01"]
    assert "granted to nobody" not in text
    assert "labels in the store now: 2 in force (approved), 0 awaiting review" in text
    assert "no label 2: the label in force in the store stays (EX-HANDBOOK, EX-REVIEW-E01)" in text


def test_a_first_load_reads_as_before(tmp_path: Path, store_db: str) -> None:
    text, report = _load(_starter(tmp_path, labelled=False), store_db)
    assert "loaded 2 documents (0 with approved labels, 2 without a label)" in text
    assert "labels in force in the store" not in text
    assert "no label 2: stored, granted to nobody until a label is approved" in text
    assert report["labels"] == {"approved": 0, "proposed": 0, "revoked": 0}
    assert report["unlabelled_in_force"] == []


def test_revoked_labels_are_counted(tmp_path: Path, store_db: str) -> None:
    folder = _starter(tmp_path, labelled=True)
    ok("store", "load", str(folder), "--db", store_db)
    with DocumentStore(store_db) as store:
        record = store.label("EX-HANDBOOK")
        store.revoke_label("EX-HANDBOOK", "PA1", version=record.version)
    (folder / "labels.yaml").write_text("documents: []\n", encoding="utf-8")
    text, report = _load(folder, store_db)
    assert report["labels"] == {"approved": 1, "proposed": 0, "revoked": 1}
    assert report["unlabelled_in_force"] == ["EX-REVIEW-E01"]
    assert "1 in force (approved), 0 awaiting review (proposed), 1 revoked" in text
    assert "1: stored, granted to nobody until a label is approved (EX-HANDBOOK)" in text
    assert "1: the label in force in the store stays (EX-REVIEW-E01)" in text


# --------------------------------------------- 3. keys and tokens read from files


@pytest.fixture(params=["\n", "\r\n "], ids=["newline", "crlf-space"])
def key_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / "jwt.key"
    path.write_bytes(KEY + str(request.param).encode())
    return path


def test_a_key_file_is_read_without_its_whitespace(key_file: Path) -> None:
    assert load_key(key_file) == KEY
    raw_text, raw_bytes = key_file.read_text(), key_file.read_bytes()
    # minted with any spelling of the file, verified with any other
    for signer in (raw_text, raw_bytes, load_key(key_file)):
        token = issue_token(signer, "D01", "Doctor", "Medical")
        for verifier in (raw_text, raw_bytes, KEY):
            assert verify_token(token, verifier).sub == "D01"


def test_local_gated_source_takes_a_key_file_as_read(
    key_file: Path, sqlite_riverside: DocumentStore
) -> None:
    token = flat(
        ok("token", "mint", "D01", "--key-file", str(key_file), "--role", "Doctor",
           "--context", "Medical")
    )  # fmt: skip
    for key in (key_file.read_text(), key_file.read_bytes(), load_key(key_file)):
        source = LocalGatedSource(sqlite_riverside, key, token + "\n")
        assert source.requester().id == "D01"
        assert source.decide("RMC-LAB-001")["decision"] in ("permit", "deny")
    with pytest.raises(PrivacyCIError, match="signature does not verify"):
        LocalGatedSource(sqlite_riverside, KEY + b"x", token)  # another key is still refused


def test_the_service_and_its_adapter_take_files_as_read(
    key_file: Path, sqlite_riverside: DocumentStore
) -> None:
    token = issue_token(load_key(key_file), "D01", "Doctor", "Medical")
    token_file = key_file.with_name("d01.token")
    token_file.write_text(token + "\r\n")
    app = create_app(sqlite_riverside, ServiceSettings(jwt_key=key_file.read_bytes()))
    with TestClient(app) as c:
        got = c.post(
            "/v1/decide",
            json={"doc_id": "RMC-LAB-001"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert got.status_code == 200, got.text
    with serving(app) as url:
        source = HttpGatedSource(url, token_file.read_text(), timeout=20)
        try:
            assert source.decide("RMC-LAB-001")["requester"] == "D01"
        finally:
            source.close()


def test_http_source_sends_the_token_without_its_newline() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json={"request_id": "r", "decision": "deny"})

    source = HttpGatedSource(
        "http://127.0.0.1:9", " abc.def.ghi\n", transport=httpx.MockTransport(answer)
    )
    source.decide("X")
    assert seen == ["Bearer abc.def.ghi"]
