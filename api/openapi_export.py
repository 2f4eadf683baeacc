"""Print the app's OpenAPI document as YAML: `python -m api.openapi_export > openapi.yaml`.

The checked-in `openapi.yaml` must equal this output; a test fails when they drift."""

from __future__ import annotations

import sys
from typing import Any

import yaml

from api.app import create_app
from api.settings import Settings


def openapi_document() -> dict[str, Any]:
    """The document the app serves at `/openapi.json` (markers included: `api.openapi.doc`)."""
    # The document depends only on the routes; no store is contacted to build it.
    app = create_app(Settings(metadataStoreUrl="etcd:http://127.0.0.1:2379"))
    return app.openapi()


def openapi_yaml() -> str:
    return yaml.safe_dump(openapi_document(), sort_keys=False, allow_unicode=True, width=100)


def main() -> None:
    sys.stdout.write(openapi_yaml())


if __name__ == "__main__":
    main()
