"""Request headers for Pulsar's client authentication plugins.

`AuthenticationToken` (`authParams`: `token:<jwt>`, `file:///path/to/token`, a JSON object
with a `token` key, or the bare token) sends `Authorization: Bearer <jwt>`.
`AuthenticationBasic` (`{"userId":..,"password":..}` or `userId:u,password:p`) sends
`Authorization: Basic <base64(user:password)>`. `AuthenticationTls` (`authParams`:
`tlsCertFile:/path/cert.pem,tlsKeyFile:/path/key.pem`, or the same as a JSON object) sends no
header: the client presents that certificate in the TLS handshake (`tls_key_pair`), so it
works against an https admin URL only. No plugin means no header.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

from cli.errors import ConfigError

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
BASIC_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"
_DISABLED_PLUGINS = {"", "org.apache.pulsar.client.impl.auth.AuthenticationDisabled"}


def _plugin_is(plugin: str, full_name: str) -> bool:
    return plugin in (full_name, full_name.rsplit(".", 1)[1])


def read_token_file(uri: str) -> str:
    """`file:///path` (or `file:relative`): the file's content, trimmed."""
    parsed = urlparse(uri)
    path = Path(unquote(parsed.path or uri[len("file:") :]))
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"Failed to read token from file {path}: {exc.strerror or exc}") from exc


def token_from_params(params: str) -> str:
    if params.startswith("token:"):
        return params[len("token:") :]
    if params.startswith("file:"):
        return read_token_file(params)
    try:
        document = json.loads(params)
    except ValueError:
        return params
    if isinstance(document, dict) and isinstance(document.get("token"), str):
        return document["token"]
    return params


def _key_values(params: str) -> dict[str, str]:
    try:
        document = json.loads(params)
    except ValueError:
        pairs = (item.split(":", 1) for item in params.split(",") if ":" in item)
        return {k.strip(): v.strip() for k, v in pairs}
    return {str(k): str(v) for k, v in document.items()} if isinstance(document, dict) else {}


def auth_headers(plugin: str | None, params: str | None) -> dict[str, str]:
    """The headers every request carries for this plugin and its parameters."""
    if plugin is None or plugin.strip() in _DISABLED_PLUGINS:
        return {}
    plugin = plugin.strip()
    if _plugin_is(plugin, TOKEN_PLUGIN):
        token = token_from_params((params or "").strip())
        return {"Authorization": f"Bearer {token}"}
    if _plugin_is(plugin, TLS_PLUGIN):
        tls_key_pair(plugin, params)  # bad parameters fail before anything is sent
        return {}
    if _plugin_is(plugin, BASIC_PLUGIN):
        values = _key_values(params or "")
        credentials = f"{values.get('userId', '')}:{values.get('password', '')}"
        import base64
        return {"Authorization": "Basic " + base64.b64encode(credentials.encode()).decode()}
    raise ConfigError(f"Unsupported authentication plugin: {plugin}")


def tls_key_pair(plugin: str | None, params: str | None) -> tuple[str, str] | None:
    """(certificate file, key file) of the `AuthenticationTls` plugin; None for another."""
    if plugin is None or not _plugin_is(plugin.strip(), TLS_PLUGIN):
        return None
    values = _key_values(params or "")
    cert, key = values.get("tlsCertFile", ""), values.get("tlsKeyFile", "")
    if not cert or not key:
        raise ConfigError(
            "AuthenticationTls needs authParams tlsCertFile:<certificate>,tlsKeyFile:<key>"
        )
    return cert, key


__all__ = [
    "BASIC_PLUGIN",
    "TLS_PLUGIN",
    "TOKEN_PLUGIN",
    "auth_headers",
    "read_token_file",
    "tls_key_pair",
    "token_from_params",
]
