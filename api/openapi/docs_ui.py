"""`/docs` (Swagger UI) and `/redoc` (ReDoc) served offline.

FastAPI's own pages load their JavaScript and CSS from a CDN and ReDoc's fonts from Google, so
they are blank on a machine without internet access. Here the assets come from the
`fastapi-offline` package (Swagger UI 5 and ReDoc 2 standalone bundles, shipped in its wheel),
served under `ASSETS_URL`; the pages themselves are FastAPI's, pointed at those files.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
ASSETS_URL = "/docs-assets"


def assets_directory() -> str:
    """Where the installed `fastapi_offline` package keeps the bundles."""
    return str(files("fastapi_offline") / "static")


def install_docs_ui(app: FastAPI) -> None:
    """Mount the assets and the two pages; the app must be built with `docs_url=None` and
    `redoc_url=None` so FastAPI's CDN pages are not registered too."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_directory()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    async def oauth2_redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    app.add_route(DOCS_URL, swagger_ui, include_in_schema=False)
    app.add_route(OAUTH2_REDIRECT_URL, oauth2_redirect, include_in_schema=False)
    app.add_route(REDOC_URL, redoc, include_in_schema=False)
