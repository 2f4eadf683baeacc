"""The one OpenAPI document, served at `/openapi.json` and exported to `openapi.yaml`.

FastAPI builds it from the routes; `OpenApiApp.openapi()` adds what FastAPI cannot express:
the `x-pulsar-extension: true` marker on every operation Pulsar does not have (those tagged
`extensions`), and an example on every request body. Both the served document and
`python -m api.openapi_export` go through here, so they cannot differ.
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


# Examples of the bodies whose schema has none of its own (by media type).
MEDIA_EXAMPLES: dict[str, Any] = {"application/octet-stream": "group-a"}


def _schema_example(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    """The first example a body's schema offers: its own, its model's, or that of the first
    branch of an `anyOf` (a body that may be omitted is `anyOf: [model, null]`)."""
    if schema.get("examples"):
        return schema["examples"][0]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        return _schema_example(components.get(ref.rsplit("/", 1)[1], {}), components)
    for branch in schema.get("anyOf", ()):
        found = _schema_example(branch, components)
        if found is not None:
            return found
    return None


def add_request_examples(document: dict[str, Any]) -> dict[str, Any]:
    """Give every request body an `example` (from its schema, else `MEDIA_EXAMPLES`), in
    place, so generated clients and the docs page show one for each."""
    components = document.get("components", {}).get("schemas", {})
    for methods in document.get("paths", {}).values():
        for operation in methods.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            for media, content in (body or {}).get("content", {}).items():
                if "example" in content or "examples" in content:
                    continue
                example = _schema_example(content.get("schema", {}), components)
                if example is None:
                    example = MEDIA_EXAMPLES.get(media)
                if example is not None:
                    content["example"] = example
    return document


class OpenApiApp(FastAPI):
    """FastAPI whose generated document carries our markers and body examples (built once,
    then cached)."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            self.openapi_schema = add_request_examples(mark_extensions(super().openapi()))
        return self.openapi_schema
