"""The service's API documentation pages and its icon, with nothing from another host.

FastAPI's own ``/docs`` and ``/redoc`` load Swagger UI and ReDoc from a CDN, so with no
network (or behind a firewall) they are blank pages. `add_docs` serves the same pages,
FastAPI's `get_swagger_ui_html` and `get_redoc_html`, with every asset this service's
own: Swagger UI and ReDoc from the ``fastapi-offline`` package (the ``service`` extra),
mounted at `ASSETS_PATH`. Without that package, ``/docs`` and ``/redoc`` are one
self-contained page listing the operations of ``/openapi.json`` (no script, no asset)
that says how to get the interactive page. ``/favicon.ico`` is a small icon drawn here.
"""

from __future__ import annotations

import html
import struct
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs-assets"
FAVICON_PATH = "/favicon.ico"
SWAGGER_JS, SWAGGER_CSS, REDOC_JS = "swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"
INSTALL_HINT = "pip install 'privacy-ci[service]'"


def docs_assets() -> Path | None:
    """The folder of Swagger UI and ReDoc that ``fastapi-offline`` ships, or None when
    that package (the ``service`` extra) is not installed or lacks one of the files."""
    try:
        import fastapi_offline  # the service extra; only its static files are used
    except ImportError:
        return None
    folder = Path(fastapi_offline.__file__).parent / "static"
    if all((folder / name).is_file() for name in (SWAGGER_JS, SWAGGER_CSS, REDOC_JS)):
        return folder
    return None


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs``, ``/redoc`` and ``/favicon.ico`` on `app` (built with
    ``docs_url=None, redoc_url=None``), naming no other host."""
    assets = docs_assets()
    openapi_url = app.openapi_url or "/openapi.json"
    if assets is not None:
        app.mount(ASSETS_PATH, StaticFiles(directory=assets), name="docs-assets")

    @app.get(FAVICON_PATH, include_in_schema=False)
    async def favicon() -> Response:
        return Response(favicon_ico(), media_type="image/x-icon")

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        if assets is None:
            return HTMLResponse(operations_page(app, root))
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/{SWAGGER_JS}",
            swagger_css_url=f"{root}{ASSETS_PATH}/{SWAGGER_CSS}",
            swagger_favicon_url=f"{root}{FAVICON_PATH}",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))
        if assets is None:
            return HTMLResponse(operations_page(app, root))
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/{REDOC_JS}",
            redoc_favicon_url=f"{root}{FAVICON_PATH}",
            with_google_fonts=False,  # fonts.googleapis.com otherwise
        )


_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_PAGE_STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;"
    "color:#1d232b}code{font-size:90%}table{border-collapse:collapse;width:100%}"
    "td,th{text-align:left;vertical-align:top;padding:.3rem .6rem;border-bottom:1px solid #ddd}"
    ".m{font-weight:bold;text-transform:uppercase;width:5rem}.note{background:#f4f4f4;"
    "padding:.6rem 1rem}"
)


def operations_page(app: FastAPI, root: str = "") -> str:
    """The operations of `app`'s OpenAPI schema as one HTML page with no script and no
    asset: the documentation when Swagger UI is not installed."""
    schema: dict[str, Any] = app.openapi()
    info = schema.get("info", {})
    rows: list[str] = []
    for path, item in schema.get("paths", {}).items():
        for method in _METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            summary = op.get("summary") or op.get("operationId") or ""
            first_line = str(op.get("description") or "").strip().split("\n", 1)[0]
            tags = ", ".join(str(t) for t in op.get("tags", []))
            rows.append(
                f"<tr><td class=m>{html.escape(method)}</td><td><code>{html.escape(path)}</code>"
                f"<br>{html.escape(str(summary))}</td><td>{html.escape(first_line)}</td>"
                f"<td>{html.escape(tags)}</td></tr>"
            )
    title = html.escape(str(info.get("title", app.title)))
    spec = html.escape(f"{root}{app.openapi_url or '/openapi.json'}")
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="{html.escape(root + FAVICON_PATH)}">'
        f"<style>{_PAGE_STYLE}</style></head><body><h1>{title}</h1>"
        f"<p>{html.escape(str(info.get('description', '')))}</p>"
        f"<p class=note>The interactive page needs Swagger UI, which the service extra"
        f" installs: <code>{html.escape(INSTALL_HINT)}</code>. The full schema:"
        f' <a href="{spec}">{spec}</a>.</p>'
        "<table><thead><tr><th>method</th><th>path</th><th>what</th><th>tags</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></body></html>"
    )


_ICON = 32
_FILL = (0x1F, 0x5F, 0xAE)  # the review page's accent (review.css)


def _inside_icon(x: float, y: float) -> tuple[bool, bool]:
    """Whether the point (x, y) of the 32 x 32 icon is on the rounded square, and on
    the keyhole cut out of it."""
    r, lo, hi = 7.0, 1.0, 31.0  # the square's corner radius and edges
    cx = min(max(x, lo + r), hi - r)
    cy = min(max(y, lo + r), hi - r)
    on_square = lo <= x <= hi and lo <= y <= hi and (x - cx) ** 2 + (y - cy) ** 2 <= r * r
    in_circle = (x - 16) ** 2 + (y - 12.5) ** 2 <= 5.0**2
    half = 2.0 + (y - 14) * 2.5 / 11  # the slot widens downwards, from y 14 to 25
    in_slot = 14 <= y <= 25 and abs(x - 16) <= half
    return on_square, in_circle or in_slot


@cache
def favicon_ico() -> bytes:
    """A 32 x 32 icon (a keyhole in a blue rounded square) as an ICO file: one 32-bit
    BMP image with alpha, edges anti-aliased by 4 x 4 samples per pixel."""
    n, samples = _ICON, 4
    rows: list[bytes] = []
    for py in range(n - 1, -1, -1):  # a BMP is stored bottom row first
        row = bytearray()
        for px in range(n):
            square = hole = 0
            for sy in range(samples):
                for sx in range(samples):
                    on, cut = _inside_icon(px + (sx + 0.5) / samples, py + (sy + 0.5) / samples)
                    square += on
                    hole += on and cut
            alpha = round(255 * square / samples**2)
            white = hole / square if square else 0.0
            b, g, r = (round(c + (255 - c) * white) for c in reversed(_FILL))
            row += bytes((b, g, r, alpha))
        rows.append(bytes(row))
    pixels = b"".join(rows)
    mask = bytes(n * n // 8)  # the AND mask, unused with alpha (rows of 4 bytes at 32 px)
    image = (
        struct.pack("<IiiHHIIiiII", 40, n, 2 * n, 1, 32, 0, len(pixels) + len(mask), 0, 0, 0, 0)
        + pixels
        + mask
    )
    header = struct.pack("<HHH", 0, 1, 1)
    entry = struct.pack("<BBBBHHII", n, n, 0, 0, 1, 32, len(image), 6 + 16)
    return header + entry + image
