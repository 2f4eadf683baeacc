"""The admin REST client: httpx underneath, Pulsar's error semantics on top.

Every call goes to `<admin-url>/admin/v2/...` (or `/admin/...` for the one v1 path) with the
authentication headers of the configured plugin. An error status raises
`AdminError(status, reason)` with the server's `{"reason": ...}` (or `HTTP <code> <text>` when
the body is something else, as the Java client falls back to the JAX-RS message); no response
at all raises `ConnectError`. A 204 or empty body reads as `None`.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from cli.auth import auth_headers
from cli.config import ClientConfig
from cli.errors import AdminError, ConfigError, ConnectError

V2 = "/admin/v2"
NO_ADMIN_URL = "Can't find any admin url to use"
Params = Mapping[str, str | int | bool]


def segment(value: str) -> str:
    """One path segment, percent-encoded (`:` kept, as in `host:port`)."""
    return quote(value, safe=":@=-._~,")


def path(*segments: str) -> str:
    return "/" + "/".join(segment(s) for s in segments)


def reason_of(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("reason") is not None:
        return str(body["reason"])
    try:
        phrase = HTTPStatus(response.status_code).phrase
    except ValueError:
        phrase = response.reason_phrase
    return f"HTTP {response.status_code} {phrase}"


def tls_verification(config: ClientConfig) -> ssl.SSLContext:
    """The Java client's defaults: verify the chain, hostname check only when enabled."""
    context = ssl.create_default_context(cafile=config.tls_trust_cert_path)
    context.check_hostname = config.tls_enable_hostname_verification
    if config.tls_allow_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class AdminClient:
    def __init__(self, config: ClientConfig, transport: httpx.BaseTransport | None = None) -> None:
        if not config.admin_url:
            raise ConfigError(NO_ADMIN_URL)
        self.base_url = config.admin_url.rstrip("/")
        headers = {"Accept": "application/json", **auth_headers(config.auth_plugin,
                                                                 config.auth_params)}  # fmt: skip
        verify: ssl.SSLContext | bool = (
            tls_verification(config) if self.base_url.startswith("https:") else True
        )
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(config.request_timeout),
            verify=verify,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Params | None = None,
        json_body: Any = None,
        text_body: str | None = None,
    ) -> httpx.Response:
        """Send; raise AdminError for an error status and ConnectError for no response."""
        content: bytes | None = None
        headers: dict[str, str] = {}
        if text_body is not None:
            content = text_body.encode()
            headers["Content-Type"] = "application/json"
        elif json_body is not None:
            content = json.dumps(json_body, separators=(",", ":"), ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(
                method, url, params=dict(params) if params else None, content=content,
                headers=headers,
            )  # fmt: skip
        except httpx.TimeoutException as exc:
            raise ConnectError(f"Request to {self.base_url}{url} timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise AdminError(response.status_code, reason_of(response))
        return response

    def get_json(self, url: str, params: Params | None = None) -> Any:
        response = self.request("GET", url, params=params)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def get_text(self, url: str) -> str | None:
        response = self.request("GET", url)
        if response.status_code == 204 or not response.content:
            return None
        return response.text

    def put(self, url: str, body: Any = None) -> None:
        self.request("PUT", url, json_body=body)

    def post(self, url: str, body: Any = None, params: Params | None = None) -> None:
        self.request("POST", url, json_body=body, params=params)

    def post_text(self, url: str, text: str) -> None:
        self.request("POST", url, text_body=text)

    def delete(self, url: str, params: Params | None = None) -> None:
        self.request("DELETE", url, params=params)


__all__ = ["NO_ADMIN_URL", "V2", "AdminClient", "path", "reason_of", "segment", "tls_verification"]
