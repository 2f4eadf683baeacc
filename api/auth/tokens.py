"""`python -m api tokens ...`: Pulsar's `pulsar tokens` tool for this service's tokens.

    create-secret-key [--output F] [--base64]
    create-key-pair --output-private-key F --output-public-key F [--signature-algorithm RS256|ES256]
    create --subject ROLE [--expiry-time 1h] (--secret-key KEY | --private-key KEY)
           [--signature-algorithm ALG]
    show [TOKEN | --token-file F | --stdin]
    validate (--secret-key KEY | --public-key KEY) [TOKEN | --token-file F | --stdin]
           [--signature-algorithm ALG]

Keys as Pulsar writes and reads them: a secret key is 32 random bytes (raw in a file, or
base64 on stdout with `--base64`), a key pair is DER (PKCS#8 private, X.509 public); a KEY
argument is `data:;base64,...`, `file:///path` or the base64 key itself. Tokens carry only
`sub` (and `exp` with `--expiry-time`), with the header `{"alg": ...}` as Pulsar's.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from api.auth.authentication import KeyConfigError, load_public_key, read_key_bytes

PAIR_ALGORITHMS = ("RS256", "ES256")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


class TokenToolError(Exception):
    """A bad argument or key; printed as the tool's one-line error (exit 1)."""


def parse_relative_time(text: str) -> int:
    """Seconds in Pulsar's relative time (`30s`, `10m`, `1h`, `7d`, `2w`, `1y`)."""
    match = re.fullmatch(r"(\d+)([smhdwy]?)", text.strip())
    if match is None:
        raise TokenToolError(f"Invalid time '{text}'. Valid formats are: 30s, 10m, 1h, 7d, 2w, 1y")
    return int(match.group(1)) * _UNITS[match.group(2) or "s"]


def new_secret_key() -> bytes:
    return os.urandom(32)


def new_key_pair(algorithm: str) -> tuple[bytes, bytes]:
    """(private PKCS#8 DER, public X.509 DER) for RS256 (2048-bit RSA) or ES256 (P-256)."""
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm == "RS256":
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm == "ES256":
        private = ec.generate_private_key(ec.SECP256R1())
    else:
        raise TokenToolError(f"unsupported signature algorithm {algorithm} (RS256 or ES256)")
    private_der = private.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_der, public_der


def _private_key(setting: str) -> Any:
    data = read_key_bytes(setting)
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except ValueError as exc:
        raise TokenToolError("the private key is not a DER or PEM private key") from exc


def _pair_algorithm(key: Any, requested: str | None) -> str:
    if requested:
        return requested
    return (
        "ES256"
        if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey)
        else "RS256"
    )


def create_token(
    subject: str,
    *,
    secret_key: str | None = None,
    private_key: str | None = None,
    expiry_seconds: int | None = None,
    algorithm: str | None = None,
    now: float | None = None,
) -> str:
    claims: dict[str, Any] = {"sub": subject}
    if expiry_seconds is not None:
        claims["exp"] = int((time.time() if now is None else now) + expiry_seconds)
    if secret_key:
        key: Any = read_key_bytes(secret_key)
        alg = algorithm or "HS256"
    elif private_key:
        key = _private_key(private_key)
        alg = _pair_algorithm(key, algorithm)
    else:
        raise TokenToolError("Either --secret-key or --private-key needs to be passed")
    return jwt.encode(claims, key, algorithm=alg, headers={"typ": None})


