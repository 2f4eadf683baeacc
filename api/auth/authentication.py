"""Who is asking: Pulsar's token authentication (`AuthenticationProviderToken`) and TLS
client-certificate authentication (`AuthenticationProviderTls`).

A request carries `Authorization: Bearer <jwt>`. The token is checked against the key of
`tokenSecretKey` (HS256) or `tokenPublicKey` (the algorithm of `tokenPublicAlg`, RS256 by
default, as Pulsar), both in Pulsar's forms: `data:;base64,<key>`, `file:///path` (the raw
key bytes, as `pulsar tokens create-secret-key --output` and `create-key-pair` write them),
or the base64 key itself. The role is the token's `sub` claim (or `tokenAuthClaim`); when
`tokenAudienceClaim` is set the token must carry `tokenAudience` in that claim. An expired
token (`exp`) is refused. Any failure reads `AuthenticationFailed`; the caller answers 401
without saying why, and nothing here ever puts the token in a message.

`AuthenticationProviderTls`: the role is the common name (CN) of the certificate the client
presented on the TLS listener (already checked against `tlsTrustCertsFilePath` in the
handshake), read from its subject as upstream reads it: the first `CN=` of the RFC 2253 name,
most specific part first. No certificate, or one without a CN, fails.

With several providers (`authenticationProviders`, in the order given) a request is tried
with each and the first that accepts it gives the role, as Pulsar's `AuthenticationService`
does for HTTP; a request naming a method in `X-Pulsar-Auth-Method-Name` (`token`, `tls`) is
tried with that provider only.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import jwt
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

from api.auth.client_certificates import subject_name

BEARER = "bearer "


class AuthenticationFailed(Exception):
    """The request's credentials are missing or do not check out (never carries them)."""


class KeyConfigError(ValueError):
    """`tokenSecretKey` / `tokenPublicKey` cannot be read or decoded."""


def read_key_bytes(setting: str) -> bytes:
    """The key bytes of a `data:`, `file:` or bare-base64 key setting, as Pulsar reads them."""
    text = setting.strip()
    if text.startswith("data:"):
        meta, sep, payload = text[len("data:") :].partition(",")
        if not sep:
            raise KeyConfigError("a data: key needs a ',' before its content")
        if meta.endswith(";base64"):
            try:
                return base64.b64decode(payload, validate=True)
            except ValueError as exc:
                raise KeyConfigError("the data: key is not valid base64") from exc
        return unquote(payload).encode()
    if text.startswith("file:"):
        parsed = urlparse(text)
        path = Path(unquote(parsed.path or text[len("file:") :]))
        try:
            return path.read_bytes()
        except OSError as exc:
            raise KeyConfigError(f"cannot read key file {path}: {exc.strerror or exc}") from exc
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise KeyConfigError("a key setting is data:, file: or base64") from exc


def load_public_key(data: bytes) -> Any:
    """A public key from DER (what Pulsar's `create-key-pair` writes) or PEM bytes."""
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return load_pem_public_key(data)
        return load_der_public_key(data)
    except ValueError as exc:
        raise KeyConfigError("tokenPublicKey is not a DER or PEM public key") from exc


CACHED_TOKENS = 4096


@dataclass(frozen=True)
class TokenAuthenticator:
    """Checks a bearer token; built once at start from the settings.

    A token that checked out is remembered (role and `exp`) so that a client repeating it,
    as every client does, pays for the signature once: up to `CACHED_TOKENS` tokens, the
    whole memo dropped when full. `exp` is checked on every use, so a remembered token still
    expires on time; a token that fails is never remembered."""

    key: Any
    algorithms: tuple[str, ...]
    role_claim: str = "sub"
    audience_claim: str = ""
    audience: str = ""
    checked: dict[str, tuple[str, float]] = field(default_factory=dict, compare=False)

    @classmethod
    def from_settings(
        cls,
        *,
        secret_key: str,
        public_key: str,
        public_alg: str = "RS256",
        role_claim: str = "",
        audience_claim: str = "",
        audience: str = "",
    ) -> TokenAuthenticator:
        if secret_key:
            key: Any = read_key_bytes(secret_key)
            algorithms: tuple[str, ...] = ("HS256", "HS384", "HS512")
        elif public_key:
            key = load_public_key(read_key_bytes(public_key))
            algorithms = (public_alg or "RS256",)
        else:
            raise KeyConfigError(
                "the token provider needs tokenSecretKey or tokenPublicKey to be configured"
            )
        return cls(key, algorithms, role_claim or "sub", audience_claim, audience)

    def role_of(self, token: str) -> str:
        """The role `token` grants, or `AuthenticationFailed`."""
        known = self.checked.get(token)
        if known is not None:
            role, expires = known
            if time.time() < expires:
                return role
            del self.checked[token]
            raise AuthenticationFailed()
        role, expires = self._verify(token)
        if len(self.checked) >= CACHED_TOKENS:
            self.checked.clear()
        self.checked[token] = (role, expires)
        return role

    def _verify(self, token: str) -> tuple[str, float]:
        """(role, expiry time or +inf) of a token whose signature and claims check out."""
        try:
            claims = jwt.decode(
                token,
                self.key,
                algorithms=list(self.algorithms),
                options={"require": [], "verify_aud": False},
            )
        except jwt.PyJWTError:
            raise AuthenticationFailed() from None  # the library's message may quote the token
        if self.audience_claim:
            found = claims.get(self.audience_claim)
            values = found if isinstance(found, list) else [found]
            if self.audience not in values:
                raise AuthenticationFailed()
        role = claims.get(self.role_claim)
        if not isinstance(role, str) or not role:
            raise AuthenticationFailed()
        expires = claims.get("exp")
        return role, float(expires) if isinstance(expires, int | float) else math.inf

    method_name = "token"

    def authenticate(self, headers: Mapping[str, str], client_cert: str | None = None) -> str:
        """The role of the request's bearer token, or `AuthenticationFailed`."""
        value = headers.get("authorization", "")
        if value[: len(BEARER)].lower() != BEARER:
            raise AuthenticationFailed()
        return self.role_of(value[len(BEARER) :].strip())


@dataclass(frozen=True)
class TlsAuthenticator:
    """`AuthenticationProviderTls`: the role is the client certificate's common name."""

    method_name = "tls"

    def authenticate(self, headers: Mapping[str, str], client_cert: str | None = None) -> str:
        del headers
        if client_cert is None:
            raise AuthenticationFailed()
        name = subject_name(client_cert)
        for part in (name or "").split(","):  # upstream's reading of getName() (RFC 2253)
            key, sep, value = part.partition("=")
            if sep and key == "CN" and value:
                return value
        raise AuthenticationFailed()


AUTH_METHOD_HEADER = "x-pulsar-auth-method-name"


@dataclass(frozen=True)
class ProviderChain:
    """Several providers, tried in order; the first that accepts the request gives the role."""

    providers: tuple[TokenAuthenticator | TlsAuthenticator, ...]

    def authenticate(self, headers: Mapping[str, str], client_cert: str | None = None) -> str:
        asked = headers.get(AUTH_METHOD_HEADER, "").strip()
        for provider in self.providers:
            if asked and provider.method_name != asked:
                continue
            try:
                return provider.authenticate(headers, client_cert)
            except AuthenticationFailed:
                continue
        raise AuthenticationFailed()
