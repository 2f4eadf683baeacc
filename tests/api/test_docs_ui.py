"""`/docs` and `/redoc` render offline: headless Chromium with every non-loopback host blocked
loads the pages from the real server and must find every operation rendered."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from api.openapi.docs_ui import ASSETS_URL
from api.openapi_export import openapi_document
from tests.support import ServerProcess

# Debian's `chromium` (installed by `make system-deps`).
CHROMIUM = "chromium"
OFFLINE = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    # No name resolves except loopback, and anything that still tries goes to a dead proxy.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9",
]


def rendered_dom(url: str, profile: Path) -> str:
    """The page's DOM after scripts ran (bounded by a virtual-time budget), as Chromium dumps it."""
    binary = shutil.which(CHROMIUM)
    if binary is None:
        pytest.fail("chromium is not installed: run `make system-deps`")
    result = subprocess.run(
        [binary, *OFFLINE, f"--user-data-dir={profile}", "--virtual-time-budget=15000",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=90, check=True,
    )  # fmt: skip
    return result.stdout


def operations() -> list[tuple[str, str, str]]:
    """(method, path, operationId) of every operation in the document."""
    return [
        (method, path, op["operationId"])
        for path, methods in openapi_document()["paths"].items()
        for method, op in methods.items()
    ]


def test_pages_load_nothing_from_other_hosts(server: ServerProcess) -> None:
    for page in ("/docs", "/redoc"):
        html = httpx.get(f"{server.url}{page}").text
        assert re.findall(r"(?:src|href)=\"https?://", html) == [], page
        assert "fonts.googleapis" not in html
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        response = httpx.get(f"{server.url}{ASSETS_URL}/{asset}")
        assert response.status_code == 200 and len(response.content) > 100_000, asset


def test_swagger_ui_renders_every_operation_offline(server: ServerProcess, tmp_path: Path) -> None:
    dom = rendered_dom(f"{server.url}/docs", tmp_path / "profile")
    blocks = re.findall(r'class="opblock opblock-(get|put|post|delete)', dom)
    expected = operations()
    assert len(blocks) == len(expected), dom[:2000]
    rendered_paths = set(re.findall(r'data-path="([^"]+)"', dom))
    assert rendered_paths == {path for _, path, _ in expected}


def test_redoc_renders_every_operation_offline(server: ServerProcess, tmp_path: Path) -> None:
    dom = rendered_dom(f"{server.url}/redoc", tmp_path / "profile")
    anchors = set(re.findall(r'id="tag/[^"/]+/operation/([^"]+)"', dom))
    assert anchors == {op_id for _, _, op_id in operations()}, dom[:2000]
