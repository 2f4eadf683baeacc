"""Ledger ids as Pulsar's `PulsarLedgerIdGenerator` makes them on etcd, so ids we hand out
and ids a Pulsar broker on the same etcd hands out never collide.

31-bit ids (the normal case): make sure `/ledgers/idgen` exists, then create the
ephemeral-sequential key `/ledgers/idgen/ID-<n>` and delete it right away; the id is `n`.
On etcd a sequential key is numbered by first writing its parent unconditionally: `n` is the
parent's version after that write (Pulsar's version, etcd's minus one), unpadded. Every write
of the parent is atomic in etcd, so no two generators, in any process, get the same `n`;
the counter is etcd's own, so it survives restarts.

When `n` reaches 2^31-1 the generator creates `/ledgers/idgen-long` and from then on makes
63-bit ids: the highest `HOB-<%010d>` child of `/ledgers/idgen-long` gives the high 32 bits
(starting at `HOB-0000000001`), a sequential `ID-<n>` under it the low bits; when those run
out too the next `HOB-` key is created. Of more than three `HOB-` keys the oldest are deleted
on a best-effort basis, as Pulsar does.
"""

from __future__ import annotations

import contextlib
import time

from metastore import paths
from metastore.errors import AlreadyExists, BadVersion, MetastoreError, NotFound
from metastore.versioned_keys import VersionedKeys

_HOB_PREFIX = "HOB-"
_ID_PREFIX = "ID-"
_KEPT_HOB_KEYS = 3


class LedgerIdGenerator:
    """Hands out ledger ids. The ephemeral `ID-<n>` keys hang on a lease of this generator
    (granted on first use, refreshed while in use, revoked by `close`)."""

    def __init__(
        self,
        keys: VersionedKeys,
        *,
        session_ttl: int = 30,
        id_limit: int = paths.SHORT_LEDGER_ID_LIMIT,
    ) -> None:
        """`id_limit` is 2^31-1 as in Pulsar; tests lower it to reach the 63-bit layout."""
        self.keys = keys
        self.session_ttl = session_ttl
        self.id_limit = id_limit
        self._lease: int | None = None
        self._lease_refreshed = 0.0

    async def generate(self) -> int:
        """A new ledger id, unique in the cluster."""
        if await self.keys.exists(paths.LEDGER_ID_GEN_LONG):
            return await self._long_id()
        if not await self.keys.exists(paths.LEDGER_ID_GEN):
            await self._create_empty(paths.LEDGER_ID_GEN)
        n = await self._sequential(paths.LEDGER_ID_GEN)
        if 0 <= n < self.id_limit:
            return n
        await self._create_empty(paths.LEDGER_ID_GEN_LONG)  # 31 bits used up
        return await self._long_id()

    async def close(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(MetastoreError):
                await self.keys.revoke_lease(lease)

    async def _long_id(self) -> int:
        while True:
            children = await self.keys.children(paths.LEDGER_ID_GEN_LONG)
            highs = sorted(h for h in map(_hob_number, children) if h is not None)
            if not highs:
                await self._create_empty(_hob_path(1))
                continue
            high = highs[-1]
            low = await self._sequential(_hob_path(high))
            if 0 <= low < self.id_limit:
                await self._forget_old_hob_keys(highs)
                return (high << 32) | low
            await self._create_empty(_hob_path(high + 1))

    async def _create_empty(self, path: str) -> None:
        """Create a counter key if absent. (Pulsar writes it unconditionally; when several
        generators race that only skips numbers, which create-if-absent avoids.)"""
        with contextlib.suppress(AlreadyExists):
            await self.keys.create(path, b"")

    async def _sequential(self, parent: str) -> int:
        """Create and delete the ephemeral-sequential key `parent/ID-<n>`; returns `n`.
        (On ZooKeeper a sequential znode of ZooKeeper's own, ten digits, as BookKeeper's
        `ZkLedgerIdGenerator` makes it.)"""
        return await self.keys.store.take_sequential_number(
            parent, _ID_PREFIX, await self._session_lease())

    async def _forget_old_hob_keys(self, highs: list[int]) -> None:
        # As Pulsar: only a HOB key never written since its creation (version 0) goes.
        for high in highs[:-_KEPT_HOB_KEYS]:
            with contextlib.suppress(NotFound, BadVersion):
                await self.keys.delete(_hob_path(high), expected=0)

    async def _session_lease(self) -> int:
        now = time.monotonic()
        if self._lease is not None and now - self._lease_refreshed > self.session_ttl / 3:
            if not await self.keys.refresh_lease(self._lease):  # expired while unused
                self._lease = None
            self._lease_refreshed = now
        if self._lease is None:
            self._lease = await self.keys.grant_lease(self.session_ttl)
            self._lease_refreshed = now
        return self._lease


def _hob_path(high: int) -> str:
    return f"{paths.LEDGER_ID_GEN_LONG}/{_HOB_PREFIX}{high:010d}"


def _hob_number(child: str) -> int | None:
    digits = child.removeprefix(_HOB_PREFIX)
    return int(digits) if digits.isdigit() else None
