"""A subscriber's change stream (`metastore.backend.ChangeStream`) takes only the paths it
covers, and always a `RESYNC`."""

from __future__ import annotations

from metastore.backend import Change, ChangeKind, ChangeStream


async def test_a_stream_takes_the_paths_it_accepts_and_every_resync() -> None:
    stream = ChangeStream(lambda _: None)
    stream.accepts = lambda path: path.startswith("/ledgers/available/")
    published = [
        Change(ChangeKind.MODIFIED, "/bookies"),
        Change(ChangeKind.CREATED, "/ledgers/available/b1:3181"),
        Change(ChangeKind.CREATED, "/pulsar-isolation/change-history/1"),
        Change(ChangeKind.RESYNC, "/"),
        Change(ChangeKind.DELETED, "/ledgers/available/b1:3181"),
    ]
    for change in published:
        stream.publish(change)
    stream.publish(None)
    assert [change async for change in stream] == [published[1], published[3], published[4]]


async def test_a_stream_without_a_filter_takes_everything() -> None:
    stream = ChangeStream(lambda _: None)
    published = [Change(ChangeKind.MODIFIED, "/bookies"), Change(ChangeKind.RESYNC, "/")]
    for change in published:
        stream.publish(change)
    stream.publish(None)
    assert [change async for change in stream] == published
