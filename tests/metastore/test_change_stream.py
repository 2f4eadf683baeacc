"""A subscriber's change stream (`metastore.backend.ChangeStream`) takes only the paths it
covers, and always a `RESYNC`; a path no open stream takes is not wanted."""

from __future__ import annotations

from metastore.backend import Change, ChangeKind, ChangeStream, Subscribers


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


def test_a_path_is_wanted_while_an_open_stream_accepts_it() -> None:
    """`Subscribers.wanted`: a backend drops a notification no open stream would take."""
    subscribers = Subscribers()
    history = "/pulsar-isolation/change-history/1"
    assert not subscribers.wanted("/bookies")
    racks = subscribers.open_stream()
    assert subscribers.wanted(history)  # a stream not yet filtered takes everything
    racks.accepts = lambda path: path == "/bookies"
    assert subscribers.wanted("/bookies") and not subscribers.wanted(history)
    reader = subscribers.open_stream()
    reader.accepts = lambda path: path.startswith("/pulsar-isolation/change-history/")
    assert subscribers.wanted(history)
    reader.close()
    assert not subscribers.wanted(history)
