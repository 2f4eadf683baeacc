"""The OpenAPI document: its assembly, the error responses each operation declares and the
interactive docs pages. `api.openapi_export` prints it as `openapi.yaml`."""
