"""The placement console: a browser page served at `/console/` from the static assets shipped
in this package (`static/`: `index.html`, `console.js`, `console.css`; no CDN, nothing fetched
from elsewhere). Its data comes from the same REST API and SSE watch any client uses, with the
caller's token; the assets themselves carry no data and need no authentication."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import RedirectResponse

CONSOLE_URL = "/console"


def static_directory() -> str:
    return str(files("api.console") / "static")


def install_console(app: FastAPI) -> None:
    """Mount the assets at `/console/` (index.html for the directory) and send `/console`
    there."""

    async def to_console(request: Request) -> RedirectResponse:
        return RedirectResponse(request.scope.get("root_path", "") + CONSOLE_URL + "/")

    app.add_route(CONSOLE_URL, to_console, include_in_schema=False)
    app.mount(CONSOLE_URL + "/", StaticFiles(directory=static_directory(), html=True),
              name="console")
