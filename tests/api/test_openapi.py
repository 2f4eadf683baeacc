"""`openapi.yaml` is generated from the app and checked in; it must not drift."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import yaml

from api.openapi.doc import EXTENSION_MARKER as MARKER
from api.openapi_export import openapi_document, openapi_yaml
from tests.support import REPO, ServerProcess

SWAGGER = REPO.parent / "shared" / "reference" / "pulsar-admin-v2-isolation.swagger.json"


def test_checked_in_openapi_matches_the_app() -> None:
    checked_in = (REPO / "openapi.yaml").read_text()
    assert checked_in == openapi_yaml(), "openapi.yaml drifted: run `make openapi`"


def test_operation_ids_follow_pulsars_swagger() -> None:
    ours = {
        (path.removeprefix("/admin/v2"), method): op.get("operationId")
        for path, methods in openapi_document()["paths"].items()
        for method, op in methods.items()
    }
    if not SWAGGER.exists():
        return
    upstream = json.loads(SWAGGER.read_text())
    for path, methods in upstream["paths"].items():
        # Upstream names the bookie-affinity tenant `{property}` for GET/DELETE.
        path = path.replace("{property}", "{tenant}")
        for method, op in methods.items():
            if (path, method) in ours:
                assert ours[(path, method)] == op["operationId"], (path, method)


def test_served_at_openapi_json_with_docs(server: ServerProcess) -> None:
    served = httpx.get(f"{server.url}/openapi.json").json()
    assert served == openapi_document()  # one source: markers included
    marked = [op for ops in served["paths"].values() for op in ops.values() if op.get(MARKER)]
    assert marked and all("extensions" in op["tags"] for op in marked)
    docs = httpx.get(f"{server.url}/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_yaml_round_trips() -> None:
    assert yaml.safe_load((REPO / "openapi.yaml").read_text())["info"]["title"]


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op)
        for path, methods in openapi_document()["paths"].items()
        for method, op in methods.items()
    ]


def has_example(media: dict[str, Any], schemas: dict[str, Any]) -> bool:
    """An example on the media type, or on its schema (through `$ref` and nullable `anyOf`)."""
    if "example" in media or "examples" in media:
        return True
    schema = media.get("schema", {})
    while True:
        if "example" in schema or "examples" in schema:
            return True
        if "$ref" in schema:
            schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in schema:
            schema = next(s for s in schema["anyOf"] if s.get("type") != "null")
        else:
            return False


def test_every_operation_and_parameter_is_described() -> None:
    for method, path, op in operations():
        assert op.get("summary") and op.get("description"), (method, path)
        for parameter in op.get("parameters", []):
            assert parameter.get("description"), (method, path, parameter["name"])
            if parameter["in"] == "path":
                assert parameter.get("examples"), (method, path, parameter["name"])


def test_every_body_and_response_has_an_example() -> None:
    schemas = openapi_document()["components"]["schemas"]
    for method, path, op in operations():
        for media_type, media in op.get("requestBody", {}).get("content", {}).items():
            if media_type != "application/octet-stream":  # the binary twin of text/plain
                assert has_example(media, schemas), (method, path, media_type)
        for status, response in op["responses"].items():
            if status.startswith("2"):
                for media_type, media in response.get("content", {}).items():
                    assert has_example(media, schemas), (method, path, status, media_type)


def test_one_path_parameter_name_per_concept() -> None:
    """The tenant is `tenant` everywhere (upstream says `property` on two bookie-affinity
    operations); query parameters keep their wire names."""
    names = {
        parameter["name"]
        for _, _, op in operations()
        for parameter in op.get("parameters", [])
        if parameter["in"] == "path"
    }
    assert "property" not in names and "tenant" in names


def test_readme_table_lists_every_path_with_its_methods() -> None:
    """README's "What it serves" table has a row per served path naming each of its methods."""
    readme = (REPO / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(/[^`]+)` \| ([^|]+) \|", readme, re.M))
    for path, methods in openapi_document()["paths"].items():
        assert path in rows, f"README's API table lacks {path}"
        for method in methods:
            assert method.upper() in rows[path], (path, method)


def test_every_request_body_has_an_example_valid_against_its_schema() -> None:
    import jsonschema_rs

    from api.openapi_export import openapi_document

    document = openapi_document()
    components = document["components"]
    checked = 0
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for media, content in operation.get("requestBody", {}).get("content", {}).items():
                where = f"{method.upper()} {path} ({media})"
                assert "example" in content or "examples" in content, where
                examples = ([content["example"]] if "example" in content
                            else [e["value"] for e in content["examples"].values()])
                schema = {**content.get("schema", {}), "components": components}
                for example in examples:
                    if media == "application/octet-stream":
                        assert isinstance(example, str), where
                        continue
                    assert jsonschema_rs.validator_for(schema).is_valid(example), where
                    checked += 1
    assert checked >= 15
