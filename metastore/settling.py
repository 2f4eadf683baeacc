"""Settling a write whose call failed after its request may have reached the store: the one
rule for etcd and ZooKeeper (`etcd_keys`, `zookeeper_keys` only read what it needs).

A failed call leaves the write in doubt: it may have been applied, or may still be. Its
`Landing` says how to find out: its change record (a key unique to the write, created in
the same transaction or `multi`), or the value it leaves at its path, and the revision of
that path it requires. The store reads them again until the answer is known or the time
allowed is up (`settle`); each read is judged by `verdict`:

- the record is there (or, without one, the path holds the value written, at a revision
  other than the required one): applied, at the revision found;
- the record is absent while the path has moved on from the required revision without it:
  not applied, and never will be (without a record the write may have been applied and
  overwritten since: unknown);
- the read is `complete` (it sees every write the failed call can ever make: on ZooKeeper,
  a read answered on the session that sent the write, whose requests ZooKeeper answers in
  order) and found neither the record nor, for a write without one, a change of the path
  from the revision it requires: not applied;
- otherwise the read cannot tell; when no read could by the end, `OutcomeUnknown`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from metastore.errors import OutcomeUnknown, Unavailable
from metastore.versioned import Versioned

__all__ = [
    "SETTLED_WRITE_SHARE",
    "SETTLE_RETRY_SECONDS",
    "Found",
    "Landing",
    "Undecided",
    "settle",
    "verdict",
]

SETTLE_RETRY_SECONDS = 0.05  # between the reads that find out whether a failed write landed
# Of the store timeout, a settled write's call has this share and finding out whether it
# landed as much again, so that the answer comes within the timeout (a request's deadline).
SETTLED_WRITE_SHARE = 0.4


@dataclass(frozen=True)
class Landing:
    """How to find out whether a write whose call failed was applied: its change record
    (`record`, a key unique to the write), or the value it leaves at `path`; `since`: the
    revision of `path` the write requires (0: none, or that the key is absent), so a key
    that has moved on since without the write means the write can never apply."""

    path: str
    value: bytes | None = None
    record: str | None = None
    since: int = 0


@dataclass(frozen=True)
class Found:
    """One read of a failed write's traces: the revision of its change record (None:
    absent, or none looked for), the path's state now (None: absent), and whether the read
    sees every write the failed call can ever make (`complete`)."""

    record: int | None
    current: Versioned | None
    complete: bool = False


class Undecided(enum.Enum):
    NOT_APPLIED = "not applied, and never will be"
    UNKNOWN = "may have been applied"
    NOT_YET = "this read cannot tell"


def verdict(landing: Landing, found: Found) -> int | Undecided:
    """The revision the write was applied at, or why that is not known (module docstring)."""
    current = found.current
    if landing.record is not None and found.record is not None:
        return found.record
    at_since = current is not None and current.revision == landing.since
    if landing.record is None and landing.value is not None and current is not None \
            and current.value == landing.value and not (landing.since and at_since):
        return current.revision
    if landing.since and not at_since:  # it can never apply now
        # without a record it may have applied, and been overwritten since
        return Undecided.UNKNOWN if landing.record is None else Undecided.NOT_APPLIED
    if found.complete:
        return Undecided.NOT_APPLIED if landing.record is not None or landing.since \
            else Undecided.UNKNOWN
    return Undecided.NOT_YET


async def settle(
    landing: Landing, read: Callable[[], Awaitable[Found]], budget: float, failure: Unavailable
) -> int:
    """The revision at which the write `landing` describes was applied, found by `read`
    within `budget` seconds; `failure` again when it was not and never can be,
    `OutcomeUnknown` when that cannot be known in time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + budget
    while (left := deadline - loop.time()) > 0:
        try:
            async with asyncio.timeout(left):
                found = await read()
        except (Unavailable, TimeoutError):
            found = None
        if found is not None:
            outcome = verdict(landing, found)
            if isinstance(outcome, int):
                return outcome
            if outcome is Undecided.NOT_APPLIED:
                raise failure
            if outcome is Undecided.UNKNOWN:
                break
        await asyncio.sleep(min(SETTLE_RETRY_SECONDS, max(0.0, deadline - loop.time())))
    raise OutcomeUnknown(landing.path) from failure
