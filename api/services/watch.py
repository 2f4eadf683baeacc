"""Extension: changes of the bookies, the policies or the clusters as Server-Sent Events.

`GET /admin/v2/watch?prefix=bookies|policies|clusters&since=<revision>` streams every change of
the selected keys from an etcd watch. What each name selects (Pulsar's own keys):

- `bookies`: the rack map `/bookies` and the bookie registrations under `/ledgers/available/`
  (read-only ones under `/ledgers/available/readonly/` included);
- `policies`: tenants and namespace policies under `/admin/policies/`, the local policies
  (bookie affinity, anti-affinity group) under `/admin/local-policies/`, and every cluster's
  namespace isolation policies `/admin/clusters/{cluster}/namespaceIsolationPolicies`;
- `clusters`: everything else under `/admin/clusters/`: the `ClusterData` documents and the
  failure domains;
- `ledgers`: the ledger metadata keys (`/ledgers/00/0000/L0001`, long ids' too): a ledger
  created, its ensemble changed, closed or deleted; `value` is `{"ledgerId": <id>}` (read the
  metadata from BookKeeper's `/api/v1/ledger/metadata`).

etcd watches one key range, so each name is one range holding all its keys (`bookies`:
[`/bookies`, `/ledgers/available0`), `policies`: `/admin/`, `clusters`: `/admin/clusters/`),
filtered to the keys above: one etcd watch per client keeps etcd's order (revision order, the
events of one revision together), which several merged watches would not.

The stream (`text/event-stream`): first a comment naming the revision it starts from, then one
event per key change:

    id: <revision>
    event: put | delete
    data: {"type": "put", "key": "/bookies", "revision": 42, "value": {...}}

`value` is the decoded document (JSON; a bookie registration's `BookieServiceInfoFormat` as
its endpoints and properties; null for a delete). All events of one revision go out in one
write. A client resumes with `since=<last id>+1`, or a browser's `Last-Event-ID: <last id>`:
it gets every change after the last one it saw, none twice. A comment (`: heartbeat`) every
`HEARTBEAT_SECONDS` keeps proxies from closing an idle stream.

The stream ends with `event: resync` (data: `reason`, the store's current `revision`, and for
a compaction `compactRevision`) when it cannot go on without a gap: the revision asked for was
compacted by etcd (`reason: compacted`), or the client reads slower than changes come and
more than `QUEUE_LIMIT` events, or more than `QUEUE_BYTES` of their stored values, wait for it
(`reason: lagging`). One write carries whole revisions of about `CHUNK_BYTES` at most, so a
watcher holds at most about `QUEUE_BYTES` + 2 x `CHUNK_BYTES` (the queue, the write being made
and what the connection buffers) whatever it is sent; one that stops reading is dropped after
`SEND_TIMEOUT_SECONDS` of a blocked write (`api.http.event_stream`). The client must then re-read
the current state and watch again from `revision + 1`. When the etcd watch itself breaks (etcd
restarted) the stream ends with `event: interrupted` (data: `since`, where to resume).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final

from api.errors import InvalidInput
from metastore import paths
from metastore.bookie_service_info import decode_bookie_service_info
from metastore.codec import dump_json, load_json
from metastore.errors import Compacted, MetastoreError
from metastore.store import MetadataStore, WatchEvent, WatchStream

HEARTBEAT_SECONDS: Final = 15.0
QUEUE_LIMIT: Final = 10_000
QUEUE_BYTES: Final = 8 << 20  # the stored bytes of the changes waiting for one client
CHUNK_BYTES: Final = 1 << 20  # one write holds about this much (whole revisions)
SEND_TIMEOUT_SECONDS: Final = 60.0
MAX_REVISION: Final = 2**63 - 2  # etcd's revisions are int64; the next one must be one too

_REGISTRATIONS = paths.BOOKIES_AVAILABLE + "/"
_ISOLATION_SUFFIX = "/namespaceIsolationPolicies"


def _is_bookie_key(path: str) -> bool:
    return path == paths.BOOKIES_RACK_CONFIG or path.startswith(_REGISTRATIONS)


def _is_policy_key(path: str) -> bool:
    return (
        path.startswith(paths.TENANTS + "/")
        or path.startswith(paths.LOCAL_POLICIES + "/")
        or (path.startswith(paths.CLUSTERS + "/") and path.endswith(_ISOLATION_SUFFIX))
    )


def _is_cluster_key(path: str) -> bool:
    return path.startswith(paths.CLUSTERS + "/") and not path.endswith(_ISOLATION_SUFFIX)


def _is_ledger_key(path: str) -> bool:
    return paths.ledger_id_of(path) is not None


def _children_end(path: str) -> str:
    """The first key after everything under `path + "/"` ('/' + 1 is '0')."""
    return path + "0"


@dataclass(frozen=True)
class Selection:
    """One `prefix` name: the etcd key range watched and the keys of it that belong."""

    name: str
    first: str
    end: str
    keep: Callable[[str], bool]


SELECTIONS: Final[dict[str, Selection]] = {
    "bookies": Selection(
        "bookies", paths.BOOKIES_RACK_CONFIG, _children_end(paths.BOOKIES_AVAILABLE), _is_bookie_key
    ),
    "policies": Selection("policies", "/admin/", _children_end("/admin"), _is_policy_key),
    "clusters": Selection(
        "clusters", paths.CLUSTERS + "/", _children_end(paths.CLUSTERS), _is_cluster_key
    ),
    "ledgers": Selection(
        "ledgers", paths.LEDGERS + "/", _children_end(paths.LEDGERS), _is_ledger_key
    ),
}


def selection(name: str | None) -> Selection:
    found = SELECTIONS.get(name or "")
    if found is None:
        raise InvalidInput(
            f"Invalid prefix '{name or ''}': expected one of {', '.join(SELECTIONS)}"
        )
    return found


def start_revision(since: str | None, last_event_id: str | None) -> int | None:
    """The first revision to send: `since`, else the one after `Last-Event-ID`, else None
    (from now on). A value that is not a positive whole number is a 400."""
    if since is not None:
        return _positive(since, "since")
    if last_event_id is not None and last_event_id.strip():
        return _positive(last_event_id, "Last-Event-ID") + 1
    return None


def _positive(text: str, name: str) -> int:
    value = text.strip()
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_REVISION:
        raise InvalidInput(f"Invalid {name} '{text}': expected a revision, a whole number >= 1")
    return int(value)


def decode_value(path: str, value: bytes | None) -> Any:
    """The document stored at `path`, decoded for a watch event."""
    if value is None:
        return None
    ledger_id = paths.ledger_id_of(path)
    if ledger_id is not None:
        return {"ledgerId": ledger_id}
    if path.startswith(_REGISTRATIONS):
        bookie_id = path.rsplit("/", 1)[1]
        if bookie_id == "readonly" and not value:
            return None  # the read-only registrations' parent key
        try:
            return dataclasses.asdict(decode_bookie_service_info(bookie_id, value))
        except (MetastoreError, ValueError):
            return None
    try:
        return load_json(value)
    except ValueError:
        return None


def event_frame(event: WatchEvent) -> bytes:
    kind = "delete" if event.deleted else "put"
    data = {
        "type": kind,
        "key": event.path,
        "revision": event.revision,
        "value": decode_value(event.path, event.value),
    }
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.revision, kind.encode(), dump_json(data))


def resync_frame(reason: str, revision: int, compact_revision: int | None = None) -> bytes:
    data: dict[str, Any] = {"reason": reason, "revision": revision}
    if compact_revision is not None:
        data["compactRevision"] = compact_revision
    data["message"] = (
        "the changes cannot be sent without a gap: re-read the current state, then watch "
        f"again from since={revision + 1}"
    )
    return b"event: resync\ndata: %s\n\n" % dump_json(data)


def comment(text: str) -> bytes:
    return b": %s\n\n" % text.encode()


@dataclass(frozen=True)
class _Lagging:
    pass


@dataclass(frozen=True)
class _Ended:
    error: Exception


_End = _Lagging | _Ended


class WatchSession:
    """One client's stream: an established etcd watch, pumped into a bounded queue by a task
    of its own, so a slow client never holds back the etcd watch stream of the others."""

    def __init__(
        self,
        store: MetadataStore,
        chosen: Selection,
        start: int,
        stream: WatchStream | None,
        compacted: Compacted | None = None,
        *,
        queue_limit: int = QUEUE_LIMIT,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        queue_bytes: int = QUEUE_BYTES,
    ) -> None:
        self.store = store
        self.selection = chosen
        self.start = start
        self.queue_limit = queue_limit
        self.queue_bytes = queue_bytes
        self.heartbeat_seconds = heartbeat_seconds
        self._stream = stream
        self._compacted = compacted
        self._queue: asyncio.Queue[WatchEvent | _End] = asyncio.Queue()
        self._queued = 0  # bytes of the events in the queue
        self._carry: WatchEvent | _End | None = None  # taken, for the next write
        self._last = start - 1

    @classmethod
    async def open(
        cls,
        store: MetadataStore,
        chosen: Selection,
        since: int | None,
        *,
        queue_limit: int = QUEUE_LIMIT,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        queue_bytes: int = QUEUE_BYTES,
    ) -> WatchSession:
        """Establish the etcd watch (`Unavailable` when etcd does not answer: nothing has been
        sent yet, so the caller can still answer 503)."""
        start = since if since is not None else await store.revision() + 1
        try:
            stream: WatchStream | None = await store.watch_keys(
                chosen.first, chosen.end, start_revision=start
            )
            compacted = None
        except Compacted as exc:
            stream, compacted = None, exc
        return cls(
            store,
            chosen,
            start,
            stream,
            compacted,
            queue_limit=queue_limit,
            heartbeat_seconds=heartbeat_seconds,
            queue_bytes=queue_bytes,
        )

    @property
    def pending(self) -> int:
        """Changes (and an end marker) received from etcd, not yet sent to the client."""
        return self._queue.qsize()

    async def _pump(self, stream: WatchStream) -> None:
        try:
            async for event in stream:
                if not self.selection.keep(event.path):
                    continue
                size = _size(event)
                if (self._queue.qsize() >= self.queue_limit
                        or self._queued + size > self.queue_bytes):
                    self._queue.put_nowait(_Lagging())
                    return
                self._queued += size
                self._queue.put_nowait(event)
            self._queue.put_nowait(_Ended(MetastoreError("the watch ended")))
        except Exception as exc:  # Compacted, Unavailable: the client learns it from the end
            self._queue.put_nowait(_Ended(exc))
        finally:
            await stream.cancel()

    async def frames(self) -> AsyncIterator[bytes]:
        """The stream's bytes, one chunk per batch of changes (never splitting a revision)."""
        if self._stream is None:
            assert self._compacted is not None
            yield await self._resync("compacted", self._compacted.compact_revision)
            return
        pump = asyncio.create_task(self._pump(self._stream), name="watch pump")
        try:
            yield comment(f"watching {self.selection.name} from revision {self.start}")
            while True:
                first = self._carry
                self._carry = None
                if first is None:
                    try:
                        async with asyncio.timeout(self.heartbeat_seconds):
                            first = self._take(await self._queue.get())
                    except TimeoutError:
                        yield comment("heartbeat")
                        continue
                items = [first]
                size = _size(first)
                while not self._queue.empty():
                    item = self._take(self._queue.get_nowait())
                    if (size >= CHUNK_BYTES and isinstance(item, WatchEvent)
                            and isinstance(items[-1], WatchEvent)
                            and item.revision != items[-1].revision):
                        self._carry = item  # the next write starts with it
                        break
                    items.append(item)
                    size += _size(item)
                events = [item for item in items if isinstance(item, WatchEvent)]
                ends = [item for item in items if not isinstance(item, WatchEvent)]
                if events:
                    self._last = events[-1].revision
                    yield b"".join(event_frame(event) for event in events)
                if ends:
                    yield await self._ending(ends[0])
                    return
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump

    def _take(self, item: WatchEvent | _End) -> WatchEvent | _End:
        self._queued -= _size(item)
        return item

    async def _ending(self, end: _End) -> bytes:
        if isinstance(end, _Lagging):
            return await self._resync("lagging")
        if isinstance(end.error, Compacted):
            return await self._resync("compacted", end.error.compact_revision)
        data = {"since": self._last + 1, "message": f"the etcd watch broke: {end.error}"}
        return b"event: interrupted\ndata: %s\n\n" % dump_json(data)

    async def _resync(self, reason: str, compact_revision: int | None = None) -> bytes:
        try:
            revision = await self.store.revision()
        except MetastoreError:
            revision = max(self._last, (compact_revision or 1) - 1)
        return resync_frame(reason, revision, compact_revision)


def _size(item: WatchEvent | _End) -> int:
    """What an item holds of a watcher's memory budget: its key and stored value."""
    if isinstance(item, WatchEvent):
        return len(item.path) + len(item.value or b"")
    return 0


__all__ = [
    "CHUNK_BYTES",
    "HEARTBEAT_SECONDS",
    "QUEUE_BYTES",
    "QUEUE_LIMIT",
    "SELECTIONS",
    "SEND_TIMEOUT_SECONDS",
    "Selection",
    "WatchSession",
    "decode_value",
    "selection",
    "start_revision",
]
