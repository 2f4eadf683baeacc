"""Client certificates on the `webServicePortTls` listener, for `AuthenticationProviderTls`.

uvicorn does not put the peer's certificate in the ASGI scope. `ClientCertHttpProtocol` (the
TLS listener's HTTP protocol) adds ASGI's TLS extension to every request of a connection:
`scope["extensions"]["tls"]` with `client_cert_chain` (the PEM of the certificate the client
presented, which the handshake already checked against `tlsTrustCertsFilePath`; empty when it
presented none), `client_cert_name` (its subject, RFC 4514), `tls_version` and
`cipher_suite`. Plain-HTTP requests carry no such extension.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any

from cryptography import x509
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def tls_extension(ssl_object: ssl.SSLObject | None) -> dict[str, Any]:
    """ASGI's TLS extension for a connection."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    chain = [ssl.DER_cert_to_PEM_cert(der)] if der else []
    cipher = ssl_object.cipher() if ssl_object is not None else None
    return {
        "server_cert": None,
        "client_cert_chain": chain,
        "client_cert_name": subject_name(chain[0]) if chain else None,
        "client_cert_error": None,
        "tls_version": ssl_object.version() if ssl_object is not None else None,
        "cipher_suite": cipher[0] if cipher else None,
    }


def subject_name(pem: str) -> str | None:
    """The certificate's subject as RFC 4514 text, most specific part first (what Java's
    `X500Principal.getName()` answers, in RFC 2253)."""
    try:
        return x509.load_pem_x509_certificate(pem.encode()).subject.rfc4514_string()
    except ValueError:
        return None


def client_certificate(scope: Mapping[str, Any]) -> str | None:
    """The PEM of the client certificate of this request's TLS connection, if any."""
    tls = scope.get("extensions", {}).get("tls")
    if not isinstance(tls, Mapping):
        return None
    chain = tls.get("client_cert_chain") or []
    return str(chain[0]) if chain else None


class ClientCertHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, adding the TLS extension to each request's scope."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        extension = tls_extension(transport.get_extra_info("ssl_object"))
        app: ASGIApp = self.app

        async def with_tls(scope: Scope, receive: Receive, send: Send) -> None:
            scope["extensions"] = {**scope.get("extensions", {}), "tls": extension}
            await app(scope, receive, send)

        self.app = with_tls


__all__ = ["ClientCertHttpProtocol", "client_certificate", "subject_name", "tls_extension"]
