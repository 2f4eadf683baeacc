"""The one conflict-retry policy: how often a lost compare-and-swap is tried again, and how
long to pause in between. `retry_on_conflict` runs a read-then-commit attempt under it; group
commit (`group_commit.KeyWriter`) requeues a batch that lost under the same policy.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from metastore.errors import BadVersion

T = TypeVar("T")

MAX_CAS_ATTEMPTS = 64


async def conflict_backoff(attempt: int) -> None:
    """A short random pause after losing a CAS, growing with the attempt number."""
    await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))


async def retry_on_conflict(attempt: Callable[[], Awaitable[T]]) -> T:
    """Run a read-then-`commit` attempt again while its guards lose to a concurrent writer."""
    for number in range(MAX_CAS_ATTEMPTS):
        try:
            return await attempt()
        except BadVersion:
            await conflict_backoff(number)
    raise BadVersion("too many concurrent modifications")