def show_token(token: str) -> str:
    """Header and claims, unverified, as `pulsar tokens show` prints them."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise TokenToolError("not a JWT") from exc
    compact = (",", ":")
    return "\n---\n".join(json.dumps(part, separators=compact) for part in (header, claims))


def validate_token(
    token: str,
    *,
    secret_key: str | None = None,
    public_key: str | None = None,
    algorithm: str | None = None,
) -> dict[str, Any]:
    if secret_key:
        key: Any = read_key_bytes(secret_key)
        algorithms = [algorithm or "HS256"]
    elif public_key:
        key = load_public_key(read_key_bytes(public_key))
        algorithms = [_pair_algorithm(key, algorithm)]
    else:
        raise TokenToolError("Either --secret-key or --public-key needs to be passed")
    try:
        claims: dict[str, Any] = jwt.decode(token, key, algorithms=algorithms)
    except jwt.ExpiredSignatureError as exc:
        raise TokenToolError("the token has expired") from exc
    except jwt.PyJWTError as exc:
        raise TokenToolError("the token is not valid for this key") from exc
    return claims


def _claims_text(claims: dict[str, Any]) -> str:
    """Java's `Claims.toString()`: `{sub=role, exp=1700000000}`."""
    return "{" + ", ".join(f"{k}={v}" for k, v in claims.items()) + "}"


def _read_token(args: argparse.Namespace) -> str:
    if args.stdin:
        return sys.stdin.read().strip()
    if args.token_file:
        return Path(args.token_file).read_text().strip()
    if args.token:
        return str(args.token).strip()
    raise TokenToolError("Token needs to be either passed as an argument or through -f or -i")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m api tokens", description="JWT tokens")
    sub = parser.add_subparsers(dest="command", required=True)
    secret = sub.add_parser("create-secret-key", help="a new secret key for HS256 tokens")
    secret.add_argument("-o", "--output", help="file for the raw key (default: stdout)")
    secret.add_argument("-b", "--base64", action="store_true", help="print the key as base64")
    secret.add_argument("-a", "--signature-algorithm", default="HS256")
    pair = sub.add_parser("create-key-pair", help="a new private/public key pair (DER)")
    pair.add_argument("-a", "--signature-algorithm", default="RS256", choices=PAIR_ALGORITHMS)
    pair.add_argument("--output-private-key", required=True)
    pair.add_argument("--output-public-key", required=True)
    create = sub.add_parser("create", help="a new token for a role")
    create.add_argument("-s", "--subject", required=True, help="the role")
    create.add_argument("-e", "--expiry-time", help="relative expiry: 30s, 10m, 1h, 7d, 1y")
    create.add_argument("-sk", "--secret-key")
    create.add_argument("-pk", "--private-key")
    create.add_argument("-a", "--signature-algorithm")
    for name, helptext in (("show", "print a token's header and claims"),
                           ("validate", "check a token against a key")):  # fmt: skip
        command = sub.add_parser(name, help=helptext)
        command.add_argument("token", nargs="?")
        command.add_argument("-f", "--token-file")
        command.add_argument("-i", "--stdin", action="store_true")
        if name == "validate":
            command.add_argument("-sk", "--secret-key")
            command.add_argument("-pk", "--public-key")
            command.add_argument("-a", "--signature-algorithm")
    return parser


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except (TokenToolError, KeyConfigError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "create-secret-key":
        key = new_secret_key()
        if args.output:
            Path(args.output).write_bytes(key)
        elif args.base64:
            print(base64.b64encode(key).decode())
        else:
            sys.stdout.buffer.write(key)
    elif args.command == "create-key-pair":
        private_der, public_der = new_key_pair(args.signature_algorithm)
        Path(args.output_private_key).write_bytes(private_der)
        Path(args.output_public_key).write_bytes(public_der)
    elif args.command == "create":
        expiry = parse_relative_time(args.expiry_time) if args.expiry_time else None
        print(create_token(args.subject, secret_key=args.secret_key, private_key=args.private_key,
                           expiry_seconds=expiry, algorithm=args.signature_algorithm))  # fmt: skip
    elif args.command == "show":
        print(show_token(_read_token(args)))
    else:
        claims = validate_token(
            _read_token(args),
            secret_key=args.secret_key,
            public_key=args.public_key,
            algorithm=args.signature_algorithm,
        )
        print(_claims_text(claims))
    return 0
