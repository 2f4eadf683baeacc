"""Extension: follow `GET /admin/v2/watch` (Server-Sent Events), one printed line per change,
reconnecting by itself after a dropped connection from the revision after the last one seen.

Lines: `<revision> put <key> <document as compact JSON>` and `<revision> delete <key>`. When
the server says the changes cannot continue without a gap (`event: resync`: the revision was
compacted, or this client fell too far behind) the line is `resync <reason> revision=<n>
[compactRevision=<m>]` and the watch ends with exit status 1: re-read the state, then watch
again with `--since <n + 1>`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from cli.client import V2, AdminClient
from cli.errors import AdminError, CliError, ConnectError

WATCH = f"{V2}/watch"
# The server sends a heartbeat every 15 s: three missed ones mean the connection is dead.
READ_TIMEOUT_SECONDS = 45.0
RECONNECT_BACKOFF_SECONDS = (0.2, 0.5, 1.0, 2.0, 5.0)
# Statuses worth retrying: the server or its metadata store is briefly away.
RETRIED_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Event:
    name: str
    data: str
    id: str | None


class ResyncNeeded(CliError):
    """The server ended the watch with `event: resync`."""


def events(lines: Iterator[str], on_comment: Callable[[str], None]) -> Iterator[Event]:
    """The events of a `text/event-stream`, as an EventSource dispatches them."""
    fields: dict[str, list[str]] = {}
    for line in lines:
        if line == "":
            if "data" in fields or "event" in fields:
                ident = fields.get("id")
                yield Event(
                    fields.get("event", ["message"])[-1],
                    "\n".join(fields.get("data", [])),
                    ident[-1] if ident else None,
                )
            fields = {}
        elif line.startswith(":"):
            on_comment(line[1:].strip())
        else:
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))


def change_line(data: dict[str, object]) -> str:
    line = f"{data['revision']} {data['type']} {data['key']}"
    if data["type"] == "put":
        line += " " + json.dumps(data.get("value"), separators=(",", ":"), ensure_ascii=False)
    return line


def resync_line(data: dict[str, object]) -> str:
    line = f"resync {data.get('reason')} revision={data.get('revision')}"
    if "compactRevision" in data:
        line += f" compactRevision={data['compactRevision']}"
    return line


class Watcher:
    """One `bookies watch`: print every change from `since` (None: from now) on, forever."""

    def __init__(
        self, client: AdminClient, prefix: str, since: int | None, out: TextIO = sys.stdout
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.next = since  # the first revision still to print
        self.out = out
        self.err = sys.stderr

    def _comment(self, text: str) -> None:
        # ": watching bookies from revision N": resuming from N misses nothing even when no
        # change came before the connection dropped
        words = text.split()
        if self.next is None and len(words) == 5 and words[:3] == ["watching", self.prefix, "from"]:
            self.next = int(words[4]) if words[4].isdigit() else None

    def run(self) -> None:
        failures = 0
        while True:
            try:
                if self._follow():
                    failures = 0
            except AdminError as exc:
                if exc.status not in RETRIED_STATUSES:
                    raise
                self._note(f"{exc}")
            except ConnectError as exc:
                self._note(f"{exc}")
            delay = RECONNECT_BACKOFF_SECONDS[min(failures, len(RECONNECT_BACKOFF_SECONDS) - 1)]
            failures += 1
            time.sleep(delay)

    def _note(self, why: str) -> None:
        where = f"from revision {self.next}" if self.next is not None else "from now"
        self.err.write(f"Watch connection lost ({why}); resuming {where}\n")
        self.err.flush()

    def _follow(self) -> bool:
        """One connection, until it drops; True when it delivered anything."""
        params: dict[str, str | int | bool] = {"prefix": self.prefix}
        if self.next is not None:
            params["since"] = self.next
        stream = self.client.open_stream(WATCH, params=params, read_timeout=READ_TIMEOUT_SECONDS)
        delivered = False
        try:
            for event in events(stream.lines(), self._comment):
                delivered = True
                data = json.loads(event.data) if event.data else {}
                if event.name in ("put", "delete"):
                    self.out.write(change_line(data) + "\n")
                    self.out.flush()
                    self.next = int(data["revision"]) + 1
                elif event.name == "resync":
                    self.out.write(resync_line(data) + "\n")
                    self.out.flush()
                    raise ResyncNeeded(
                        f"The watch cannot continue without a gap ({data.get('reason')}): "
                        f"re-read the current state, then watch again with --since "
                        f"{int(data.get('revision', 0)) + 1}"
                    )
                elif event.name == "interrupted" and self.next is None:
                    self.next = int(data.get("since", 0)) or None
        finally:
            stream.close()
        self._note("the server ended the stream")
        return delivered


__all__ = ["WATCH", "Event", "ResyncNeeded", "Watcher", "change_line", "events", "resync_line"]
