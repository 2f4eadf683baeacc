"""Extension: `GET /admin/v2/watch`, changes as Server-Sent Events (see api/services/watch.py
for what each `prefix` selects and the stream's format)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from api.deps import MetastoreDep, SettingsDep
from api.http.event_stream import EVENT_STREAM, EventStreamResponse
from api.services import watch

router = APIRouter(prefix="/admin/v2", tags=["extensions"])

EXAMPLE_STREAM = (
    ": watching bookies from revision 42\n\n"
    'id: 42\nevent: put\ndata: {"type":"put","key":"/bookies","revision":42,'
    '"value":{"default":{"127.0.0.1:3181":{"rack":"/rack1"}}}}\n\n'
    'id: 43\nevent: delete\ndata: {"type":"delete","key":"/ledgers/available/'
    '127.0.0.1:3181","revision":43,"value":null}\n\n'
    ": heartbeat\n\n"
)


@router.get(
    "/watch",
    operation_id="watchChanges",
    summary="Extension: changes of bookies, policies, clusters or ledgers as Server-Sent Events",
    response_class=EventStreamResponse,
    status_code=200,
    responses={
        200: {
            "description": (
                "An event stream: `id: <revision>`, `event: put|delete`, `data:` the key, its "
                "revision and decoded document; `event: resync` when the client must re-read"
            ),
            "content": {EVENT_STREAM: {"schema": {"type": "string"}, "example": EXAMPLE_STREAM}},
        }
    },
)
async def watch_changes(
    store: MetastoreDep,
    settings: SettingsDep,
    prefix: Annotated[
        str,
        Query(description="What to watch: `bookies`, `policies`, `clusters` or `ledgers`"),
    ],
    since: Annotated[
        str | None,
        Query(
            description=(
                "First etcd revision to send (resume with the last event's id + 1); "
                "absent: changes from now on"
            )
        ),
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            description="A reconnecting EventSource's last event id: resume after it",
        ),
    ] = None,
) -> EventStreamResponse:
    """Stream every change of the keys `prefix` selects, from revision `since` on.

    `bookies`: `/bookies` and the registrations under `/ledgers/available/`; `policies`:
    `/admin/policies/`, `/admin/local-policies/` and every cluster's
    `namespaceIsolationPolicies`; `clusters`: the rest of `/admin/clusters/` (cluster data,
    failure domains); `ledgers`: the ledger metadata keys. Each event's id is its etcd
    revision; reconnecting with
    `since=<last id>+1` (or `Last-Event-ID`) gives every later change exactly once. When that
    is impossible (etcd compacted the revision, or the client fell too far behind) the stream
    sends `event: resync` with the current revision and ends. A `: heartbeat` comment comes
    every 15 s. Super-user only."""
    chosen = watch.selection(prefix)
    start = watch.start_revision(since, last_event_id)
    session = await watch.WatchSession.open(store, chosen, start,
                                            queue_bytes=settings.watchMaxQueuedBytes)
    return EventStreamResponse(session.frames(), send_timeout=settings.watchSendTimeoutSeconds)
