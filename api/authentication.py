"""Who is asking: Pulsar's token authentication (`AuthenticationProviderToken`).

A request carries `Authorization: Bearer <jwt>`. The token is checked against the key of
`tokenSecretKey` (HS256) or `tokenPublicKey` (the algorithm of `tokenPublicAlg`, RS256 by
default, as Pulsar), both in Pulsar's forms: `data:;base64,<key>`, `file:///path` (the raw
key bytes, as `pulsar tokens create-secret-key --output` and `create-key-pair` write them),
or the base64 key itself. The role is the token's `sub` claim (or `tokenAuthClaim`); when
`tokenAudienceClaim` is set the token must carry `tokenAudience` in that claim. An expired
token (`exp`) is refused. Any failure reads `AuthenticationFailed`; the caller answers 401
without saying why, and nothing here ever puts the token in a message.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import jwt
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

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


@dataclass(frozen=True)
class TokenAuthenticator:
    """Checks a bearer token; built once at start from the settings."""

    key: Any
    algorithms: tuple[str, ...]
    role_claim: str = "sub"
    audience_claim: str = ""
    audience: str = ""

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
        return role

    def authenticate(self, headers: Mapping[str, str]) -> str:
        """The role of the request's bearer token, or `AuthenticationFailed`."""
        value = headers.get("authorization", "")
        if value[: len(BEARER)].lower() != BEARER:
            raise AuthenticationFailed()
        return self.role_of(value[len(BEARER) :].strip())
