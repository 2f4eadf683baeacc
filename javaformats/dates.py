"""Pulsar's `DateFormatter.format(long)`: a timestamp in ms as Java's
`DateTimeFormatter.ISO_OFFSET_DATE_TIME` prints it in the broker's time zone.

Java prints the fraction of a second with as few digits as it needs (`.8`, `.05`, `.123`)
and none at all when it is zero, and the offset as `Z` for UTC, else `+HH:MM` (`:SS` when
the offset has seconds). Used for the message endpoints' `X-Pulsar-*-time` headers and the
internal stats' timestamps.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo


def _offset(delta: timedelta | None) -> str:
    seconds = int(delta.total_seconds()) if delta is not None else 0
    if seconds == 0:
        return "Z"
    sign = "+" if seconds > 0 else "-"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def format_date(ms: int, zone: tzinfo | None = None) -> str:
    """`DateFormatter.format(ms)` in `zone` (the machine's local zone when None)."""
    seconds, millis = divmod(ms, 1000)
    try:
        when = datetime.fromtimestamp(seconds, UTC).astimezone(zone)
    except (OverflowError, OSError, ValueError):
        when = datetime.fromtimestamp(0, UTC).astimezone(zone)  # beyond Python's years
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if millis:
        text += "." + f"{millis:03d}".rstrip("0")
    return text + _offset(when.utcoffset())
