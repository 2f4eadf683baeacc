"""Java's `String.split` with a literal separator."""

from __future__ import annotations


def java_split(text: str, separator: str) -> list[str]:
    """`text.split(separator)`: empty strings at the end are dropped, inner ones kept."""
    parts = text.split(separator)
    while parts and not parts[-1]:
        parts.pop()
    return parts
