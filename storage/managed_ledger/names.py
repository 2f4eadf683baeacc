"""Topic names as Pulsar persists them (`TopicName.getPersistenceNamingEncoding`)."""

from __future__ import annotations

from urllib.parse import unquote_plus

_UNRESERVED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


def codec_encode(text: str) -> str:
    """Java's `URLEncoder.encode(text, UTF_8)` (Pulsar's `Codec.encode`): letters, digits and
    `.-*_` kept, space as `+`, everything else as upper-case %XX of its UTF-8 bytes."""
    out: list[str] = []
    for char in text:
        if char in _UNRESERVED:
            out.append(char)
        elif char == " ":
            out.append("+")
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode())
    return "".join(out)


def codec_decode(text: str) -> str:
    return unquote_plus(text)


def managed_ledger_name(tenant: str, namespace: str, topic: str) -> str:
    """`tenant/ns/persistent/<encoded local name>`: the key under /managed-ledgers/."""
    return f"{tenant}/{namespace}/persistent/{codec_encode(topic)}"


def managed_ledger_path(name: str) -> str:
    return f"/managed-ledgers/{name}"


def topic_url(tenant: str, namespace: str, topic: str) -> str:
    return f"persistent://{tenant}/{namespace}/{topic}"
