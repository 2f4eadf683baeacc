"""The one OpenAPI document, served at `/openapi.json` and exported to `openapi.yaml`.

FastAPI builds it from the routes; `OpenApiApp.openapi()` adds what FastAPI cannot express:
the `x-pulsar-extension: true` marker on every operation Pulsar does not have (those tagged
`extensions`). Both the served document and `python -m api.openapi_export` go through here, so
they cannot differ.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

EXTENSION_TAG = "extensions"
EXTENSION_MARKER = "x-pulsar-extension"


def mark_extensions(document: dict[str, Any]) -> dict[str, Any]:
    """Mark every operation tagged `extensions` with `x-pulsar-extension: true`, in place."""
    for methods in document.get("paths", {}).values():
        for operation in methods.values():
            if EXTENSION_TAG in operation.get("tags", ()):
                operation[EXTENSION_MARKER] = True
    return document


class OpenApiApp(FastAPI):
    """FastAPI whose generated document carries our markers (built once, then cached)."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            self.openapi_schema = mark_extensions(super().openapi())
        return self.openapi_schema
