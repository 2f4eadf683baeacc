"""The settling rule both stores share (`metastore.settling.verdict`): what one read of a
failed write's traces says about it."""

from __future__ import annotations

import pytest

from metastore.settling import Found, Landing, Undecided, verdict
from metastore.versioned import Versioned

RECORD = "/pulsar-isolation/change-history/r1"
AT_7 = Versioned(b"old", 7)


@pytest.mark.parametrize(("landing", "found", "expected"), [
    # a change record present: applied, at its revision, whatever the key holds now
    (Landing("/k", b"new", RECORD, since=7), Found(9, Versioned(b"later", 12)), 9),
    # no record looked for: the value written, at another revision than required
    (Landing("/k", b"new", since=7), Found(None, Versioned(b"new", 9)), 9),
    (Landing("/k", b"new"), Found(None, Versioned(b"new", 9)), 9),
    # the same bytes still at the required revision: not that write
    (Landing("/k", b"old", since=7), Found(None, AT_7), Undecided.NOT_YET),
    # the key moved on without the record: never applies; without a record, unknown
    (Landing("/k", b"new", RECORD, since=7), Found(None, Versioned(b"x", 8)),
     Undecided.NOT_APPLIED),
    (Landing("/k", b"new", RECORD, since=7), Found(None, None), Undecided.NOT_APPLIED),
    (Landing("/k", b"new", since=7), Found(None, Versioned(b"x", 8)), Undecided.UNKNOWN),
    # unchanged, and the read may not yet see it: ask again
    (Landing("/k", b"new", RECORD, since=7), Found(None, AT_7), Undecided.NOT_YET),
    (Landing("/k", b"new", RECORD), Found(None, None), Undecided.NOT_YET),
    # a complete read (ZooKeeper: the session that sent it) without a trace: not applied
    (Landing("/k", b"new", RECORD), Found(None, None, complete=True), Undecided.NOT_APPLIED),
    (Landing("/k", b"new", since=7), Found(None, AT_7, complete=True), Undecided.NOT_APPLIED),
    (Landing("/k", since=7), Found(None, AT_7, complete=True), Undecided.NOT_APPLIED),  # a delete
    # ... unless the write, without record or required revision, may have been overwritten
    (Landing("/k", b"new"), Found(None, Versioned(b"x", 8), complete=True), Undecided.UNKNOWN),
    (Landing("/k", since=7), Found(None, None, complete=True), Undecided.UNKNOWN),  # gone: whose?
])
def test_verdict(landing: Landing, found: Found, expected: int | Undecided) -> None:
    assert verdict(landing, found) == expected
